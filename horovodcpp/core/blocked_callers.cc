#include "core/blocked_callers.h"

#include <atomic>

namespace hvd::detail {
namespace {
std::atomic<int> blocked{0};
}  // namespace

BlockedCallers::Scope::Scope() { blocked.fetch_add(1, std::memory_order_relaxed); }
BlockedCallers::Scope::~Scope() { blocked.fetch_sub(1, std::memory_order_relaxed); }
bool BlockedCallers::any() { return blocked.load(std::memory_order_relaxed) > 0; }

}  // namespace hvd::detail
