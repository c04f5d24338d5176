// Reads the launcher's stderr as it passes through hvdrun and finds which rank failed first in
// the messages of mpirun (or srun), so hvdrun's last line can name it. When the launcher names
// no rank (daemons that never started, a program that could not be executed, every rank failing
// at once), it keeps the launcher lines that explain why and each rank's last error line
// (tagged "[job,rank]<stderr>:" by --tag-output, "N: " by srun --label). Owned and fed by the
// supervisor loop.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hvd::launcher {

struct FailedRank {
  int rank = -1;
  std::optional<int> exit_code;
  std::optional<int> signal;
  bool improper_exit = false;  // exited without MPI_Finalize (hvd::shutdown)
  bool aborted = false;        // called MPI_Abort (exit_code is its error code)
  std::string node;
};

struct LaunchReport {
  std::optional<FailedRank> failed;  // the first rank the launcher named
  // Launcher lines that explain a failure without naming a rank, e.g. "program 'x' not found
  // on node n1", "2 total processes failed to start", in the order they came.
  std::vector<std::string> notes;
  std::map<int, std::string> last_error_line;  // rank -> its last non-empty stderr line
};

class RankReportScanner {
 public:
  void feed(const char* data, std::size_t size);
  std::optional<FailedRank> failed() const;
  LaunchReport report() const;

 private:
  void take_line(const std::string& line);
  void take_rank_line(const std::string& line);
  std::string partial_;
  std::string launcher_text_;  // mpirun/srun's own lines, joined by spaces
  std::vector<std::string> notable_lines_;
  std::map<int, std::string> last_error_line_;
};

// "rank 1 exited with code 3", "rank 2 (node n1) was killed by signal 9 (Killed)", ...
std::string describe(const FailedRank& failed);

// hvdrun's last line after `launcher` ("mpirun" or "srun") exited with `exit_code` != 0:
// "rank 1 exited with code 3; mpirun ended the other ranks; exit code 3", or, when no rank was
// named, "mpirun exited with code 1 without naming a failed rank; mpirun said: ...; last error
// output: rank 0: '...'".
std::string failure_summary(const LaunchReport& report, const std::string& launcher, int exit_code);

}  // namespace hvd::launcher
