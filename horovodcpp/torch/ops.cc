// hvd::torch collectives: check the torch tensors, wrap them for the core and enqueue. Runs on
// the caller's thread; outputs of unknown shape are allocated by the background thread.
#include <utility>

#include "autograd_ops.h"
#include "horovodcpp/torch.h"
#include "tensor_adapter.h"

namespace hvd::torch {

using detail::check_tensor;
using detail::ready_event;
using detail::wrap;

// Shared by the copies of a torch Handle: the core operation and where its results live.
struct Handle::State {
  hvd::Handle core;
  std::vector<at::Tensor> outputs;  // known up front: the inputs (in place) or preallocated
  bool runtime_outputs = false;     // outputs allocated by the runtime (allgather, ...)
};

namespace {

const Handle::State& state_of(const std::shared_ptr<Handle::State>& state) {
  if (!state) throw Error("hvd::torch::Handle: this handle does not refer to an operation");
  return *state;
}

Handle make_handle(hvd::Handle core, std::vector<at::Tensor> outputs, bool runtime_outputs = false) {
  auto state = std::make_shared<Handle::State>();
  state->core = std::move(core);
  state->outputs = std::move(outputs);
  state->runtime_outputs = runtime_outputs;
  return Handle(std::move(state));
}

at::Tensor empty_like_contiguous(const at::Tensor& t) { return at::empty_like(t, at::MemoryFormat::Contiguous); }

Handle allreduce_into(const at::Tensor& tensor, const at::Tensor& output, const AllreduceOptions& options) {
  check_tensor(tensor, "allreduce", options.name);
  auto core = hvd::allreduce_async(wrap(tensor), tensor.is_same(output) ? wrap(tensor) : wrap(output), options,
                                   ready_event(tensor));
  return make_handle(std::move(core), {output});
}

Handle grouped_into(const std::vector<at::Tensor>& tensors, const std::vector<at::Tensor>& outputs,
                    const AllreduceOptions& options) {
  std::vector<TensorPtr> in, out;
  std::vector<ReadyEventPtr> ready;
  bool any_cuda = false;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::string name = (options.name.empty() ? std::string("grouped_allreduce") : options.name) + "." +
                             std::to_string(i);
    check_tensor(tensors[i], "grouped_allreduce", name);
    in.push_back(wrap(tensors[i]));
    out.push_back(tensors[i].is_same(outputs[i]) ? in.back() : wrap(outputs[i]));
    ready.push_back(ready_event(tensors[i]));
    any_cuda = any_cuda || tensors[i].is_cuda();
  }
  if (!any_cuda) ready.clear();
  auto core = hvd::grouped_allreduce_async(std::move(in), std::move(out), options, std::move(ready));
  return make_handle(std::move(core), outputs);
}

// The core inputs, ready events and one allocator for a grouped allgather or reducescatter.
struct GroupInputs {
  std::vector<TensorPtr> in;
  std::vector<ReadyEventPtr> ready;
  OutputAllocator allocate;
};

GroupInputs group_inputs(const std::vector<at::Tensor>& tensors, const char* what, const std::string& group) {
  GroupInputs g;
  bool any_cuda = false;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::string name = (group.empty() ? std::string(what) : group) + "." + std::to_string(i);
    check_tensor(tensors[i], what, name);
    if (tensors[i].device() != tensors.front().device())
      throw Error(std::string(what) + " of '" + name + "': on " + tensors[i].device().str() + " but member 0 is on " +
                  tensors.front().device().str() + "; every tensor of a group must be on the same device");
    g.in.push_back(wrap(tensors[i]));
    g.ready.push_back(ready_event(tensors[i]));
    any_cuda = any_cuda || tensors[i].is_cuda();
  }
  if (!any_cuda) g.ready.clear();
  if (!tensors.empty()) g.allocate = detail::torch_allocator(tensors.front());
  return g;
}

Handle broadcast_into(const at::Tensor& tensor, const at::Tensor& output, const BroadcastOptions& options) {
  check_tensor(tensor, "broadcast", options.name);
  auto core = hvd::broadcast_async(wrap(tensor), tensor.is_same(output) ? wrap(tensor) : wrap(output), options,
                                   ready_event(tensor));
  return make_handle(std::move(core), {output});
}

}  // namespace

bool Handle::poll() const { return state_of(state_).core.poll(); }

std::vector<at::Tensor> Handle::wait_all() const {
  const State& s = state_of(state_);
  s.core.wait();
  if (!s.runtime_outputs) return s.outputs;
  std::vector<at::Tensor> out;
  for (const auto& t : s.core.outputs()) out.push_back(detail::unwrap(t));
  return out;
}

at::Tensor Handle::wait() const {
  auto outputs = wait_all();
  return outputs.empty() ? at::Tensor() : outputs.front();
}

std::vector<std::int64_t> Handle::received_splits() const {
  const State& s = state_of(state_);
  s.core.wait();
  return s.core.received_splits();
}

Handle allreduce_async(const at::Tensor& tensor, const AllreduceOptions& options) {
  check_tensor(tensor, "allreduce", options.name);
  return allreduce_into(tensor, empty_like_contiguous(tensor), options);
}

