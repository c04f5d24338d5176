#include "rank_report.h"

#include <signal.h>

#include <algorithm>
#include <cstring>
#include <regex>

namespace hvd::launcher {
namespace {

constexpr std::size_t kMaxLauncherText = 64 * 1024;
constexpr std::size_t kMaxNotableLines = 6;
constexpr std::size_t kMaxLineChars = 200;
constexpr std::size_t kMaxRanksKept = 4096;
constexpr std::size_t kMaxRanksShown = 4;

// One of the failure reports of Open MPI 4.x or srun, matched on the launcher's own lines.
struct Pattern {
  std::regex re;
  void (*fill)(const std::smatch& m, FailedRank* f);
};

const std::vector<Pattern>& patterns() {
  static const std::vector<Pattern> kPatterns = {
      {std::regex(R"(Process name: \[\[\d+,\d+\],(\d{1,9})\]\s+Exit code:\s+(-?\d{1,9}))"),
       [](const std::smatch& m, FailedRank* f) {
         f->rank = std::stoi(m[1]);
         f->exit_code = std::stoi(m[2]);
       }},
      {std::regex(R"(process rank (\d{1,9}) with PID \d+ on node (\S+) exited on signal (\d{1,9}))"),
       [](const std::smatch& m, FailedRank* f) {
         f->rank = std::stoi(m[1]);
         f->node = m[2];
         f->signal = std::stoi(m[3]);
       }},
      {std::regex(R"(process rank (\d{1,9}) with PID \d+ on\s+node (\S+) exiting improperly)"),
       [](const std::smatch& m, FailedRank* f) {
         f->rank = std::stoi(m[1]);
         f->node = m[2];
         f->improper_exit = true;
       }},
      {std::regex(R"(MPI_ABORT was invoked on rank (\d{1,9}) in communicator \S+\s+with errorcode (-?\d{1,9}))"),
       [](const std::smatch& m, FailedRank* f) {
         f->rank = std::stoi(m[1]);
         f->exit_code = std::stoi(m[2]);
         f->aborted = true;
       }},
      {std::regex(R"(srun: error: (\S+): tasks? (\d{1,9})[^:]*: Exited with exit code (\d{1,9}))"),
       [](const std::smatch& m, FailedRank* f) {
         f->node = m[1];
         f->rank = std::stoi(m[2]);
         f->exit_code = std::stoi(m[3]);
       }},
      {std::regex(R"(srun: error: (\S+): tasks? (\d{1,9})[^:]*: Killed)"),
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
  return std::regex_search(line.substr(0, 64), kTag);
}

// Launcher lines kept as they are: they say why ranks or daemons did not start.
bool notable_line(const std::string& line) {
  static const std::regex kNotable(
      R"(failed to start|not found|No such file or directory|Permission denied|Connection )"
      R"(refused|Connection timed out|Could not resolve hostname|Host key verification failed|)"
      R"(^srun: error:|^slurmstepd: error:)");
  return std::regex_search(line.substr(0, kMaxLineChars), kNotable);
}

std::string clipped(std::string line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  const auto start = line.find_first_not_of(' ');
  line.erase(0, start == std::string::npos ? line.size() : start);
  return line.size() > kMaxLineChars ? line.substr(0, kMaxLineChars) + "..." : line;
}

// Open MPI's multi-line reports that explain a failure without naming a rank.
std::vector<std::string> report_notes(const std::string& text) {
  std::vector<std::string> notes;
  std::smatch m;
  if (text.find("unable to find the specified executable") != std::string::npos &&
      std::regex_search(text, m, std::regex(R"(Node:\s+(\S+)\s+Executable:\s+(\S+))")))
    notes.push_back("program '" + m[2].str() + "' not found on node " + m[1].str());
  if (text.find("could not access or execute an executable") != std::string::npos &&
      std::regex_search(text, m, std::regex(R"(Executable:\s+(\S+)\s+Node:\s+(\S+))")))
    notes.push_back("program '" + m[1].str() + "' could not be executed on node " + m[2].str());
  if (text.find("\"execve\" system call but failed") != std::string::npos &&
      std::regex_search(text, m, std::regex(R"(Application name:\s+(\S+)\s+Error:\s+(.{1,100}?) -{10})"))) {
    std::smatch node;
    const bool known = std::regex_search(text, node, std::regex(R"(Local host:\s+(\S+))"));
    notes.push_back("program '" + m[1].str() + "' could not be executed" +
                    (known ? " on node " + node[1].str() : std::string()) + ": " + m[2].str());
  }
  if (text.find("ORTE was unable to reliably start one or more daemons") != std::string::npos)
    notes.push_back("its daemons did not start on one or more hosts (check ssh to every host and "
                    "that Open MPI is installed there)");
  if (std::regex_search(text, m, std::regex(R"(Primary job\s+terminated normally, but (\d{1,9}) )"
                                            R"(process(es)? returned\s+a non-zero exit code)")))
    notes.push_back(m[1].str() + " process(es) returned a non-zero exit code");
  return notes;
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
  if (is_rank_output(line)) {
    take_rank_line(line);
    return;
  }
  if (notable_line(line) && notable_lines_.size() < kMaxNotableLines) {
    std::string kept = clipped(line);
    if (std::find(notable_lines_.begin(), notable_lines_.end(), kept) == notable_lines_.end())
      notable_lines_.push_back(kept);
  }
  if (launcher_text_.size() > kMaxLauncherText) return;
  launcher_text_ += line;
  launcher_text_ += ' ';
}

// A rank's stderr line: "[1,R]<stderr>:TEXT" (mpirun --tag-output) or "R: TEXT" (srun
// --label, whose stderr carries only the tasks' stderr).
void RankReportScanner::take_rank_line(const std::string& line) {
  static const std::regex kTagged(R"(^(\[\d{1,9},(\d{1,9})\]<stderr>:|\s*(\d{1,9}): ))");
  std::smatch m;
  const std::string head = line.substr(0, 64);
  if (!std::regex_search(head, m, kTagged)) return;
  const int rank = std::stoi(m[2].matched ? m[2].str() : m[3].str());
  std::string text = clipped(line.substr(static_cast<std::size_t>(m.length(0))));
  if (text.empty()) return;
  if (last_error_line_.size() < kMaxRanksKept || last_error_line_.count(rank) != 0)
    last_error_line_[rank] = text;
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

LaunchReport RankReportScanner::report() const {
  LaunchReport r;
  r.failed = failed();
  r.notes = report_notes(launcher_text_ + partial_);
  for (const auto& line : notable_lines_)
    if (std::find(r.notes.begin(), r.notes.end(), line) == r.notes.end()) r.notes.push_back(line);
  r.last_error_line = last_error_line_;
  return r;
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

namespace hvd::launcher {

std::string failure_summary(const LaunchReport& r, const std::string& launcher, int exit_code) {
  const std::string code = std::to_string(exit_code);
  if (r.failed)
    return describe(*r.failed) + "; " + launcher + " ended the other ranks; exit code " + code;
  std::string out = launcher + " exited with code " + code + " without naming a failed rank";
  for (std::size_t i = 0; i < r.notes.size(); ++i)
    out += (i == 0 ? "; " + launcher + " said: " : std::string("; ")) + r.notes[i];
  std::size_t shown = 0;
  for (const auto& [rank, line] : r.last_error_line) {
    if (shown == kMaxRanksShown) break;
    out += (shown++ == 0 ? "; last error output: rank " : "; rank ") + std::to_string(rank) +
           ": '" + line + "'";
  }
  if (r.last_error_line.size() > shown)
    out += " (and " + std::to_string(r.last_error_line.size() - shown) + " more ranks)";
  return out;
}

}  // namespace hvd::launcher
