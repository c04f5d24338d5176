// Opening a file that horovodcpp writes at a path someone gave it (HOROVOD_TIMELINE,
// HOROVOD_AUTOTUNE_LOG, an elastic commit, hvd-timeline's merge output), where another local
// user may have planted something first: often in a world-writable directory like /tmp, and
// often as root. Header-only (POSIX calls and strings), so the hvd-timeline tool uses it too; in
// timeline/ because the timeline may not include the core and the core may include the timeline.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace hvd::detail {

// Note [Output files are never followed through links]
// An output file is opened with O_NOFOLLOW (a symbolic link where the file goes is refused, not
// followed: through it another user could make this process overwrite any file it may write),
// and without blocking (a FIFO planted there must not hang the open). What is already there is
// used only if it is a regular file with one link (a hard link to another file is the same
// trap as a symlink) that this user owns; only then is it truncated. Else the open fails with a
// message naming the path and what is wrong with it. Only the last component of the path is
// checked: the directories above are the user's choice.

// Returns an open, empty, blocking file descriptor for writing, or -1 with `*error` set to
// "'PATH' is a symbolic link ..." or "'PATH': cannot open the file for writing (REASON)" (no
// prefix: the caller says which file it is).
inline int open_output_file(const std::string& path, std::string* error, mode_t mode = 0644) {
  const int flags = O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  // A file this call creates is this user's by definition (whatever owner the file system shows).
  int fd = ::open(path.c_str(), flags | O_CREAT | O_EXCL, mode);
  const bool created = fd >= 0;
  if (!created && errno == EEXIST) fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    if (errno == ELOOP)  // O_NOFOLLOW's answer to a symlink, dangling or not
      *error = "'" + path + "' is a symbolic link; horovodcpp does not write through links (another user may have "
               "planted it): remove it or choose another path";
    else if (errno == ENXIO)  // O_NONBLOCK's answer to a FIFO without a reader
      *error = "'" + path + "' already exists and it is not a regular file (a FIFO); horovodcpp writes only its own "
               "files: remove it or choose another path";
    else
      *error = "'" + path + "': cannot open the file for writing (" + std::strerror(errno) + ")";
    return -1;
  }
  struct stat st {};
  std::string wrong;
  if (::fstat(fd, &st) != 0)
    wrong = std::string("cannot stat it: ") + std::strerror(errno);
  else if (!created && !S_ISREG(st.st_mode))
    wrong = "it is not a regular file";
  else if (!created && st.st_uid != ::geteuid())
    wrong = "it is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
            std::to_string(::geteuid()) + ")";
  else if (!created && st.st_nlink > 1)
    wrong = "it has " + std::to_string(st.st_nlink) + " hard links (a link to another file)";
  if (wrong.empty() && !created && ::ftruncate(fd, 0) != 0)
    wrong = std::string("cannot truncate it: ") + std::strerror(errno);
  if (wrong.empty() && ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0)
    wrong = std::string("cannot make it blocking: ") + std::strerror(errno);
  if (!wrong.empty()) {
    ::close(fd);
    *error = "'" + path + "' already exists and " + wrong + "; horovodcpp writes only its own files: remove it or "
             "choose another path";
    return -1;
  }
  return fd;
}

// Writes all of `bytes`; false with errno set on failure.
inline bool write_all(int fd, const char* bytes, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, bytes, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace hvd::detail
