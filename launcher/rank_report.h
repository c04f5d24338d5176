// Reads the launcher's stderr as it passes through hvdrun and finds which rank failed first in
// the messages of mpirun (or srun), so hvdrun's last line can name it. Rank output, tagged
// "[job,rank]<stream>:" by --tag-output, is ignored. Owned and fed by the supervisor loop.
#pragma once

#include <optional>
#include <string>

namespace hvd::launcher {

struct FailedRank {
  int rank = -1;
  std::optional<int> exit_code;
  std::optional<int> signal;
  bool improper_exit = false;  // exited without MPI_Finalize (hvd::shutdown)
  bool aborted = false;        // called MPI_Abort (exit_code is its error code)
  std::string node;
};

class RankReportScanner {
 public:
  void feed(const char* data, std::size_t size);
  std::optional<FailedRank> failed() const;

 private:
  void take_line(const std::string& line);
  std::string partial_;
  std::string launcher_text_;  // mpirun/srun's own lines, joined by spaces
};

// "rank 1 exited with code 3", "rank 2 (node n1) was killed by signal 9 (Killed)", ...
std::string describe(const FailedRank& failed);

}  // namespace hvd::launcher
