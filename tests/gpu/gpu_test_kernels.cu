// A kernel that keeps writing a tensor long after it was launched, for the readiness test.
#include "tests/gpu/gpu_test_util.h"

namespace hvd::test {
namespace {

__global__ void delayed_fill_kernel(float* data, std::int64_t count, float scale, long long ns) {
  const long long start = clock64();
  // clock64 counts SM cycles; ~1 GHz or more, so ns cycles is at least ns nanoseconds.
  while (clock64() - start < ns) {
  }
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    data[i] = static_cast<float>(i + 1) * scale;
  }
}

}  // namespace

cudaError_t launch_delayed_fill(float* data, std::int64_t count, float scale, long long nanoseconds,
                                cudaStream_t stream) {
  delayed_fill_kernel<<<1, 256, 0, stream>>>(data, count, scale, nanoseconds);
  return cudaGetLastError();
}

bool emulated() { return false; }

}  // namespace hvd::test
