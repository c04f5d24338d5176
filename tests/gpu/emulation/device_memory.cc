#include "tests/gpu/emulation/device_memory.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tests/gpu/emulation/emulation.h"

namespace hvd::emu {
namespace {

constexpr unsigned char kPoison = 0xff;     // NaN in every float type, -1 in signed integers
constexpr std::size_t kAlignment = 256;     // cudaMalloc's
constexpr std::size_t kDefaultArenaMb = 2048;

std::size_t round_up(std::size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

std::string hex(std::uintptr_t p) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%lx", static_cast<unsigned long>(p));
  return text;
}

// The fault handler reads these two without a lock.
std::uintptr_t g_fault_begin = 0, g_fault_end = 0;
struct sigaction g_previous_segv {};

void on_segv(int signal, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<std::uintptr_t>(info->si_addr);
  if (address >= g_fault_begin && address < g_fault_end) {
    static const char message[] =
        "EMULATED CUDA: host code dereferenced a device pointer (emulated device memory is not "
        "host-accessible, as on a GPU without unified memory); copy it with cudaMemcpy first\n";
    ssize_t ignored = write(STDERR_FILENO, message, sizeof message - 1);
    (void)ignored;
  }
  // Hand the fault on (Open MPI's backtrace printer, or the default action).
  if ((g_previous_segv.sa_flags & SA_SIGINFO) != 0 && g_previous_segv.sa_sigaction != nullptr) {
    g_previous_segv.sa_sigaction(signal, info, context);
    return;
  }
  if (g_previous_segv.sa_handler != SIG_IGN && g_previous_segv.sa_handler != SIG_DFL &&
      g_previous_segv.sa_handler != nullptr) {
    g_previous_segv.sa_handler(signal);
    return;
  }
  ::signal(SIGSEGV, SIG_DFL);
  raise(SIGSEGV);
}

}  // namespace

DeviceMemory& DeviceMemory::get() {
  static DeviceMemory* memory = new DeviceMemory();  // never destroyed: stream threads may outlive main
  return *memory;
}

DeviceMemory::DeviceMemory() {
  const char* raw = std::getenv("HVD_EMU_ARENA_MB");
  const std::size_t mb = raw != nullptr && *raw != '\0' ? std::strtoull(raw, nullptr, 10) : kDefaultArenaMb;
  arena_bytes_ = (mb == 0 ? kDefaultArenaMb : mb) << 20;
  devices_ = config().devices;
  next_.assign(static_cast<std::size_t>(devices_), 0);
  if (devices_ == 0) return;
  const std::size_t total = arena_bytes_ * static_cast<std::size_t>(devices_);
  void* device = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  void* alias = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (device == MAP_FAILED || alias == MAP_FAILED) fatal("cannot reserve " + std::to_string(total >> 20) + " MB for the emulated devices");
  device_base_ = reinterpret_cast<std::uintptr_t>(device);
  alias_base_ = reinterpret_cast<std::uintptr_t>(alias);
  g_fault_begin = device_base_;
  g_fault_end = device_base_ + total;
}

// Installed at the first device allocation, after MPI_Init has installed its own handler, which
// ours then calls.
void DeviceMemory::install_fault_handler() {
  if (handler_installed_) return;
  handler_installed_ = true;
  struct sigaction action {};
  action.sa_sigaction = on_segv;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, &g_previous_segv);
}

bool DeviceMemory::in_device_range(const void* address) const {
  const auto a = reinterpret_cast<std::uintptr_t>(address);
  return a >= g_fault_begin && a < g_fault_end;
}

unsigned char* DeviceMemory::alias(std::uintptr_t device_address) const {
  return reinterpret_cast<unsigned char*>(alias_base_ + (device_address - device_base_));
}

