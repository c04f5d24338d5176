#include "tests/gpu/emulation/emulation_control.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "tests/gpu/emulation/streams.h"

namespace hvd::emu {
namespace {

// A fault armed to fire on the nth event of its kind.
struct Armed {
  std::mutex mutex;
  int countdown = 0;  // 0: disarmed
  int code = 0;

  void arm(int nth, int value) {
    std::lock_guard<std::mutex> lock(mutex);
    countdown = nth;
    code = value;
  }
  // The code when this event is the armed one, else 0.
  int take() {
    std::lock_guard<std::mutex> lock(mutex);
    if (countdown <= 0 || --countdown > 0) return 0;
    return code;
  }
};

Armed g_launch, g_device_copy, g_nccl_call, g_async, g_init;
std::atomic<bool> g_finalize_stalls{false};
std::atomic<int> g_read_hold_ms{0};

}  // namespace

void fail_kernel_launch(int nth, cudaError_t error) { g_launch.arm(nth, error); }
void fail_device_copy(int nth, cudaError_t error) { g_device_copy.arm(nth, error); }
void fail_nccl_call(int nth, ncclResult_t result) { g_nccl_call.arm(nth, result); }
void inject_async_error(int nth, ncclResult_t result) { g_async.arm(nth, result); }
void stall_comm_init(int nth) { g_init.arm(nth, 1); }
void stall_finalize() { g_finalize_stalls = true; }

cudaError_t take_kernel_launch_fault() { return static_cast<cudaError_t>(g_launch.take()); }
cudaError_t take_device_copy_fault() { return static_cast<cudaError_t>(g_device_copy.take()); }
ncclResult_t take_nccl_call_fault() { return static_cast<ncclResult_t>(g_nccl_call.take()); }
ncclResult_t take_async_fault() { return static_cast<ncclResult_t>(g_async.take()); }
bool take_init_stall() { return g_init.take() != 0; }
bool finalize_stalls() { return g_finalize_stalls; }
void hold_next_read(int milliseconds) { g_read_hold_ms = milliseconds; }
int take_read_hold() { return g_read_hold_ms.exchange(0); }

cudaError_t sleep_on_stream(cudaStream_t handle, int milliseconds) {
  auto stream = resolve_stream(handle);
  if (!stream) return cudaErrorInvalidResourceHandle;
  enqueue_on(*stream, [milliseconds] { std::this_thread::sleep_for(std::chrono::milliseconds(milliseconds)); });
  return cudaSuccess;
}

}  // namespace hvd::emu
