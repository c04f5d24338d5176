// Helpers that make every rank start from root's state: parameters and buffers, optimizer state
// and options, arbitrary objects as bytes, and a metric average. Run on the caller's thread; each
// is a collective that every rank calls in the same order.
#include <torch/serialize.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <c10/util/Type.h>

#include <functional>
#include <iomanip>
#include <sstream>
#include <typeinfo>

#include "horovodcpp/torch.h"
#include "tensor_adapter.h"

namespace hvd::torch {
namespace {

void check_root(const std::string& who, int root) {
  const int size = hvd::size();
  if (root < 0 || root >= size)
    throw Error(who + ": root rank " + std::to_string(root) + " is out of range [0, " + std::to_string(size) + ")");
}

// Names, dtypes and shapes in order, so ranks can tell whether they hold the same tensors.
std::int64_t fingerprint(const NamedTensors& tensors) {
  std::string text;
  for (const auto& item : tensors) {
    const at::Tensor& t = item.value();
    text += item.key() + "|" + std::string(c10::toString(t.scalar_type())) + "|";
    for (auto d : t.sizes()) text += std::to_string(d) + ",";
    text += ";";
  }
  return static_cast<std::int64_t>(std::hash<std::string>{}(text));
}

// Every rank throws the same error when any rank's tensors differ from root's, so none is left
// waiting in a broadcast the others never start.
void check_same_tensors(const NamedTensors& tensors, int root) {
  const auto prints = allgather_object<std::int64_t>(fingerprint(tensors), "broadcast_parameters.fingerprint");
  std::string differing;
  for (std::size_t r = 0; r < prints.size(); ++r)
    if (prints[r] != prints[root]) differing += (differing.empty() ? "" : ", ") + std::to_string(r);
  if (!differing.empty())
    throw Error("broadcast_parameters: rank(s) " + differing +
                " hold tensors whose names, dtypes or shapes differ from root rank " + std::to_string(root) +
                "'s (this rank has " + std::to_string(tensors.size()) + ")");
}

void broadcast_tensors(const NamedTensors& tensors, int root) {
  struct Pending {
    at::Tensor target, wire;
    Handle handle;
  };
  std::vector<Pending> pending;
  for (const auto& item : tensors) {
    const std::string name = "broadcast_parameters." + item.key();
    const at::Tensor& t = item.value();
    detail::to_hvd_dtype(t.scalar_type(), "broadcast_parameters", item.key());
    at::Tensor wire = t.is_contiguous() ? t : t.contiguous();
    pending.push_back({t, wire, broadcast_async_(wire, {root, name})});
  }
  at::NoGradGuard no_grad;
  std::string failure;
  for (auto& p : pending) {
    try {
      p.handle.wait();
      if (!p.wire.is_same(p.target)) p.target.copy_(p.wire);
    } catch (const std::exception& e) {
      if (failure.empty()) failure = e.what();
    }
  }
  if (!failure.empty()) throw Error("broadcast_parameters: " + failure);
}

// What must agree before root's state can load on a rank: the optimizer class (which fixes the
// per-parameter state keys, e.g. Adam's exp_avg and exp_avg_sq), the param groups, each group's
// parameter count, and the parameters' dtypes and shapes (as a hash).
std::string describe_optimizer(::torch::optim::Optimizer& optimizer) {
  const auto& groups = optimizer.param_groups();
  std::ostringstream out;
  out << c10::demangle(typeid(optimizer).name()) << " with " << groups.size() << " param group(s) of ";
  std::string shapes;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    out << (i == 0 ? "" : ", ") << groups[i].params().size();
    for (const auto& p : groups[i].params()) {
      shapes += std::string(c10::toString(p.scalar_type())) + "[";
      for (auto d : p.sizes()) shapes += std::to_string(d) + ",";
      shapes += "];";
    }
  }
  out << " parameter(s), dtypes/shapes hash " << std::hex << std::setw(8) << std::setfill('0')
      << (std::hash<std::string>{}(shapes) & 0xffffffffu);
  return out.str();
}

// Every rank throws the same error, before any state is sent, when an optimizer differs from root's.
void check_same_optimizer(::torch::optim::Optimizer& optimizer, int root, const std::string& who) {
  const auto all = allgather_object(describe_optimizer(optimizer), who + ".fingerprint");
  std::string differing;
  int first = -1;
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r] == all[root]) continue;
    differing += (differing.empty() ? "" : ", ") + std::to_string(r);
    if (first < 0) first = static_cast<int>(r);
  }
  if (first >= 0)
    throw Error(who + ": rank(s) " + differing + " hold an optimizer unlike root rank " + std::to_string(root) +
                "'s: root rank " + std::to_string(root) + " has " + all[root] + "; rank " + std::to_string(first) +
                " has " + all[first]);
}

