// --host-discovery-script: runs the user's script (through /bin/sh, so it may carry arguments)
// and reads the hosts it prints, one `HOST` or `HOST:SLOTS` per line (`#` comments and blank
// lines are skipped; a bare HOST gets --slots-per-host). Used by the elastic driver on hvdrun's
// main thread, once before each launch and about once a second while a job runs.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "environment.h"
#include "hosts.h"

namespace hvd::launcher {

// How long one run of the script may take before it counts as hung.
constexpr std::chrono::seconds kDiscoveryTimeout{10};

// Parses the script's output. Throws hvd::Error naming the script, the line number and the line.
std::vector<HostSlots> parse_discovery_output(const std::string& output, const std::string& script,
                                              int slots_per_host);

// Runs the script and parses what it prints. Throws hvd::Error naming the script when it cannot
// start, exits non-zero or by a signal (with its last stderr line), outlives `timeout`, or prints
// a bad line.
std::vector<HostSlots> discover_hosts(const std::string& script, int slots_per_host,
                                      const Environment& env,
                                      std::chrono::milliseconds timeout = kDiscoveryTimeout);

}  // namespace hvd::launcher
