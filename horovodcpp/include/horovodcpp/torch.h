// horovodcpp's LibTorch front end: collectives on torch tensors (CPU and CUDA), a
// DistributedOptimizer that overlaps gradient allreduces with backward, and helpers that
// broadcast model and optimizer state, and SyncBatchNorm. Every function may be called from any
// user thread once hvd::init() has run. allreduce and allgather (the out-of-place forms) are
// differentiable when their input requires grad; every other collective reads and writes
// tensors directly, outside autograd.
//
//   namespace ht = hvd::torch;
//   auto avg = ht::allreduce(t, {hvd::ReduceOp::Average, "loss"});
//   ht::broadcast_parameters(model->named_parameters(), 0);
//   ht::DistributedOptimizer opt(torch::optim::SGD(model->parameters(), lr * hvd::size()),
//                                model->named_parameters());
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/ordered_dict.h>

#include <c10/util/Type.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "horovodcpp/horovod.h"

namespace hvd::torch {

using NamedTensors = ::torch::OrderedDict<std::string, at::Tensor>;

// A pending collective on torch tensors. Copies share the operation; outputs are the tensors the
// operation writes (the input itself for the in-place variants). Used by any user thread.
class Handle {
 public:
  struct State;  // defined in horovodcpp/torch/ops.cc
  Handle() = default;
  explicit Handle(std::shared_ptr<State> state) : state_(std::move(state)) {}
  bool valid() const { return state_ != nullptr; }
  bool poll() const;                       // true once complete (successfully or not)
  std::vector<at::Tensor> wait_all() const;  // blocks; throws hvd::Error if it failed
  at::Tensor wait() const;                 // the first output
  // alltoall: rows of the first dimension received from each rank (after completion).
  std::vector<std::int64_t> received_splits() const;

