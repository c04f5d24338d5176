#include "elastic/commit_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "core/logging.h"
#include "core/process_identity.h"
#include "core/settings.h"
#include "horovodcpp/horovod.h"

namespace hvd::detail {
namespace {

constexpr const char* kPrefix = "commit-";
constexpr const char* kSuffix = ".hvdc";
constexpr const char* kTempPrefix = ".tmp-";
constexpr std::size_t kKeep = 2;
constexpr const char* kPrivatePrefix = "horovodcpp-elastic-";

std::string system_error(const std::string& what, const std::string& path) {
  return "elastic commit store: cannot " + what + " '" + path + "': " + std::strerror(errno);
}

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

std::string parent_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Throws unless `path` is a directory this user owns that no one else may write. A symlink is
// refused outright unless `follow` (a directory the user named may be reached through one).
void check_private(const std::string& path, bool follow) {
  struct stat st {};
  if ((follow ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0)
    throw Error(system_error("inspect directory", path));
  const std::string advice =
      ": horovodcpp keeps elastic commits only in a directory that this user owns and no one else can write "
      "(see docs/elastic.md); remove it, or set HOROVOD_ELASTIC_DIR to such a directory";
  const std::string facts = " (owner uid " + std::to_string(st.st_uid) + ", mode " + octal_mode(st.st_mode) +
                            "; this user is uid " + std::to_string(::geteuid()) + ")";
  if (S_ISLNK(st.st_mode))
    throw Error("elastic commit store: '" + path + "' is a symbolic link" + facts + advice);
  if (!S_ISDIR(st.st_mode)) throw Error("elastic commit store: '" + path + "' is not a directory" + facts + advice);
  if (st.st_uid != ::geteuid())
    throw Error("elastic commit store: '" + path + "' belongs to another user" + facts + advice);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    throw Error("elastic commit store: '" + path + "' can be written by other users" + facts + advice);
}

// mkdir -p, each new directory 0700.
void make_directories(const std::string& dir) {
  std::string partial;
  std::stringstream parts(dir);
  if (!dir.empty() && dir[0] == '/') partial = "/";
  for (std::string part; std::getline(parts, part, '/');) {
    if (part.empty()) continue;
    partial += part + "/";
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST)
      throw Error(system_error("create directory", partial));
  }
}

bool write_fully(int fd, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// Reads up to `size` bytes; fewer only at the end of the file. -1 on error.
ssize_t read_fully(int fd, char* out, std::size_t size) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, out + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

void fsync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

CommitStore::CommitStore(std::string dir) : dir_(std::move(dir)) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  // The default location's per-user directory is checked too: see Note [What the commit store trusts].
  const std::string parent = parent_of(dir_);
  if (base_name(parent) == kPrivatePrefix + std::to_string(::geteuid())) private_parent_ = parent;
}

std::string CommitStore::path_of(std::int64_t id) const {
  char name[64];
  std::snprintf(name, sizeof name, "%s%012" PRId64 "%s", kPrefix, id, kSuffix);
  return dir_ + "/" + name;
}

std::string CommitStore::temp_path(std::int64_t id) const {
  const long pid = static_cast<long>(::getpid());
  return dir_ + "/" + kTempPrefix + std::to_string(pid) + "-" + std::to_string(process_start_time(pid)) + "-" +
         std::to_string(id);
}

bool CommitStore::check_directory(bool create) const {
  // The per-user directory first, before anything is created below it (through it, were it a link).
  if (!private_parent_.empty()) {
    if (create) make_directories(private_parent_);
    struct stat st {};
    if (::lstat(private_parent_.c_str(), &st) != 0 && errno == ENOENT) return false;
    check_private(private_parent_, /*follow=*/false);
  }
  if (create) make_directories(dir_);
  struct stat st {};
  if (::stat(dir_.c_str(), &st) != 0 && errno == ENOENT) return false;
  check_private(dir_, /*follow=*/private_parent_.empty());
  return true;
}

std::vector<std::int64_t> CommitStore::ids() const {
  std::vector<std::int64_t> out;
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return out;
  const std::size_t prefix = std::strlen(kPrefix), suffix = std::strlen(kSuffix);
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= prefix + suffix || name.compare(0, prefix, kPrefix) != 0 ||
        name.compare(name.size() - suffix, suffix, kSuffix) != 0)
      continue;
    std::uint64_t id = 0;
    if (!parse_digits(name.substr(prefix, name.size() - prefix - suffix), 18, &id)) continue;
    // Only the name path_of() gives: "commit-1.hvdc" is not commit 1's file.
    if (dir_ + "/" + name == path_of(static_cast<std::int64_t>(id))) out.push_back(static_cast<std::int64_t>(id));
  }
  ::closedir(d);
  std::sort(out.rbegin(), out.rend());
  return out;
}