at::Tensor allreduce(const at::Tensor& tensor, const AllreduceOptions& options) {
  if (tensor.defined() && tensor.requires_grad() && at::GradMode::is_enabled())
    return detail::differentiable_allreduce(tensor, options);
  return allreduce_async(tensor, options).wait();
}

Handle allreduce_async_(const at::Tensor& tensor, const AllreduceOptions& options) {
  return allreduce_into(tensor, tensor, options);
}

const at::Tensor& allreduce_(const at::Tensor& tensor, const AllreduceOptions& options) {
  allreduce_async_(tensor, options).wait();
  return tensor;
}

Handle grouped_allreduce_async(const std::vector<at::Tensor>& tensors, const AllreduceOptions& options) {
  std::vector<at::Tensor> outputs;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    check_tensor(tensors[i], "grouped_allreduce",
                 (options.name.empty() ? std::string("grouped_allreduce") : options.name) + "." + std::to_string(i));
    outputs.push_back(empty_like_contiguous(tensors[i]));
  }
  return grouped_into(tensors, outputs, options);
}

std::vector<at::Tensor> grouped_allreduce(const std::vector<at::Tensor>& tensors, const AllreduceOptions& options) {
  return grouped_allreduce_async(tensors, options).wait_all();
}

Handle grouped_allreduce_async_(const std::vector<at::Tensor>& tensors, const AllreduceOptions& options) {
  return grouped_into(tensors, tensors, options);
}

void grouped_allreduce_(const std::vector<at::Tensor>& tensors, const AllreduceOptions& options) {
  grouped_allreduce_async_(tensors, options).wait();
}

Handle allgather_async(const at::Tensor& tensor, const AllgatherOptions& options) {
  check_tensor(tensor, "allgather", options.name);
  auto core = hvd::allgather_async(wrap(tensor), detail::torch_allocator(tensor), options, ready_event(tensor));
  return make_handle(std::move(core), {}, true);
}

at::Tensor allgather(const at::Tensor& tensor, const AllgatherOptions& options) {
  if (tensor.defined() && tensor.requires_grad() && at::GradMode::is_enabled())
    return detail::differentiable_allgather(tensor, options);
  return allgather_async(tensor, options).wait();
}

Handle broadcast_async(const at::Tensor& tensor, const BroadcastOptions& options) {
  check_tensor(tensor, "broadcast", options.name);
  return broadcast_into(tensor, empty_like_contiguous(tensor), options);
}

at::Tensor broadcast(const at::Tensor& tensor, const BroadcastOptions& options) {
  return broadcast_async(tensor, options).wait();
}

Handle broadcast_async_(const at::Tensor& tensor, const BroadcastOptions& options) {
  return broadcast_into(tensor, tensor, options);
}

const at::Tensor& broadcast_(const at::Tensor& tensor, const BroadcastOptions& options) {
  broadcast_async_(tensor, options).wait();
  return tensor;
}

Handle alltoall_async(const at::Tensor& tensor, const AlltoallOptions& options) {
  check_tensor(tensor, "alltoall", options.name);
  auto core = hvd::alltoall_async(wrap(tensor), detail::torch_allocator(tensor), options, ready_event(tensor));
  return make_handle(std::move(core), {}, true);
}

at::Tensor alltoall(const at::Tensor& tensor, const AlltoallOptions& options,
                    std::vector<std::int64_t>* received_splits) {
  Handle h = alltoall_async(tensor, options);
  at::Tensor out = h.wait();
  if (received_splits) *received_splits = h.received_splits();
  return out;
}

Handle reducescatter_async(const at::Tensor& tensor, const ReducescatterOptions& options) {
  check_tensor(tensor, "reducescatter", options.name);
  auto core =
      hvd::reducescatter_async(wrap(tensor), detail::torch_allocator(tensor), options, ready_event(tensor));
  return make_handle(std::move(core), {}, true);
}

at::Tensor reducescatter(const at::Tensor& tensor, const ReducescatterOptions& options) {
  return reducescatter_async(tensor, options).wait();
}

Handle grouped_allgather_async(const std::vector<at::Tensor>& tensors, const AllgatherOptions& options) {
  GroupInputs g = group_inputs(tensors, "grouped_allgather", options.name);
  auto core = hvd::grouped_allgather_async(std::move(g.in), std::move(g.allocate), options, std::move(g.ready));
  return make_handle(std::move(core), {}, true);
}

std::vector<at::Tensor> grouped_allgather(const std::vector<at::Tensor>& tensors, const AllgatherOptions& options) {
  return grouped_allgather_async(tensors, options).wait_all();
}

Handle grouped_reducescatter_async(const std::vector<at::Tensor>& tensors, const ReducescatterOptions& options) {
  GroupInputs g = group_inputs(tensors, "grouped_reducescatter", options.name);
  auto core = hvd::grouped_reducescatter_async(std::move(g.in), std::move(g.allocate), options, std::move(g.ready));
  return make_handle(std::move(core), {}, true);
}

std::vector<at::Tensor> grouped_reducescatter(const std::vector<at::Tensor>& tensors,
                                              const ReducescatterOptions& options) {
  return grouped_reducescatter_async(tensors, options).wait_all();
}

}  // namespace hvd::torch