std::string save_optimizer_state(::torch::optim::Optimizer& optimizer) {
  auto& groups = optimizer.param_groups();
  // The optimizer's own archive (per-parameter state) plus each group's options, which
  // Optimizer::load leaves alone.
  ::torch::serialize::OutputArchive archive;
  ::torch::serialize::OutputArchive state(archive.compilation_unit());
  optimizer.save(state);
  archive.write("state", state);
  for (std::size_t i = 0; i < groups.size(); ++i) {
    ::torch::serialize::OutputArchive options(archive.compilation_unit());
    groups[i].options().serialize(options);
    archive.write("options/" + std::to_string(i), options);
  }
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

// Returns what went wrong ("" on success).
std::string load_optimizer_state(::torch::optim::Optimizer& optimizer, const std::string& payload) {
  auto& groups = optimizer.param_groups();
  try {
    std::istringstream in(payload);
    ::torch::serialize::InputArchive archive;
    c10::Device device = at::kCPU;
    if (!groups.empty() && !groups.front().params().empty()) device = groups.front().params().front().device();
    archive.load_from(in, device);
    ::torch::serialize::InputArchive state;
    archive.read("state", state);
    optimizer.state().clear();
    optimizer.load(state);
    for (std::size_t i = 0; i < groups.size(); ++i) {
      ::torch::serialize::InputArchive options;
      archive.read("options/" + std::to_string(i), options);
      groups[i].options().serialize(options);
    }
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

}  // namespace

void broadcast_parameters(const NamedTensors& parameters, int root) {
  check_root("broadcast_parameters", root);
  for (const auto& item : parameters)
    if (!item.value().defined()) throw Error("broadcast_parameters: tensor '" + item.key() + "' is undefined");
  if (hvd::size() == 1) return;
  check_same_tensors(parameters, root);
  broadcast_tensors(parameters, root);
}

void broadcast_parameters(const ::torch::nn::Module& module, int root) {
  NamedTensors all;
  for (const auto& item : module.named_parameters()) all.insert("parameter:" + item.key(), item.value());
  for (const auto& item : module.named_buffers()) all.insert("buffer:" + item.key(), item.value());
  broadcast_parameters(all, root);
}

void broadcast_optimizer_state(::torch::optim::Optimizer& optimizer, int root) {
  const std::string who = "broadcast_optimizer_state";
  check_root(who, root);
  if (hvd::size() == 1) return;
  check_same_optimizer(optimizer, root, who);
  const bool is_root = hvd::rank() == root;
  const std::string payload = detail::broadcast_bytes(is_root ? save_optimizer_state(optimizer) : "", root, who);
  const std::string failure = is_root ? "" : load_optimizer_state(optimizer, payload);
  // Every rank learns whether every load worked, so none carries on alone.
  const auto failures = allgather_object(failure, who + ".outcome");
  for (std::size_t r = 0; r < failures.size(); ++r)
    if (!failures[r].empty())
      throw Error(who + ": rank " + std::to_string(r) + " could not load root rank " + std::to_string(root) +
                  "'s optimizer state: " + failures[r]);
}

double metric_average(double value, const std::string& name) {
  at::Tensor t = at::full({1}, value, at::kDouble);
  allreduce_(t, {ReduceOp::Average, name});
  return t.item<double>();
}

namespace detail {

std::string broadcast_bytes(const std::string& payload, int root, const std::string& name) {
  check_root("broadcast_object", root);
  if (hvd::size() == 1) return payload;
  const bool named = !name.empty();
  at::Tensor length = at::full({1}, static_cast<std::int64_t>(payload.size()), at::kLong);
  broadcast_(length, {root, named ? name + ".length" : ""});
  at::Tensor bytes = at::empty({length.item<std::int64_t>()}, at::kByte);
  if (hvd::rank() == root && !payload.empty()) std::memcpy(bytes.data_ptr(), payload.data(), payload.size());
  broadcast_(bytes, {root, named ? name + ".bytes" : ""});
  if (bytes.numel() == 0) return {};
  return std::string(static_cast<const char*>(bytes.data_ptr()), static_cast<std::size_t>(bytes.numel()));
}

std::vector<std::string> allgather_bytes(const std::string& payload, const std::string& name) {
  const bool named = !name.empty();
  at::Tensor length = at::full({1}, static_cast<std::int64_t>(payload.size()), at::kLong);
  at::Tensor lengths = allgather(length, {named ? name + ".length" : ""});
  at::Tensor bytes = at::empty({static_cast<std::int64_t>(payload.size())}, at::kByte);
  if (!payload.empty()) std::memcpy(bytes.data_ptr(), payload.data(), payload.size());
  at::Tensor all = allgather(bytes, {named ? name + ".bytes" : ""});
  std::vector<std::string> out;
  const auto* cursor = static_cast<const char*>(all.data_ptr());
  const auto* sizes = lengths.data_ptr<std::int64_t>();
  for (std::int64_t r = 0; r < lengths.numel(); ++r) {
    const auto n = static_cast<std::size_t>(sizes[r]);
    out.emplace_back(n == 0 ? std::string() : std::string(cursor, n));
    cursor += n;
  }
  return out;
}

std::string pickle(const c10::IValue& value) {
  const std::vector<char> bytes = ::torch::pickle_save(value);
  return std::string(bytes.begin(), bytes.end());
}

c10::IValue unpickle(const std::string& bytes) {
  return ::torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
}

std::string tagged(const std::string& type, const std::string& bytes) { return type + '\0' + bytes; }

std::string untagged(const std::string& payload, const std::string& type, const std::string& op,
                     const std::string& source) {
  const auto end = payload.find('\0');
  if (end == std::string::npos) throw Error(op + ": the bytes from " + source + " carry no type");
  if (payload.compare(0, end, type) != 0)
    throw Error(op + ": " + source + " sent a " + payload.substr(0, end) + " but this rank expects a " + type +
                " (the type must be the same on every rank)");
  return payload.substr(end + 1);
}

void agree_on_outcome(const std::string& failure, const std::string& op, const std::string& name) {
  if (hvd::size() == 1) {
    if (!failure.empty()) throw Error(failure);
    return;
  }
  const auto all = allgather_bytes(failure, name.empty() ? name : name + ".outcome");
  std::string ranks;
  int first = -1;
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r].empty()) continue;
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    if (first < 0) first = static_cast<int>(r);
  }
  if (first >= 0)
    throw Error(op + ": failed on rank(s) " + ranks + "; rank " + std::to_string(first) + ": " + all[first]);
}

}  // namespace detail
}  // namespace hvd::torch
