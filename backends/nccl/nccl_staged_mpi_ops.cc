// HOROVOD_GPU_OPERATIONS=mpi: device tensors through the MPI ops, staged in host memory. The MPI
// ops work on host memory only (they pack, scale and copy with host code), and need no
// CUDA-aware MPI this way. One op per collective, registered by the NCCL backend (it has the CUDA
// runtime) under the backend name "MPI": it waits on the host for the inputs' ready events, copies
// them to host tensors, runs the MPI op the registry picks for host tensors, and copies the
// results to the device outputs (waiting for their allocation events first). Synchronous on the
// background thread: the slow path, for when NCCL cannot be used. The same op, under the name
// "NCCL", is also Adasum's way on device tensors where the NCCL Adasum op declines it (Note
// [Adasum of device tensors averages within the node], nccl_adasum.cc): NCCL has no Adasum, so
// Horovod built with NCCL stages those through host memory too, and HOROVOD_GPU_OPERATIONS=nccl
// must not leave them without an op.
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
  StagedMpiOp(const OpRegistry& registry, OpContext& context, StagedRole role)
      : registry_(registry), context_(context), role_(role) {}
  const char* backend() const override { return role_ == StagedRole::AdasumOnNccl ? "NCCL" : "MPI"; }

  // Exactly one of this op and NcclAdasum takes each Adasum of device tensors.
  bool enabled(const Response& response, const std::vector<TensorTableEntry>& entries,
               const Communicator& group) const override {
    if (role_ == StagedRole::AdasumOnNccl &&
        (response.type != ResponseType::Allreduce || response.reduce_op != ReduceOp::Adasum))
      return false;
    return (entries.empty() ? response.device : entries.front().device) != kCpuDevice &&
           !adasum_averages_within_node(response, group, context_);
  }

  // An exception before the MPI op may be this rank's alone while its peers wait in the MPI
  // collective: it goes through and stops the job (nccl_errors.h). After the MPI op the peers are
  // done, and a failure concerns this rank's outputs only.
  Status execute(std::vector<TensorTableEntry>& entries, const Response& response, const Communicator& group) override {
    int device = -1;
    for (const auto& e : entries)
      if (e.input && e.input->device() != kCpuDevice) device = e.input->device();
    if (device >= 0) check_cuda(cudaSetDevice(device), "cudaSetDevice");

    std::vector<TensorTableEntry> host(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) host[i] = to_host(entries[i]);
    Response host_response = response;
    host_response.device = kCpuDevice;
    Status status = run_mpi_op_on_host(registry_, host, host_response, group);
    if (!status.is_ok()) return status;  // the device tensors are untouched

    try {
      for (std::size_t i = 0; i < entries.size(); ++i) to_device(entries[i], host[i], device);
    } catch (const std::exception& e) {
      return Status::error(std::string("copying the MPI op's results back to the device: ") + e.what());
    }
    return Status::ok();
  }

 private:
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
  const StagedRole role_;
};

}  // namespace

Status run_mpi_op_on_host(const OpRegistry& registry, std::vector<TensorTableEntry>& entries,
                          const Response& response, const Communicator& group) {
  std::string why;
  CollectiveOp* op = registry.select(response, entries, group, "mpi", "", &why);
  if (op == nullptr) return Status::error(why);
  return op->execute(entries, response, group);
}

std::unique_ptr<CollectiveOp> make_staged_mpi_op(const OpRegistry& registry, OpContext& context, StagedRole role) {
  return std::make_unique<StagedMpiOp>(registry, context, role);
}

}  // namespace hvd::detail