const DeviceMemory::Block* DeviceMemory::find(std::uintptr_t address, std::uintptr_t* base) const {
  auto it = blocks_.upper_bound(address);
  if (it == blocks_.begin()) return nullptr;
  --it;
  const std::size_t extent = it->second.capacity == 0 ? 1 : it->second.capacity;
  if (address >= it->first + extent) return nullptr;
  *base = it->first;
  return &it->second;
}

cudaError_t DeviceMemory::carve(std::size_t bytes, int device, std::uintptr_t* base) {
  if (device < 0 || device >= devices_) return cudaErrorInvalidDevice;
  const std::size_t size = round_up(bytes == 0 ? 1 : bytes);
  std::size_t& next = next_[static_cast<std::size_t>(device)];
  if (next + size > arena_bytes_) return cudaErrorMemoryAllocation;
  *base = device_base_ + arena_bytes_ * static_cast<std::size_t>(device) + next;
  next += size;
  Block block;
  block.capacity = size;
  block.device = device;
  blocks_[*base] = block;
  return cudaSuccess;
}

cudaError_t DeviceMemory::allocate(void** ptr, std::size_t bytes, int device) {
  if (ptr == nullptr) return cudaErrorInvalidValue;
  std::uintptr_t base = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    install_fault_handler();
    const cudaError_t result = carve(bytes, device, &base);
    if (result != cudaSuccess) return result;
  }
  std::memset(alias(base), kPoison, round_up(bytes == 0 ? 1 : bytes));
  *ptr = reinterpret_cast<void*>(base);
  return cudaSuccess;
}

cudaError_t DeviceMemory::free(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blocks_.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == blocks_.end() || it->second.kind != MemoryKind::Device || it->second.state != State::Live)
    return cudaErrorInvalidValue;
  it->second.state = State::Freed;
  // The range stays reserved (and any access to it fatal); the pages that lie wholly inside it
  // go back to the system (a shared page would zero its neighbours).
  const std::uintptr_t page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const std::uintptr_t begin = (it->first + page - 1) / page * page;
  const std::uintptr_t end = (it->first + it->second.capacity) / page * page;
  if (end > begin) madvise(alias(begin), end - begin, MADV_DONTNEED);
  return cudaSuccess;
}

cudaError_t DeviceMemory::allocate_async(void** ptr, std::size_t bytes, int device, const void* stream) {
  if (ptr == nullptr) return cudaErrorInvalidValue;
  std::lock_guard<std::mutex> lock(mutex_);
  install_fault_handler();
  // Like the CUDA pool: memory freed on this stream is reusable at once (stream order protects
  // the stream's own work); memory freed on another stream only once that free has run.
  Block* chosen = nullptr;
  std::uintptr_t chosen_base = 0;
  for (auto& [base, block] : blocks_) {
    if (block.state != State::Pooled || block.device != device || block.capacity < bytes) continue;
    const bool same_stream = block.pool_stream == stream;
    if (!same_stream && !block.free_reached) continue;
    // Same-stream blocks first, then the smallest that fits.
    const bool chosen_same = chosen != nullptr && chosen->pool_stream == stream;
    if (chosen == nullptr || (same_stream && !chosen_same) ||
        (same_stream == chosen_same && block.capacity < chosen->capacity)) {
      chosen = &block;
      chosen_base = base;
    }
  }
  if (chosen != nullptr) {
    chosen->state = State::Live;
    chosen->pool_stream = nullptr;
    *ptr = reinterpret_cast<void*>(chosen_base);
    return cudaSuccess;
  }
  std::uintptr_t base = 0;
  const cudaError_t result = carve(bytes, device, &base);
  if (result != cudaSuccess) return result;
  *ptr = reinterpret_cast<void*>(base);
  return cudaSuccess;
}

cudaError_t DeviceMemory::free_async(void* ptr, const void* stream, std::uint64_t* ticket) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blocks_.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == blocks_.end() || it->second.kind != MemoryKind::Device || it->second.state != State::Live)
    return cudaErrorInvalidValue;
  it->second.state = State::Pooled;
  it->second.pool_stream = stream;
  it->second.free_reached = false;
  it->second.ticket = next_ticket_++;
  *ticket = it->second.ticket;
  return cudaSuccess;
}

