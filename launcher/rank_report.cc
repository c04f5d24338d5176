#include "rank_report.h"

#include <signal.h>

#include <cstring>
#include <regex>

namespace hvd::launcher {
namespace {

constexpr std::size_t kMaxLauncherText = 64 * 1024;

// One of the failure reports of Open MPI 4.x or srun, matched on the launcher's own lines.
struct Pattern {
  std::regex re;
  void (*fill)(const std::smatch& m, FailedRank* f);
};

const std::vector<Pattern>& patterns() {
  static const std::vector<Pattern> kPatterns = {
      {std::regex(R"(Process name: \[\[\d+,\d+\],(\d+)\]\s+Exit code:\s+(-?\d+))"),
       [](const std::smatch& m, FailedRank* f) {
         f->rank = std::stoi(m[1]);
         f->exit_code = std::stoi(m[2]);
       }},
      {std::regex(R"(process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+))"),
       [](const std::smatch& m, FailedRank* f) {
         f->rank = std::stoi(m[1]);
         f->node = m[2];
         f->signal = std::stoi(m[3]);
       }},
      {std::regex(R"(process rank (\d+) with PID \d+ on\s+node (\S+) exiting improperly)"),
       [](const std::smatch& m, FailedRank* f) {
         f->rank = std::stoi(m[1]);
         f->node = m[2];
         f->improper_exit = true;
       }},
      {std::regex(R"(MPI_ABORT was invoked on rank (\d+) in communicator \S+\s+with errorcode (-?\d+))"),
       [](const std::smatch& m, FailedRank* f) {
         f->rank = std::stoi(m[1]);
         f->exit_code = std::stoi(m[2]);
         f->aborted = true;
       }},
      {std::regex(R"(srun: error: (\S+): tasks? (\d+)[^:]*: Exited with exit code (\d+))"),
       [](const std::smatch& m, FailedRank* f) {
         f->node = m[1];
         f->rank = std::stoi(m[2]);
         f->exit_code = std::stoi(m[3]);
       }},
      {std::regex(R"(srun: error: (\S+): tasks? (\d+)[^:]*: Killed)"),
       [](const std::smatch& m, FailedRank* f) {
         f->node = m[1];
         f->rank = std::stoi(m[2]);
         f->signal = SIGKILL;
       }},
  };
  return kPatterns;
}

// Rank output under mpirun --tag-output ("[1,0]<stdout>:") or srun --label ("0: ").
bool is_rank_output(const std::string& line) {
  static const std::regex kTag(R"(^(\[\d+,\d+\]<\w+>:|\s*\d+: ))");
  return std::regex_search(line, kTag);
}

}  // namespace

void RankReportScanner::feed(const char* data, std::size_t size) {
  partial_.append(data, size);
  std::size_t start = 0;
  for (std::size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1)
    take_line(partial_.substr(start, nl - start));
  partial_.erase(0, start);
  if (partial_.size() > kMaxLauncherText) partial_.clear();  // a line without end: not ours
}

void RankReportScanner::take_line(const std::string& line) {
  if (is_rank_output(line) || launcher_text_.size() > kMaxLauncherText) return;
  launcher_text_ += line;
  launcher_text_ += ' ';
}

std::optional<FailedRank> RankReportScanner::failed() const {
  std::string text = launcher_text_ + partial_;
  std::optional<FailedRank> first;
  std::size_t first_position = std::string::npos;
  for (const auto& p : patterns()) {
    std::smatch m;
    if (!std::regex_search(text, m, p.re)) continue;
    const auto position = static_cast<std::size_t>(m.position(0));
    if (position >= first_position) continue;
    FailedRank f;
    p.fill(m, &f);
    first = f;
    first_position = position;
  }
  return first;
}

std::string describe(const FailedRank& f) {
  std::string who = "rank " + std::to_string(f.rank);
  if (!f.node.empty()) who += " (node " + f.node + ")";
  if (f.signal) {
    const char* name = strsignal(*f.signal);
    return who + " was killed by signal " + std::to_string(*f.signal) +
           (name != nullptr ? std::string(" (") + name + ")" : std::string());
  }
  if (f.aborted) return who + " called MPI_Abort with error code " + std::to_string(*f.exit_code);
  if (f.exit_code) return who + " exited with code " + std::to_string(*f.exit_code);
  if (f.improper_exit) return who + " exited without calling hvd::shutdown() (MPI_Finalize)";
  return who + " failed";
}

}  // namespace hvd::launcher
