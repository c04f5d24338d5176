// hvd::torch::elastic::State: the model, the optimizer and the tracked values as one LibTorch
// archive (the module's and the optimizer's own save/load), which hvd::elastic commits and
// restores. Runs on the training thread.
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <sstream>

#include "horovodcpp/torch.h"

namespace hvd::torch::elastic {
namespace {

constexpr const char* kValuePrefix = "value.";

}  // namespace

State::State(::torch::nn::Module& model, ::torch::optim::Optimizer& optimizer)
    : model_(model), optimizer_(optimizer) {}

void State::add(const std::string& name, std::function<c10::IValue()> get,
                std::function<void(const c10::IValue&)> set) {
  for (const auto& t : tracked_)
    if (t.name == name) throw Error("elastic State: '" + name + "' is already tracked");
  tracked_.push_back({name, std::move(get), std::move(set)});
}

State& State::track(const std::string& name, hvd::elastic::ElasticSampler& sampler) {
  add(name, [&sampler] { return c10::IValue(sampler.save()); },
      [&sampler](const c10::IValue& v) { sampler.load(v.toIntVector()); });
  return *this;
}

std::string State::serialize() const {
  ::torch::serialize::OutputArchive archive, model, optimizer;
  model_.save(model);
  optimizer_.save(optimizer);
  archive.write("model", model);
  archive.write("optimizer", optimizer);
  for (const auto& t : tracked_) archive.write(kValuePrefix + t.name, t.get());
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

void State::deserialize(const std::string& bytes) {
  ::torch::serialize::InputArchive archive, model, optimizer;
  try {
    archive.load_from(bytes.data(), bytes.size());
    archive.read("model", model);
    model_.load(model);
    archive.read("optimizer", optimizer);
    optimizer_.load(optimizer);
  } catch (const c10::Error& e) {
    throw Error(std::string("elastic State: the commit does not load into this model and "
                            "optimizer (same architecture and optimizer class needed): ") +
                e.what_without_backtrace());
  }
  for (const auto& t : tracked_) {
    c10::IValue value;
    if (!archive.try_read(kValuePrefix + t.name, value))
      throw Error("elastic State: the commit has no value '" + t.name +
                  "' (was it tracked when the commit was taken?)");
    t.set(value);
  }
}

}  // namespace hvd::torch::elastic
