#include "elastic/host_notice.h"

#include <atomic>

namespace hvd::detail {
namespace {

volatile std::sig_atomic_t g_notice = 0;
std::atomic<bool> g_installed{false};

extern "C" void on_host_notice(int) { g_notice = 1; }

}  // namespace

void install_host_notice_handler() {
  if (g_installed.exchange(true)) return;
  struct sigaction action {};
  action.sa_handler = on_host_notice;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(kHostNoticeSignal, &action, nullptr);
}

bool host_notice_pending() { return g_notice != 0; }
void clear_host_notice() { g_notice = 0; }

}  // namespace hvd::detail
