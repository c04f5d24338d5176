// Host lists for hvdrun: `-H a:2,b:2` and hostfiles (`host slots=N` per line, # comments).
// Pure parsing, used on the main thread before anything is launched.
#pragma once

#include <istream>
#include <string>
#include <vector>

namespace hvd::launcher {

struct HostSlots {
  std::string host;
  int slots = 1;
};

// The one check of a host name, for -H, hostfiles and discovery output alike, in every mode
// (--dry-run included): letters, digits, '.', '-' and '_', at most 255 characters. A name can
// then never carry shell syntax (';', '$(...)', backticks, spaces, quotes) into the ssh or srun
// command lines hvdrun runs, or into the line --dry-run prints for a user to paste into a shell.
// Returns "" when the name is good, else why not ("bad host name 'a;b': ...").
std::string host_name_problem(const std::string& host);

// "a:2,b,c:4" (a host without :N has one slot). Throws hvd::Error naming the bad entry.
std::vector<HostSlots> parse_host_list(const std::string& text);

// One host per line: `HOST`, `HOST slots=N` or `HOST:N`; `#` starts a comment. Throws hvd::Error
// naming `source` and the line number of the first bad line.
std::vector<HostSlots> parse_hostfile(std::istream& in, const std::string& source);
std::vector<HostSlots> read_hostfile(const std::string& path);

int total_slots(const std::vector<HostSlots>& hosts);
// Open MPI's -H form: "a:2,b:2".
std::string host_list_string(const std::vector<HostSlots>& hosts);

}  // namespace hvd::launcher
