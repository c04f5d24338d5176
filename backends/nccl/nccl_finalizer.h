// The GPU finalizer thread: waits, in submission order, for the CUDA event recorded after each
// NCCL op's last kernel, watches the communicators for asynchronous NCCL errors meanwhile (and
// aborts them on one, so the stream drains before the entries complete), then closes the op's
// timeline activity and completes its entries through OpContext::finish. This is
// what lets the background thread enqueue GPU work and move on without blocking. Started and
// stopped by NcclContext (background thread); submit() is called from the background thread.
#pragma once

#include <cuda_runtime.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/collective_op.h"

namespace hvd::detail {

// One enqueued op waiting for the GPU.
struct PendingGpuWork {
  cudaEvent_t done = nullptr;
  std::vector<TensorTableEntry> entries;
  std::string label;  // "NCCL allreduce of [a, b] on rank 3", for error messages
  std::string error;  // the op's enqueue phase failed: reported once the stream is done
};

class NcclFinalizer {
 public:
  // `async_error` returns a non-empty message once a communicator reports an asynchronous error;
  // `abort` aborts every communicator (so the stream drains) and fails later ops. An op still
  // running after `timeout_seconds` (0: never) is treated as failed.
  NcclFinalizer(int device, OpContext& context, std::function<std::string()> async_error,
                std::function<void(const std::string&)> abort, double timeout_seconds);
  ~NcclFinalizer();
  NcclFinalizer(const NcclFinalizer&) = delete;
  NcclFinalizer& operator=(const NcclFinalizer&) = delete;

  cudaEvent_t acquire_event();  // from a pool; background thread. Throws NcclFailure.
  void submit(PendingGpuWork work);
  // Finishes everything submitted, then joins the thread.
  void stop();

 private:
  void run();
  std::string wait_for(cudaEvent_t event);  // empty on success, else the error
  void drain(cudaEvent_t event);            // after an abort: the stream finishes, bounded
  void release_event(cudaEvent_t event);

  int device_;
  OpContext& context_;
  std::function<std::string()> async_error_;
  std::function<void(const std::string&)> abort_;
  double timeout_seconds_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<PendingGpuWork> queue_;
  std::vector<cudaEvent_t> free_events_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace hvd::detail