 private:
  std::shared_ptr<State> state_;
};

// Horovod's names for the two handle calls.
inline at::Tensor synchronize(const Handle& handle) { return handle.wait(); }
inline bool poll(const Handle& handle) { return handle.poll(); }

// --- collectives -------------------------------------------------------------------------------
// Inputs must be defined, contiguous, of a dtype the core supports (uint8, int8, int32, int64,
// float16, bfloat16, float32, float64) and on the CPU or a CUDA device; anything else throws
// hvd::Error before anything is sent. An empty name is generated (then call in the same order on
// every rank). The async inputs must not be modified until the handle completes.

// Differentiable when `tensor` requires grad (and grad mode is on): the backward pass allreduces
// the incoming gradient with the same op and scale factors (Sum and Average only), under the
// name "<name>.grad".
at::Tensor allreduce(const at::Tensor& tensor, const AllreduceOptions& options = {});
Handle allreduce_async(const at::Tensor& tensor, const AllreduceOptions& options = {});
const at::Tensor& allreduce_(const at::Tensor& tensor, const AllreduceOptions& options = {});
Handle allreduce_async_(const at::Tensor& tensor, const AllreduceOptions& options = {});

// One negotiation for the whole list (names are "<name>.<index>").
std::vector<at::Tensor> grouped_allreduce(const std::vector<at::Tensor>& tensors,
                                          const AllreduceOptions& options = {});
Handle grouped_allreduce_async(const std::vector<at::Tensor>& tensors, const AllreduceOptions& options = {});
void grouped_allreduce_(const std::vector<at::Tensor>& tensors, const AllreduceOptions& options = {});
Handle grouped_allreduce_async_(const std::vector<at::Tensor>& tensors, const AllreduceOptions& options = {});

// Concatenates every rank's tensor along the first dimension (first dimensions may differ).
// Differentiable when `tensor` requires grad: the backward pass sums the gradient of the whole
// result over ranks and keeps this rank's rows.
at::Tensor allgather(const at::Tensor& tensor, const AllgatherOptions& options = {});
Handle allgather_async(const at::Tensor& tensor, const AllgatherOptions& options = {});

// Root's values everywhere: broadcast returns a new tensor, broadcast_ overwrites `tensor`.
at::Tensor broadcast(const at::Tensor& tensor, const BroadcastOptions& options = {});
Handle broadcast_async(const at::Tensor& tensor, const BroadcastOptions& options = {});
const at::Tensor& broadcast_(const at::Tensor& tensor, const BroadcastOptions& options = {});
Handle broadcast_async_(const at::Tensor& tensor, const BroadcastOptions& options = {});

// Sends options.splits[r] rows of the first dimension to rank r (even split when empty); the
// result stacks what every rank sent here, in rank order. received_splits, when given, gets the
// rows that came from each rank.
at::Tensor alltoall(const at::Tensor& tensor, const AlltoallOptions& options = {},
                    std::vector<std::int64_t>* received_splits = nullptr);
Handle alltoall_async(const at::Tensor& tensor, const AlltoallOptions& options = {});

// Reduces across ranks and keeps this rank's block of the first dimension (the first
// rows % size ranks get one row more).
at::Tensor reducescatter(const at::Tensor& tensor, const ReducescatterOptions& options = {});
Handle reducescatter_async(const at::Tensor& tensor, const ReducescatterOptions& options = {});

// Grouped allgather / reducescatter: one negotiation and one handle for the whole list (names
// are "<name>.<index>"; Handle::wait_all() gives the results in order), fused into one backend
// call up to HOROVOD_FUSION_THRESHOLD. Every tensor must be on the same device.
std::vector<at::Tensor> grouped_allgather(const std::vector<at::Tensor>& tensors, const AllgatherOptions& options = {});
Handle grouped_allgather_async(const std::vector<at::Tensor>& tensors, const AllgatherOptions& options = {});
std::vector<at::Tensor> grouped_reducescatter(const std::vector<at::Tensor>& tensors,
                                              const ReducescatterOptions& options = {});
Handle grouped_reducescatter_async(const std::vector<at::Tensor>& tensors, const ReducescatterOptions& options = {});

// --- state helpers -----------------------------------------------------------------------------

// Overwrites every tensor with root's values (in place; one broadcast per tensor, all started
// before the first is waited on). Names, dtypes and shapes must be the same on every rank (they
// are compared first: any difference is an error on every rank). Broadcast a Module to include
// its buffers.
// With a process set, only its ranks take part and `root` is a global rank in the set.
void broadcast_parameters(const NamedTensors& parameters, int root = 0, const ProcessSet& process_set = {});
void broadcast_parameters(const ::torch::nn::Module& module, int root = 0, const ProcessSet& process_set = {});

// Makes every rank's optimizer an exact copy of root's: per-parameter state (e.g. Adam's step,
// exp_avg, exp_avg_sq; SGD's momentum buffers) and each param group's options (learning rate,
// betas, ...). The optimizers must be of the same class with the same param groups, parameter
// counts, dtypes and shapes: the ranks compare these first, and any difference (or a rank that
// cannot load root's state) is an hvd::Error on every rank naming the ranks and what differs.
void broadcast_optimizer_state(::torch::optim::Optimizer& optimizer, int root = 0,
                               const ProcessSet& process_set = {});

// Averages a scalar metric (loss, accuracy) over ranks (of the set).
double metric_average(double value, const std::string& name = {}, const ProcessSet& process_set = {});

namespace detail {
std::string broadcast_bytes(const std::string& payload, int root, const std::string& name,
                            const ProcessSet& process_set = {});
std::vector<std::string> allgather_bytes(const std::string& payload, const std::string& name,
                                         const ProcessSet& process_set = {});
std::string pickle(const c10::IValue& value);
c10::IValue unpickle(const std::string& bytes);
// Objects travel behind their C++ type's name, so a rank that expects another type (even one
// of the same size) notices: "<type>\0<bytes>". untagged() throws naming both types.
std::string tagged(const std::string& type, const std::string& bytes);
std::string untagged(const std::string& payload, const std::string& type, const std::string& op,
                     const std::string& source);
template <class T>
std::string type_tag() {
  return c10::demangle(typeid(T).name());
}
// Collective: every rank learns every rank's failure ("" for none), and all of them throw the
// same hvd::Error when any failed, naming the ranks.
void agree_on_outcome(const std::string& failure, const std::string& op, const std::string& name,
                      const ProcessSet& process_set = {});

template <class T>
std::string encode_object(const T& value) {
  if constexpr (std::is_same_v<T, std::string>) {
    return value;
  } else if constexpr (std::is_trivially_copyable_v<T>) {
    return std::string(reinterpret_cast<const char*>(&value), sizeof(T));
  } else {
    return pickle(c10::IValue(value));
  }
}

// "broadcast_object of 'name'" (or without the name), for messages.
inline std::string object_op(const char* op, const std::string& name) {
  return name.empty() ? std::string(op) : std::string(op) + " of '" + name + "'";
}

// `op` and `source` ("root rank 0", "rank 3") name the exchange in errors.
template <class T>
T decode_object(const std::string& bytes, const std::string& op, const std::string& source) {
  if constexpr (std::is_same_v<T, std::string>) {
    return bytes;
  } else if constexpr (std::is_trivially_copyable_v<T>) {
    if (bytes.size() != sizeof(T))
      throw Error(op + ": got " + std::to_string(bytes.size()) + " bytes from " + source + " for a " +
                  std::to_string(sizeof(T)) + "-byte value (is the type the same on every rank?)");
    T value;
    std::memcpy(&value, bytes.data(), sizeof(T));
    return value;
  } else if constexpr (std::is_same_v<T, c10::IValue>) {
    return unpickle(bytes);
  } else {
    try {
      return unpickle(bytes).template to<T>();
    } catch (const c10::Error& e) {
      throw Error(op + ": the value from " + source + " does not convert to this rank's type (is the type the "
                  "same on every rank?): " + e.what_without_backtrace());
    }
  }
}
}  // namespace detail

// Root's value on every rank. T is std::string (raw bytes), a trivially copyable type, or any
// type c10::IValue holds (tensors, lists, dicts, tuples, strings), which is pickled.
// A rank whose type differs from root's makes every rank throw, root included. With a process
// set, only its ranks take part and `root` is a global rank in the set.
template <class T>
T broadcast_object(const T& value, int root = 0, const std::string& name = {}, const ProcessSet& process_set = {}) {
  const std::string op = detail::object_op("broadcast_object", name);
  const std::string source = "root rank " + std::to_string(root);
  const std::string payload =
      detail::broadcast_bytes(detail::tagged(detail::type_tag<T>(), detail::encode_object(value)), root, name,
                              process_set);
  std::optional<T> out;
  std::string failure;
  try {
    out = detail::decode_object<T>(detail::untagged(payload, detail::type_tag<T>(), op, source), op, source);
  } catch (const Error& e) {
    failure = e.what();
  }
  detail::agree_on_outcome(failure, op, name, process_set);
  return std::move(*out);
}

// Every rank's value, in rank order (with a process set: its ranks' values, in the set's order).
template <class T>
std::vector<T> allgather_object(const T& value, const std::string& name = {}, const ProcessSet& process_set = {}) {
  std::vector<T> out;
  const std::string op = detail::object_op("allgather_object", name);
  const auto all =
      detail::allgather_bytes(detail::tagged(detail::type_tag<T>(), detail::encode_object(value)), name, process_set);
  const std::vector<int> ranks = process_set.ranks();
  for (std::size_t r = 0; r < all.size(); ++r) {
    const std::string source = "rank " + std::to_string(r < ranks.size() ? ranks[r] : static_cast<int>(r));
    out.push_back(detail::decode_object<T>(detail::untagged(all[r], detail::type_tag<T>(), op, source), op, source));
  }
  return out;
}

}  // namespace hvd::torch

#include "horovodcpp/torch/distributed_optimizer.h"
#include "horovodcpp/torch/elastic.h"
#include "horovodcpp/torch/sync_batch_norm.h"
