// Helpers that make every rank start from root's state: parameters and buffers, optimizer state
// and options, arbitrary objects as bytes, and a metric average. Run on the caller's thread; each
// is a collective that every rank calls in the same order.
#include <torch/serialize.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <c10/util/Type.h>

#include <algorithm>
#include <functional>
#include <iomanip>
#include <sstream>
#include <typeinfo>

#include "horovodcpp/torch.h"
#include "tensor_adapter.h"

namespace hvd::torch {
namespace {

// The root's index among the set's ranks (root is a global rank, as in Horovod). Throws when
// the root or this rank is not in the set.
int root_index(const std::string& who, int root, const ProcessSet& set) {
  const std::vector<int> ranks = set.ranks();
  if (set.is_global()) {
    if (root < 0 || root >= static_cast<int>(ranks.size()))
      throw Error(who + ": root rank " + std::to_string(root) + " is out of range [0, " + std::to_string(ranks.size()) + ")");
    return root;
  }
  const auto at = std::find(ranks.begin(), ranks.end(), root);
  if (at == ranks.end()) throw Error(who + ": root rank " + std::to_string(root) + " is not in " + set.describe());
  if (!set.included())
    throw Error(who + ": rank " + std::to_string(hvd::rank()) + " is not in " + set.describe());
  return static_cast<int>(at - ranks.begin());
}

// "rank(s) 1, 3": positions in a set's gather, named by their global ranks.
std::string global_ranks(const std::vector<std::size_t>& positions, const ProcessSet& set) {
  const std::vector<int> ranks = set.ranks();
  std::string out;
  for (std::size_t p : positions) out += (out.empty() ? "" : ", ") + std::to_string(ranks.at(p));
  return out;
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
void check_same_tensors(const NamedTensors& tensors, int root, int root_at, const ProcessSet& set) {
  const auto prints =
      allgather_object<std::int64_t>(fingerprint(tensors), "broadcast_parameters.fingerprint", set);
  std::vector<std::size_t> differing;
  for (std::size_t r = 0; r < prints.size(); ++r)
    if (prints[r] != prints[root_at]) differing.push_back(r);
  if (!differing.empty())
    throw Error("broadcast_parameters: rank(s) " + global_ranks(differing, set) +
                " hold tensors whose names, dtypes or shapes differ from root rank " + std::to_string(root) +
                "'s (this rank has " + std::to_string(tensors.size()) + ")");
}

void broadcast_tensors(const NamedTensors& tensors, int root, const ProcessSet& set) {
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
    BroadcastOptions options;
    options.root = root;
    options.name = name;
    options.process_set = set;
    pending.push_back({t, wire, broadcast_async_(wire, options)});
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
void check_same_optimizer(::torch::optim::Optimizer& optimizer, int root, int root_at, const ProcessSet& set,
                          const std::string& who) {
  const auto all = allgather_object(describe_optimizer(optimizer), who + ".fingerprint", set);
  std::vector<std::size_t> differing;
  for (std::size_t r = 0; r < all.size(); ++r)
    if (all[r] != all[root_at]) differing.push_back(r);
  if (!differing.empty())
    throw Error(who + ": rank(s) " + global_ranks(differing, set) + " hold an optimizer unlike root rank " +
                std::to_string(root) + "'s: root rank " + std::to_string(root) + " has " + all[root_at] + "; rank " +
                global_ranks({differing.front()}, set) + " has " + all[differing.front()]);
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

void broadcast_parameters(const NamedTensors& parameters, int root, const ProcessSet& process_set) {
  const int root_at = root_index("broadcast_parameters", root, process_set);
  for (const auto& item : parameters)
    if (!item.value().defined()) throw Error("broadcast_parameters: tensor '" + item.key() + "' is undefined");
  if (process_set.size() == 1) return;
  check_same_tensors(parameters, root, root_at, process_set);
  broadcast_tensors(parameters, root, process_set);
}

void broadcast_parameters(const ::torch::nn::Module& module, int root, const ProcessSet& process_set) {
  NamedTensors all;
  for (const auto& item : module.named_parameters()) all.insert("parameter:" + item.key(), item.value());
  for (const auto& item : module.named_buffers()) all.insert("buffer:" + item.key(), item.value());
  broadcast_parameters(all, root, process_set);
}

void broadcast_optimizer_state(::torch::optim::Optimizer& optimizer, int root, const ProcessSet& process_set) {
  const std::string who = "broadcast_optimizer_state";
  const int root_at = root_index(who, root, process_set);
  if (process_set.size() == 1) return;
  check_same_optimizer(optimizer, root, root_at, process_set, who);
  const bool is_root = hvd::rank() == root;
  const std::string payload =
      detail::broadcast_bytes(is_root ? save_optimizer_state(optimizer) : "", root, who, process_set);
  const std::string failure = is_root ? "" : load_optimizer_state(optimizer, payload);
  // Every rank learns whether every load worked, so none carries on alone.
  const auto failures = allgather_object(failure, who + ".outcome", process_set);
  for (std::size_t r = 0; r < failures.size(); ++r)
    if (!failures[r].empty())
      throw Error(who + ": rank " + global_ranks({r}, process_set) + " could not load root rank " +
                  std::to_string(root) + "'s optimizer state: " + failures[r]);
}

double metric_average(double value, const std::string& name, const ProcessSet& process_set) {
  at::Tensor t = at::full({1}, value, at::kDouble);
  AllreduceOptions options;
  options.name = name;
  options.process_set = process_set;
  allreduce_(t, options);
  return t.item<double>();
}

namespace detail {

std::string broadcast_bytes(const std::string& payload, int root, const std::string& name,
                            const ProcessSet& process_set) {
  root_index("broadcast_object", root, process_set);
  if (process_set.size() == 1) return payload;
  const bool named = !name.empty();
  BroadcastOptions options;
  options.root = root;
  options.process_set = process_set;
  at::Tensor length = at::full({1}, static_cast<std::int64_t>(payload.size()), at::kLong);
  options.name = named ? name + ".length" : "";
  broadcast_(length, options);
  at::Tensor bytes = at::empty({length.item<std::int64_t>()}, at::kByte);
  if (hvd::rank() == root && !payload.empty()) std::memcpy(bytes.data_ptr(), payload.data(), payload.size());
  options.name = named ? name + ".bytes" : "";
  broadcast_(bytes, options);
  if (bytes.numel() == 0) return {};
  return std::string(static_cast<const char*>(bytes.data_ptr()), static_cast<std::size_t>(bytes.numel()));
}

std::vector<std::string> allgather_bytes(const std::string& payload, const std::string& name,
                                         const ProcessSet& process_set) {
  const bool named = !name.empty();
  AllgatherOptions options;
  options.process_set = process_set;
  options.name = named ? name + ".length" : "";
  at::Tensor length = at::full({1}, static_cast<std::int64_t>(payload.size()), at::kLong);
  at::Tensor lengths = allgather(length, options);
  at::Tensor bytes = at::empty({static_cast<std::int64_t>(payload.size())}, at::kByte);
  if (!payload.empty()) std::memcpy(bytes.data_ptr(), payload.data(), payload.size());
  options.name = named ? name + ".bytes" : "";
  at::Tensor all = allgather(bytes, options);
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

void agree_on_outcome(const std::string& failure, const std::string& op, const std::string& name,
                      const ProcessSet& process_set) {
  if (process_set.size() == 1) {
    if (!failure.empty()) throw Error(failure);
    return;
  }
  const auto all = allgather_bytes(failure, name.empty() ? name : name + ".outcome", process_set);
  std::vector<std::size_t> failed;
  for (std::size_t r = 0; r < all.size(); ++r)
    if (!all[r].empty()) failed.push_back(r);
  if (!failed.empty())
    throw Error(op + ": failed on rank(s) " + global_ranks(failed, process_set) + "; rank " +
                global_ranks({failed.front()}, process_set) + ": " + all[failed.front()]);
}

}  // namespace detail
}  // namespace hvd::torch
