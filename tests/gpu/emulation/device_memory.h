// Emulated device memory (test-only): every allocation tagged with its device and state, device
// addresses the host cannot dereference, and the bytes behind them reached only through access()
// by work that runs "on" a device. See Note [What the emulated CUDA and NCCL model].
// Thread-safe; one instance per process (get()), never destroyed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <cuda_runtime.h>

namespace hvd::emu {

enum class MemoryKind : std::uint8_t { Device, PinnedHost };

struct PointerInfo {
  bool known = false;  // inside an allocation of the emulation (device or pinned host)
  MemoryKind kind = MemoryKind::Device;
  int device = -1;
  bool live = false;   // allocated and not freed
  bool in_device_range = false;  // inside some device's address range, allocated or not
};

class DeviceMemory {
 public:
  static DeviceMemory& get();

  // cudaMalloc on `device`: poisoned at once.
  cudaError_t allocate(void** ptr, std::size_t bytes, int device);
  // cudaFree: the caller has synchronized the device. The range is never handed out again.
  cudaError_t free(void* ptr);
  // cudaMallocAsync: a block of `device`, possibly one that `stream` freed and whose free has not
  // run yet. The caller enqueues poison(block) on the stream (the allocation point).
  cudaError_t allocate_async(void** ptr, std::size_t bytes, int device, const void* stream);
  // cudaFreeAsync: the block joins the pool of `stream` now; returns a ticket the caller passes
  // to free_reached() from the stream, after poisoning, when the free is reached in stream order.
  cudaError_t free_async(void* ptr, const void* stream, std::uint64_t* ticket);
  void free_reached(void* ptr, std::uint64_t ticket);
  cudaError_t allocate_host(void** ptr, std::size_t bytes);  // cudaMallocHost
  cudaError_t free_host(void* ptr);

  PointerInfo describe(const void* ptr) const;
  std::string describe_text(const void* ptr) const;  // "device 1 memory (freed)", for messages
  // The bytes behind [ptr, ptr + bytes) for work running on `device`: a live or pooled device
  // allocation of that device, or pinned host memory. Anything else is fatal, naming `what`.
  unsigned char* access(const void* ptr, std::size_t bytes, int device, const std::string& what);
  // Fills an allocation's whole block with the poison byte (device work; see access()).
  void poison(const void* ptr, int device);
  // True when `address` is inside the device address ranges (async-signal-safe).
  bool in_device_range(const void* address) const;
  std::size_t arena_bytes() const { return arena_bytes_; }

 private:
  enum class State : std::uint8_t { Live, Pooled, Freed };
  struct Block {
    std::size_t capacity = 0;
    int device = -1;
    MemoryKind kind = MemoryKind::Device;
    State state = State::Live;
    const void* pool_stream = nullptr;  // the stream whose free put it in the pool
    bool free_reached = false;          // that free has run in stream order
    std::uint64_t ticket = 0;
  };

  DeviceMemory();
  const Block* find(std::uintptr_t address, std::uintptr_t* base) const;  // lock held
  unsigned char* alias(std::uintptr_t device_address) const;
  cudaError_t carve(std::size_t bytes, int device, std::uintptr_t* base);  // lock held
  void install_fault_handler();

  mutable std::mutex mutex_;
  std::size_t arena_bytes_ = 0;
  int devices_ = 0;
  std::uintptr_t device_base_ = 0;  // PROT_NONE: what pointers handed out point into
  std::uintptr_t alias_base_ = 0;   // read/write view of the same offsets
  std::vector<std::size_t> next_;   // bump offset per device
  std::map<std::uintptr_t, Block> blocks_;
  std::uint64_t next_ticket_ = 1;
  bool handler_installed_ = false;
};

}  // namespace hvd::emu