std::optional<StoredCommit> CommitStore::read(std::int64_t id, std::string* problem) const {
  const std::string path = path_of(id);
  auto refuse = [&](const std::string& why) -> std::optional<StoredCommit> {
    if (problem != nullptr) *problem = "'" + path + "': " + why;
    return std::nullopt;
  };
  if (!check_directory(false)) return refuse("the store directory does not exist");
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return refuse(errno == ELOOP ? "it is a symbolic link" : std::string("cannot open it: ") + std::strerror(errno));
  struct CloseAtEnd {
    int fd;
    ~CloseAtEnd() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return refuse(std::string("cannot inspect it: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return refuse("it is not a regular file");
  if (st.st_uid != ::geteuid())
    return refuse("it belongs to uid " + std::to_string(st.st_uid) + ", not to this user (uid " +
                  std::to_string(::geteuid()) + ")");
  const auto file_size = static_cast<std::uint64_t>(st.st_size);
  char head[kMaxCommitHeader];
  const ssize_t got = read_fully(fd, head, sizeof head);
  if (got < 0) return refuse(std::string("cannot read it: ") + std::strerror(errno));
  CommitHeader h;
  // Every header field against the real size first: nothing is allocated for a lying header.
  if (std::string why = parse_commit_header(head, static_cast<std::size_t>(got), file_size, id, &h); !why.empty())
    return refuse(why);
  StoredCommit c;
  c.id = h.id;
  c.world_size = h.world_size;
  c.payload.resize(static_cast<std::size_t>(h.bytes));
  const std::size_t in_head = static_cast<std::size_t>(got) - h.length;
  std::memcpy(c.payload.data(), head + h.length, std::min<std::size_t>(in_head, c.payload.size()));
  if (c.payload.size() > in_head) {
    const ssize_t rest = read_fully(fd, c.payload.data() + in_head, c.payload.size() - in_head);
    if (rest < 0) return refuse(std::string("cannot read it: ") + std::strerror(errno));
    if (static_cast<std::size_t>(rest) != c.payload.size() - in_head)
      return refuse("truncated while it was read (" + std::to_string(in_head + static_cast<std::size_t>(rest)) + " of " +
                    std::to_string(c.payload.size()) + " payload bytes)");
  }
  char extra;
  if (read_fully(fd, &extra, 1) != 0) return refuse("it grew while it was read");
  if (std::string why = checksum_problem(h, c.payload); !why.empty()) return refuse(why);
  return c;
}

std::int64_t CommitStore::newest_id(std::vector<std::string>* skipped) const {
  if (!check_directory(false)) return 0;
  for (std::int64_t id : ids()) {
    std::string problem;
    if (read(id, &problem)) return id;
    const std::string warning = "elastic commit store: skipped " + problem + "; falling back to the commit before it";
    log_warn(warning);
    if (skipped != nullptr) skipped->push_back(warning);
  }
  return 0;
}

void CommitStore::remove_stale_temps() const {
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return;
  const long me = static_cast<long>(::getpid());
  const std::size_t prefix = std::strlen(kTempPrefix);
  std::vector<std::string> stale;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix, kTempPrefix) != 0) continue;
    // .tmp-<pid>-<start>-<id> (and the older .tmp-<pid>-<id>): stale when that process is gone
    // or the pid now belongs to a process that started at another time.
    std::istringstream parts(name.substr(prefix));
    std::string pid_text, start_text, id_text;
    std::getline(parts, pid_text, '-');
    std::getline(parts, start_text, '-');
    const bool has_start = std::getline(parts, id_text, '-') && !id_text.empty();
    std::uint64_t pid = 0, start = 0;
    if (!parse_digits(pid_text, 10, &pid) || (has_start && !parse_digits(start_text, 20, &start))) continue;
    const long p = static_cast<long>(pid);
    const bool same_process = process_still_running(p, has_start ? start : 0);
    if (p == me && same_process) continue;  // this process's own (none outlives a write)
    if (!same_process) stale.push_back(name);
  }
  ::closedir(d);
  for (const auto& name : stale) {
    const std::string path = dir_ + "/" + name;
    if (::unlink(path.c_str()) == 0) log_debug("elastic commit store: removed '" + path + "', left by a writer that died");
  }
}

void CommitStore::write(const StoredCommit& c) const {
  check_directory(/*create=*/true);
  remove_stale_temps();
  const std::string final_path = path_of(c.id);
  const std::string temp = temp_path(c.id);
  // Never through a link, never into a file that is already there.
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST)
      throw Error("elastic commit store: cannot create '" + temp +
                  "': something is already there (a file or link another process left or planted); nothing was "
                  "written through it");
    throw Error(system_error("create", temp));
  }
  const bool written = write_fully(fd, commit_header(c)) && write_fully(fd, c.payload) && ::fsync(fd) == 0;
  const std::string failure = written ? std::string() : system_error("write", temp);
  ::close(fd);
  if (!written) {
    ::unlink(temp.c_str());
    throw Error(failure);
  }
  if (::rename(temp.c_str(), final_path.c_str()) != 0) {
    const std::string message = system_error("rename to", final_path);
    ::unlink(temp.c_str());
    throw Error(message);
  }
  fsync_directory(dir_);
  const auto all = ids();
  for (std::size_t i = kKeep; i < all.size(); ++i)
    if (all[i] < c.id) ::unlink(path_of(all[i]).c_str());
}

void CommitStore::remove_all() const {
  if (!check_directory(false)) return;
  for (std::int64_t id : ids()) ::unlink(path_of(id).c_str());
  ::rmdir(dir_.c_str());  // fails harmlessly when something else is still there
}

std::string elastic_dir(const std::string& job) {
  const std::string dir = read_settings_from_environment().elastic_dir;
  if (!dir.empty()) return dir;
  const char* tmp = std::getenv("TMPDIR");
  const std::string base = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp";
  // Per user: see Note [What the commit store trusts].
  return base + "/" + kPrivatePrefix + std::to_string(::geteuid()) + "/" + job;
}

}  // namespace hvd::detail
