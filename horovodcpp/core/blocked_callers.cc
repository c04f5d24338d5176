#include "core/blocked_callers.h"

#include <sched.h>

#include <atomic>

namespace hvd::detail {
namespace {
std::atomic<int> blocked{0};
std::atomic<int> cpu{-1};
}  // namespace

BlockedCallers::Scope::Scope() {
  cpu.store(sched_getcpu(), std::memory_order_relaxed);
  blocked.fetch_add(1, std::memory_order_relaxed);
}
BlockedCallers::Scope::~Scope() { blocked.fetch_sub(1, std::memory_order_relaxed); }
bool BlockedCallers::any() { return blocked.load(std::memory_order_relaxed) > 0; }
int BlockedCallers::last_cpu() { return cpu.load(std::memory_order_relaxed); }

}  // namespace hvd::detail
