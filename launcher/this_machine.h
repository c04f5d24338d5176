// Whether a host name or address from -H/--hostfile is this machine. mpirun starts ranks on
// such hosts itself, without ssh, so hvdrun can check the program there and skips the
// --start-timeout check for them. Main thread only.
#pragma once

#include <string>
#include <vector>

#include "hosts.h"

namespace hvd::launcher {

// True for names this machine answers to: localhost, 127.x, ::1, its host name (also without
// the domain) and the addresses of its interfaces.
bool is_this_machine(const std::string& host);

// True when every host is this machine (also for an empty list).
bool all_on_this_machine(const std::vector<HostSlots>& hosts);

}  // namespace hvd::launcher
