// One host's copy of the elastic commits: a directory of files `commit-<id>.hvdc`, each written
// to a temporary name, flushed and renamed, so a process killed mid-commit never leaves a torn
// newest commit (readers also check each file's length and checksum). Plain files, no MPI: the
// training thread of one rank per host writes, any rank reads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hvd::detail {

struct StoredCommit {
  std::int64_t id = 0;
  int world_size = 0;
  std::string payload;
};

class CommitStore {
 public:
  explicit CommitStore(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }

  // The newest intact commit's id, or 0 when there is none (damaged files are skipped).
  std::int64_t newest_id() const;
  // The commit `id` if its file is intact.
  std::optional<StoredCommit> read(std::int64_t id) const;
  // Writes atomically (temporary file, fsync, rename, fsync of the directory), then removes all
  // but the newest two commits. Throws hvd::Error naming the path on failure.
  void write(const StoredCommit& commit) const;
  // Removes every commit file and the directory if it is then empty.
  void remove_all() const;
  std::string path_of(std::int64_t id) const;

 private:
  std::vector<std::int64_t> ids() const;  // every commit file's id, newest first
  std::string dir_;
};

// HOROVOD_ELASTIC_DIR, or <TMPDIR or /tmp>/horovodcpp-elastic/<job>.
std::string elastic_dir(const std::string& job);

}  // namespace hvd::detail
