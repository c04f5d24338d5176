// HOROVOD_GPU_OPERATIONS=mpi: device tensors through the MPI ops, staged in host memory. The MPI
// ops work on host memory only (they pack, scale and copy with host code), and need no
// CUDA-aware MPI this way. One op per collective, registered by the NCCL backend (it has the CUDA
// runtime) under the backend name "MPI": it waits on the host for the inputs' ready events, copies
// them to host tensors, runs the MPI op the registry picks for host tensors, and copies the
// results to the device outputs (waiting for their allocation events first). Synchronous on the
// background thread: the slow path, for when NCCL cannot be used, and Adasum's way on device
// tensors (the NCCL ops decline it; see Note [Adasum of device tensors averages within the node]).
#include <chrono>
#include <thread>

#include "backends/nccl/nccl_errors.h"
#include "backends/nccl/nccl_ops.h"
#include "core/op_registry.h"
#include "timeline/timeline.h"

namespace hvd::detail {
namespace {

void wait_on_host(const ReadyEventPtr& event) {
  if (!event) return;
  if (auto cuda = static_cast<cudaEvent_t>(event->cuda_event()); cuda != nullptr) {
    check_cuda(cudaEventSynchronize(cuda), "waiting for a device tensor's event");
    return;
  }
  while (!event->ready()) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

class StagedMpiOp final : public CollectiveOp {
 public:
  StagedMpiOp(const OpRegistry& registry, OpContext& context) : registry_(registry), context_(context) {}
  const char* backend() const override { return "MPI"; }

  bool enabled(const Response& response, const std::vector<TensorTableEntry>& entries, const Communicator&) const override {
    return (entries.empty() ? response.device : entries.front().device) != kCpuDevice;
  }

  Status execute(std::vector<TensorTableEntry>& entries, const Response& response, const Communicator& group) override {
    try {
      return stage(entries, response, group);
    } catch (const std::exception& e) {
      return Status::error(std::string("staging device tensors through host memory for MPI: ") + e.what());
    }
  }

 private:
  Status stage(std::vector<TensorTableEntry>& entries, const Response& response, const Communicator& group) {
    int device = -1;
    for (const auto& e : entries)
      if (e.input && e.input->device() != kCpuDevice) device = e.input->device();
    if (device >= 0) check_cuda(cudaSetDevice(device), "cudaSetDevice");

    std::vector<TensorTableEntry> host(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) host[i] = to_host(entries[i]);
    Response host_response = response;
    host_response.device = kCpuDevice;
    Status status = averages_within_node(response, group) ? adasum_across_nodes(host, host_response)
                                                          : run_on_host(host, host_response, group);
    if (!status.is_ok()) return status;  // the device tensors are untouched

    for (std::size_t i = 0; i < entries.size(); ++i) to_device(entries[i], host[i], device);
    return Status::ok();
  }

  Status run_on_host(std::vector<TensorTableEntry>& host, const Response& response, const Communicator& group) {
    std::string why;
    CollectiveOp* op = registry_.select(response, host, group, "mpi", "", &why);
    if (op == nullptr) return Status::error(why);
    return op->execute(host, response, group);
  }

  // Note [Adasum of device tensors averages within the node]: Horovod built with NCCL reduces a
  // GPU tensor's Adasum hierarchically: the ranks of a node average, then the nodes combine with
  // Adasum (Horovod's docs, "Hierarchical"; its test expects the orthogonal sum divided by the
  // local size). The same here, for the world's device tensors on several ranks per node, unless
  // HOROVOD_GPU_OPERATIONS=mpi asked for the MPI ops (Horovod built without NCCL: Adasum over
  // every rank). Process sets reduce over their ranks.
  bool averages_within_node(const Response& response, const Communicator& group) const {
    const World& world = context_.world;
    return response.reduce_op == ReduceOp::Adasum && group.id() == 0 && context_.settings.gpu_operations != "mpi" &&
           world.local_size() > 1 && world.homogeneous();
  }

  Status adasum_across_nodes(std::vector<TensorTableEntry>& host, const Response& response) {
    Response average = response;
    average.reduce_op = ReduceOp::Average;
    average.postscale_factor = 1.0;
    Status status = run_on_host(host, average, context_.world.local());
    if (!status.is_ok()) return status;
    for (auto& h : host) h.input = h.output;  // the node's average, combined across the nodes in place
    Response across = response;
    across.prescale_factor = 1.0;
    return run_on_host(host, across, context_.world.cross());
  }

  // A host twin of the entry: its input copied once ready, an output where the op writes one.
  TensorTableEntry to_host(TensorTableEntry& e) {
    TensorTableEntry h;
    h.name = e.name;
    h.type = e.type;
    h.root = e.root;
    h.reduce_op = e.reduce_op;
    h.prescale_factor = e.prescale_factor;
    h.postscale_factor = e.postscale_factor;
    h.splits = e.splits;
    h.process_set_id = e.process_set_id;
    h.device = kCpuDevice;
    if (!e.input || e.input->device() == kCpuDevice) {  // a joined rank's stand-in
      h.input = e.input;
      h.output = e.output;
      return h;
    }
    wait_on_host(e.ready);
    context_.timeline.activity_start(e.name, "MEMCPY_DEVICE_TO_HOST");
    auto input = HostTensor::allocate(e.input->dtype(), e.input->shape());
    check_cuda(cudaMemcpy(input->data(), e.input->data(), static_cast<std::size_t>(e.input->size_bytes()),
                          cudaMemcpyDeviceToHost),
               "copying a device tensor to host memory");
    context_.timeline.activity_end(e.name);
    h.input = input;
    if (e.output && e.output != e.input) {
      h.output = HostTensor::allocate(e.output->dtype(), e.output->shape());
    } else if (e.output) {
      h.output = h.input;  // in place
    }  // else: the op allocates it (host memory: no allocator)
    return h;
  }

  void to_device(TensorTableEntry& e, const TensorTableEntry& h, int device) {
    if (!e.input || e.input->device() == kCpuDevice) return;  // a stand-in's result is discarded
    if (!e.output) {
      allocate_device_output(e, h.output->dtype(), h.output->shape(), device);
      wait_on_host(e.output->allocation_event());
    }
    e.received_splits = h.received_splits;
    context_.timeline.activity_start(e.name, "MEMCPY_HOST_TO_DEVICE");
    check_cuda(cudaMemcpy(e.output->data(), h.output->data(), static_cast<std::size_t>(h.output->size_bytes()),
                          cudaMemcpyHostToDevice),
               "copying a result to device memory");
    context_.timeline.activity_end(e.name);
  }

  const OpRegistry& registry_;
  OpContext& context_;
};

}  // namespace

std::unique_ptr<CollectiveOp> make_staged_mpi_op(const OpRegistry& registry, OpContext& context) {
  return std::make_unique<StagedMpiOp>(registry, context);
}

}  // namespace hvd::detail
