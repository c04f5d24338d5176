#include "backends/nccl/nccl_finalizer.h"

#include <pthread.h>

#include <chrono>

#include "backends/nccl/nccl_errors.h"
#include "core/logging.h"
#include "timeline/timeline.h"

namespace hvd::detail {

NcclFinalizer::NcclFinalizer(int device, OpContext& context, std::function<std::string()> async_error,
                             std::function<void(const std::string&)> abort, double timeout_seconds)
    : device_(device),
      context_(context),
      async_error_(std::move(async_error)),
      abort_(std::move(abort)),
      timeout_seconds_(timeout_seconds) {
  thread_ = std::thread([this] { run(); });
  // Its own name in ps, gdb and perf; it would otherwise carry the background thread's.
  pthread_setname_np(thread_.native_handle(), "hvd-nccl-final");
}

NcclFinalizer::~NcclFinalizer() {
  stop();
  for (cudaEvent_t event : free_events_) cudaEventDestroy(event);
}

cudaEvent_t NcclFinalizer::acquire_event() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!free_events_.empty()) {
      cudaEvent_t event = free_events_.back();
      free_events_.pop_back();
      return event;
    }
  }
  cudaEvent_t event = nullptr;
  check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "creating a CUDA event");
  return event;
}

void NcclFinalizer::release_event(cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_events_.push_back(event);
}

void NcclFinalizer::submit(PendingGpuWork work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(work));
  }
  cv_.notify_one();
}

void NcclFinalizer::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

// Polls rather than blocking in cudaEventSynchronize, so an asynchronous NCCL error (a peer
// died, a timeout) fails the op instead of hanging the thread. Spins briefly for the latency of
// small ops, then sleeps so an idle wait costs no core. On an error the communicators are
// aborted first, so the stream stops using the entries' memory before they are released.
std::string NcclFinalizer::wait_for(cudaEvent_t event) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (;;) {
    const cudaError_t state = cudaEventQuery(event);
    if (state == cudaSuccess) return {};
    std::string error;
    if (state != cudaErrorNotReady) {
      error = std::string("waiting for NCCL work to finish: CUDA error ") + cudaGetErrorName(state) + ": " +
              cudaGetErrorString(state);
    } else {
      error = async_error_();
    }
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (error.empty() && timeout_seconds_ > 0 && waited > timeout_seconds_) {
      error = "the NCCL operation did not finish within HOROVOD_LIVENESS_TIMEOUT_SECONDS=" +
              std::to_string(static_cast<long long>(timeout_seconds_)) + " s (a peer stopped taking part)";
    }
    if (!error.empty()) {
      abort_(error);
      if (state == cudaErrorNotReady) drain(event);
      return error;
    }
    if (Clock::now() - start < std::chrono::microseconds(200)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

// ncclCommAbort stops the NCCL kernels; the stream then runs to the event. Bounded, so that a
// stream that never gets there cannot hold the entries (and the caller) forever.
void NcclFinalizer::drain(cudaEvent_t event) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (cudaEventQuery(event) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() > until) {
      log_error("the NCCL stream did not finish within 30 s after its communicators were aborted; "
                "releasing the operation's tensors anyway");
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void NcclFinalizer::run() {
  cudaSetDevice(device_);
  for (;;) {
    PendingGpuWork work;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything submitted is finished
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    std::string error = wait_for(work.done);
    if (!work.error.empty()) error = work.error;  // the cause; the stream is done with the entries now
    release_event(work.done);
    for (const auto& entry : work.entries) context_.timeline.activity_end(entry.name);
    context_.finish(work.entries, error.empty() ? Status::ok()
                                                : Status::error(work.label + " failed: " + error));
  }
}

}  // namespace hvd::detail
