// One host's copy of the elastic commits: a directory of files `commit-<id>.hvdc`, each written
// to a temporary name, flushed and renamed, so a process killed mid-commit never leaves a torn
// newest commit. Plain files, no MPI: the training thread of one rank per host writes, any rank
// reads. See Note [What the commit store trusts].
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "elastic/commit_file.h"

namespace hvd::detail {

// Note [What the commit store trusts]
// The store often lives in a world-writable place (/tmp) and the job often runs as root, so
// nothing another local user could have put there is believed:
//  - The store directory is used only if this user owns it and no one else can write it (nor
//    the per-user directory above it in the default location, which must not be a symlink);
//    else every operation fails with an error naming the path, its owner and its mode. Then no
//    other user can create, replace or remove anything inside.
//  - Temporary files are created with O_EXCL | O_NOFOLLOW (never through a link, never a file
//    that exists) and renamed into place. Those of writers that died mid-commit are removed at
//    the next commit.
//  - A commit file is loaded only if it is a regular file this user owns, and every field of its
//    header is checked against the file's real size before anything is allocated: a damaged or
//    foreign file is skipped, with a warning naming it and what was wrong, for the one before.

class CommitStore {
 public:
  explicit CommitStore(std::string dir);
  const std::string& dir() const { return dir_; }

  // The newest intact commit's id, or 0 when there is none. Damaged or foreign files are
  // skipped: each one logs a warning, and is also described in `skipped` when given. Throws
  // hvd::Error when the directory exists but is not this user's alone.
  std::int64_t newest_id(std::vector<std::string>* skipped = nullptr) const;
  // The commit `id` if its file is intact and this user's; else nullopt, with `problem` saying
  // why ("'PATH': bytes=... but ...") when given. Throws like newest_id().
  std::optional<StoredCommit> read(std::int64_t id, std::string* problem = nullptr) const;
  // Creates the directory if needed (mode 0700), removes the temporary files of dead writers,
  // writes atomically (exclusive temporary file, fsync, rename, fsync of the directory), then
  // removes all but the newest two commits. Throws hvd::Error naming the path on failure.
  void write(const StoredCommit& commit) const;
  // Removes every commit file and the directory if it is then empty.
  void remove_all() const;
  std::string path_of(std::int64_t id) const;
  // Where this process writes commit `id` before renaming it: ".tmp-<pid>-<start time>-<id>",
  // so a writer that died is told from a live one even when its pid was reused.
  std::string temp_path(std::int64_t id) const;

 private:
  std::vector<std::int64_t> ids() const;  // every commit file's id, newest first
  // Throws unless the directory (and the per-user one above it, see the Note) is this user's
  // alone; false when it does not exist yet (and `create` is false).
  bool check_directory(bool create) const;
  void remove_stale_temps() const;
  std::string dir_;
  std::string private_parent_;  // the default location's horovodcpp-elastic-<uid>, else empty
};

// The commit store of a job: HOROVOD_ELASTIC_DIR, or <TMPDIR or /tmp>/horovodcpp-elastic-<uid>/<job>
// (one directory per user, so no user's store is another's).
std::string elastic_dir(const std::string& job);

}  // namespace hvd::detail
