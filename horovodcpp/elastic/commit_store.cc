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

constexpr const char* kMagic = "HVDCOMMIT1";
constexpr const char* kPrefix = "commit-";
constexpr const char* kSuffix = ".hvdc";
constexpr const char* kTempPrefix = ".tmp-";
constexpr std::size_t kKeep = 2;
constexpr std::size_t kMaxHeader = 160;  // header_of() writes well under this
constexpr const char* kPrivatePrefix = "horovodcpp-elastic-";

std::uint64_t fnv1a(const char* bytes, std::size_t size) {
  std::uint64_t h = 1469598103934665603ULL;
  for (std::size_t i = 0; i < size; ++i) h = (h ^ static_cast<unsigned char>(bytes[i])) * 1099511628211ULL;
  return h;
}

std::string header_of(const StoredCommit& c) {
  char line[kMaxHeader];
  std::snprintf(line, sizeof line, "%s id=%" PRId64 " size=%d bytes=%zu fnv1a=%016" PRIx64 "\n", kMagic, c.id,
                c.world_size, c.payload.size(), fnv1a(c.payload.data(), c.payload.size()));
  return line;
}

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

// At most 40 characters of a header field as a message may show them (damaged files hold anything).
std::string shown(const std::string& text) {
  std::string out;
  for (char c : text.substr(0, 40)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return text.size() > 40 ? out + "..." : out;
}

// A whole number of at most `max_digits` digits (no sign, no spaces), or false.
bool parse_digits(const std::string& text, std::size_t max_digits, std::uint64_t* out) {
  if (text.empty() || text.size() > max_digits || text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  *out = std::strtoull(text.c_str(), nullptr, 10);
  return true;
}

struct Header {
  std::int64_t id = 0;
  int world_size = 0;
  std::uint64_t bytes = 0;
  std::uint64_t sum = 0;
  std::size_t length = 0;  // of the header line, its newline included
};

// Checks every field of the header at the start of `text` (up to kMaxHeader bytes of a file of
// `file_size` bytes named for `id`) before anything else is read or allocated: "" when good,
// else what is wrong.
std::string parse_header(const char* text, std::size_t available, std::uint64_t file_size, std::int64_t id,
                         Header* h) {
  const std::size_t scan = std::min(available, kMaxHeader);
  const char* newline = static_cast<const char*>(std::memchr(text, '\n', scan));
  if (newline == nullptr)
    return file_size < kMaxHeader ? "truncated: the file (" + std::to_string(file_size) + " bytes) ends inside its header"
                                  : "no header line in its first " + std::to_string(kMaxHeader) + " bytes";
  h->length = static_cast<std::size_t>(newline - text) + 1;
  std::vector<std::string> words;
  std::string word;
  for (const char* p = text; p < newline; ++p) {
    if (*p == ' ') {
      words.push_back(word);
      word.clear();
    } else {
      word += *p;
    }
  }
  words.push_back(word);
  if (words.size() != 5 || words[0] != kMagic)
    return "not a commit header (expected '" + std::string(kMagic) + " id=N size=N bytes=N fnv1a=X')";
  auto field = [&](std::size_t i, const char* key, std::string* value) {
    const std::string prefix = std::string(key) + "=";
    if (words[i].compare(0, prefix.size(), prefix) != 0) return false;
    *value = words[i].substr(prefix.size());
    return true;
  };
  std::string id_text, size_text, bytes_text, sum_text;
  if (!field(1, "id", &id_text) || !field(2, "size", &size_text) || !field(3, "bytes", &bytes_text) ||
      !field(4, "fnv1a", &sum_text))
    return "not a commit header (expected '" + std::string(kMagic) + " id=N size=N bytes=N fnv1a=X')";
  std::uint64_t v = 0;
  if (!parse_digits(id_text, 18, &v) || static_cast<std::int64_t>(v) != id)
    return "id=" + shown(id_text) + " but the file is named for commit " + std::to_string(id);
  h->id = id;
  if (!parse_digits(size_text, 10, &v) || v < 1 || v > 0x7fffffffULL)
    return "size=" + shown(size_text) + " is not a world size (a whole number from 1 to 2^31-1)";
  h->world_size = static_cast<int>(v);
  if (h->length > file_size) return "the file changed while it was read";
  if (!parse_digits(bytes_text, 19, &h->bytes) || h->bytes != file_size - h->length)
    return "bytes=" + shown(bytes_text) + " but the file holds " + std::to_string(file_size - h->length) +
           " bytes after its header";
  if (sum_text.size() != 16 || sum_text.find_first_not_of("0123456789abcdef") != std::string::npos)
    return "fnv1a=" + shown(sum_text) + " is not a 16-digit hexadecimal checksum";
  h->sum = std::strtoull(sum_text.c_str(), nullptr, 16);
  return {};
}

std::string checksum_problem(const Header& h, const std::string& payload) {
  if (fnv1a(payload.data(), payload.size()) == h.sum) return {};
  return "its checksum does not match its contents";
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

std::optional<StoredCommit> parse_commit(const std::string& bytes, std::int64_t id, std::string* problem) {
  Header h;
  std::string why = parse_header(bytes.data(), bytes.size(), bytes.size(), id, &h);
  StoredCommit c;
  if (why.empty()) {
    c.payload = bytes.substr(h.length);
    why = checksum_problem(h, c.payload);
  }
  if (!why.empty()) {
    if (problem != nullptr) *problem = why;
    return std::nullopt;
  }
  c.id = h.id;
  c.world_size = h.world_size;
  return c;
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
  char head[kMaxHeader];
  const ssize_t got = read_fully(fd, head, sizeof head);
  if (got < 0) return refuse(std::string("cannot read it: ") + std::strerror(errno));
  Header h;
  // Every header field against the real size first: nothing is allocated for a lying header.
  if (std::string why = parse_header(head, static_cast<std::size_t>(got), file_size, id, &h); !why.empty())
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
  const bool written = write_fully(fd, header_of(c)) && write_fully(fd, c.payload) && ::fsync(fd) == 0;
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
