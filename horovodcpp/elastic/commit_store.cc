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
#include <fstream>
#include <sstream>

#include "core/settings.h"
#include "horovodcpp/horovod.h"

namespace hvd::detail {
namespace {

constexpr const char* kMagic = "HVDCOMMIT1";
constexpr const char* kPrefix = "commit-";
constexpr const char* kSuffix = ".hvdc";
constexpr std::size_t kKeep = 2;

std::uint64_t fnv1a(const std::string& bytes) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ULL;
  return h;
}

std::string header_of(const StoredCommit& c) {
  char line[160];
  std::snprintf(line, sizeof line, "%s id=%" PRId64 " size=%d bytes=%zu fnv1a=%016" PRIx64 "\n",
                kMagic, c.id, c.world_size, c.payload.size(), fnv1a(c.payload));
  return line;
}

std::string system_error(const std::string& what, const std::string& path) {
  return "elastic commit store: cannot " + what + " '" + path + "': " + std::strerror(errno);
}

// mkdir -p.
void make_directories(const std::string& dir) {
  std::string partial;
  std::stringstream parts(dir);
  if (!dir.empty() && dir[0] == '/') partial = "/";
  for (std::string part; std::getline(parts, part, '/');) {
    if (part.empty()) continue;
    partial += part + "/";
    if (mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST)
      throw Error(system_error("create directory", partial));
  }
}

void write_fully(int fd, const std::string& bytes, const std::string& path) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(system_error("write", path));
    done += static_cast<std::size_t>(n);
  }
}

void fsync_directory(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  fsync(fd);
  close(fd);
}

}  // namespace

std::string CommitStore::path_of(std::int64_t id) const {
  char name[64];
  std::snprintf(name, sizeof name, "%s%012" PRId64 "%s", kPrefix, id, kSuffix);
  return dir_ + "/" + name;
}

std::vector<std::int64_t> CommitStore::ids() const {
  std::vector<std::int64_t> out;
  DIR* d = opendir(dir_.c_str());
  if (d == nullptr) return out;
  const std::size_t prefix = std::strlen(kPrefix), suffix = std::strlen(kSuffix);
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= prefix + suffix || name.compare(0, prefix, kPrefix) != 0 ||
        name.compare(name.size() - suffix, suffix, kSuffix) != 0)
      continue;
    const std::string digits = name.substr(prefix, name.size() - prefix - suffix);
    if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
    out.push_back(std::strtoll(digits.c_str(), nullptr, 10));
  }
  closedir(d);
  std::sort(out.rbegin(), out.rend());
  return out;
}

std::optional<StoredCommit> CommitStore::read(std::int64_t id) const {
  std::ifstream in(path_of(id), std::ios::binary);
  if (!in) return std::nullopt;
  std::string header;
  if (!std::getline(in, header)) return std::nullopt;
  StoredCommit c;
  char magic[16] = {0};
  std::int64_t file_id = 0;
  std::size_t bytes = 0;
  std::uint64_t sum = 0;
  if (std::sscanf(header.c_str(), "%15s id=%" SCNd64 " size=%d bytes=%zu fnv1a=%" SCNx64, magic,
                  &file_id, &c.world_size, &bytes, &sum) != 5 ||
      std::strcmp(magic, kMagic) != 0 || file_id != id)
    return std::nullopt;
  c.id = id;
  c.payload.resize(bytes);
  in.read(c.payload.data(), static_cast<std::streamsize>(bytes));
  if (static_cast<std::size_t>(in.gcount()) != bytes || in.peek() != EOF) return std::nullopt;
  if (fnv1a(c.payload) != sum) return std::nullopt;
  return c;
}

std::int64_t CommitStore::newest_id() const {
  for (std::int64_t id : ids())
    if (read(id)) return id;
  return 0;
}

void CommitStore::write(const StoredCommit& c) const {
  make_directories(dir_);
  const std::string final_path = path_of(c.id);
  const std::string temp = dir_ + "/.tmp-" + std::to_string(getpid()) + "-" + std::to_string(c.id);
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw Error(system_error("create", temp));
  try {
    write_fully(fd, header_of(c), temp);
    write_fully(fd, c.payload, temp);
    if (fsync(fd) != 0) throw Error(system_error("flush", temp));
  } catch (...) {
    close(fd);
    unlink(temp.c_str());
    throw;
  }
  close(fd);
  if (rename(temp.c_str(), final_path.c_str()) != 0) {
    const std::string message = system_error("rename to", final_path);
    unlink(temp.c_str());
    throw Error(message);
  }
  fsync_directory(dir_);
  const auto all = ids();
  for (std::size_t i = kKeep; i < all.size(); ++i)
    if (all[i] < c.id) unlink(path_of(all[i]).c_str());
}

void CommitStore::remove_all() const {
  for (std::int64_t id : ids()) unlink(path_of(id).c_str());
  rmdir(dir_.c_str());  // fails harmlessly when something else is still there
}

std::string elastic_dir(const std::string& job) {
  const std::string dir = read_settings_from_environment().elastic_dir;
  if (!dir.empty()) return dir;
  const char* tmp = std::getenv("TMPDIR");
  const std::string base = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp";
  return base + "/horovodcpp-elastic/" + job;
}

}  // namespace hvd::detail
