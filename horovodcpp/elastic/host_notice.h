// The "hosts changed" notice from hvdrun: SIGUSR1, which mpirun and srun forward to every rank.
// A signal handler sets a flag that State::commit() reads (and the ranks then agree on). The
// handler is installed when the library loads under hvdrun's elastic driver (HOROVOD_ELASTIC_JOB
// is set), else by the first State and by run(); the flag is the one file-static it needs.
#pragma once

#include <csignal>

namespace hvd::detail {

constexpr int kHostNoticeSignal = SIGUSR1;

// Idempotent. An elastic program hands SIGUSR1 to horovodcpp.
void install_host_notice_handler();
bool host_notice_pending();
void clear_host_notice();

}  // namespace hvd::detail
