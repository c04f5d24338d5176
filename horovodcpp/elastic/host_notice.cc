#include "elastic/host_notice.h"

#include <atomic>
#include <cstdlib>

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

// A program that hvdrun's elastic driver started (it sets HOROVOD_ELASTIC_JOB) takes the notice
// from the moment the library loads, so one sent while the program is still starting does not
// kill it (SIGUSR1's default action). The variable is read directly, not through the settings
// table that declares it: this runs as the library loads, where a bad setting could only abort.
__attribute__((constructor)) void install_when_launched_elastically() {
  const char* job = std::getenv("HOROVOD_ELASTIC_JOB");
  if (job != nullptr && *job != '\0') install_host_notice_handler();
}

bool host_notice_pending() { return g_notice != 0; }
void clear_host_notice() { g_notice = 0; }

}  // namespace hvd::detail