void DeviceMemory::free_reached(void* ptr, std::uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blocks_.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it != blocks_.end() && it->second.ticket == ticket && it->second.state == State::Pooled)
    it->second.free_reached = true;
}

cudaError_t DeviceMemory::allocate_host(void** ptr, std::size_t bytes) {
  if (ptr == nullptr) return cudaErrorInvalidValue;
  void* p = std::aligned_alloc(kAlignment, round_up(bytes == 0 ? 1 : bytes));
  if (p == nullptr) return cudaErrorMemoryAllocation;
  std::lock_guard<std::mutex> lock(mutex_);
  Block block;
  block.capacity = round_up(bytes == 0 ? 1 : bytes);
  block.kind = MemoryKind::PinnedHost;
  blocks_[reinterpret_cast<std::uintptr_t>(p)] = block;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t DeviceMemory::free_host(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == blocks_.end() || it->second.kind != MemoryKind::PinnedHost) return cudaErrorInvalidValue;
    blocks_.erase(it);
  }
  std::free(ptr);
  return cudaSuccess;
}

PointerInfo DeviceMemory::describe(const void* ptr) const {
  PointerInfo info;
  info.in_device_range = in_device_range(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  std::uintptr_t base = 0;
  const Block* block = find(reinterpret_cast<std::uintptr_t>(ptr), &base);
  if (block == nullptr) return info;
  info.known = true;
  info.kind = block->kind;
  info.device = block->device;
  info.live = block->state == State::Live;
  return info;
}

std::string DeviceMemory::describe_text(const void* ptr) const {
  const PointerInfo info = describe(ptr);
  const std::string at = hex(reinterpret_cast<std::uintptr_t>(ptr));
  if (!info.known)
    return at + (info.in_device_range ? " (device address range, but no allocation)" : " (host memory)");
  if (info.kind == MemoryKind::PinnedHost) return at + " (pinned host memory)";
  return at + " (device " + std::to_string(info.device) + " memory" + (info.live ? ")" : ", freed)");
}

unsigned char* DeviceMemory::access(const void* ptr, std::size_t bytes, int device, const std::string& what) {
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  std::unique_lock<std::mutex> lock(mutex_);
  std::uintptr_t base = 0;
  const Block* block = find(address, &base);
  auto fail = [&](const std::string& why) {
    lock.unlock();
    fatal(what + " on device " + std::to_string(device) + " touched " + std::to_string(bytes) + " bytes at " +
          hex(address) + ": " + why);
  };
  if (block == nullptr) {
    fail(in_device_range(ptr) ? "no allocation there (out of bounds or never allocated)"
                              : "host memory that is not pinned (cudaMallocHost): a GPU cannot reach it");
  }
  if (address + bytes > base + block->capacity)
    fail("past the end of its allocation of " + std::to_string(block->capacity) + " bytes");
  if (block->kind == MemoryKind::PinnedHost) return reinterpret_cast<unsigned char*>(address);
  if (block->device != device)
    fail("memory of device " + std::to_string(block->device) + " (no peer access between emulated devices)");
  if (block->state == State::Freed) fail("memory released by cudaFree (use after free)");
  return alias(address);
}

void DeviceMemory::poison(const void* ptr, int device) {
  std::size_t capacity = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::uintptr_t base = 0;
    const Block* block = find(reinterpret_cast<std::uintptr_t>(ptr), &base);
    if (block == nullptr || block->device != device || block->state == State::Freed) return;
    capacity = block->capacity - (reinterpret_cast<std::uintptr_t>(ptr) - base);
  }
  std::memset(alias(reinterpret_cast<std::uintptr_t>(ptr)), kPoison, capacity);
}

}  // namespace hvd::emu
