#include "tests/gpu/emulation/shared_rendezvous.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/process_identity.h"
#include "tests/gpu/emulation/emulation.h"

namespace hvd::emu {

struct SharedRendezvous::Slot {
  std::atomic<std::uint64_t> start_time;  // of process `pid`, stored before it
  std::atomic<std::int32_t> pid;
  std::atomic<std::uint32_t> posted;
  std::atomic<std::uint32_t> consumed;
  std::atomic<std::uint32_t> generation;  // of this rank's data segment
  std::atomic<std::uint64_t> bytes;       // of its current post
  std::atomic<std::uint32_t> finalized;
  std::atomic<std::uint32_t> aborted;
};

struct SharedRendezvous::Header {
  std::atomic<std::uint32_t> nranks;
  std::atomic<std::uint32_t> futex;
  Slot slots[1];
};

namespace {

static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "shared counters must be lock-free");


void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected, int milliseconds) {
  timespec timeout{0, milliseconds * 1000000L};
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT, expected, &timeout, nullptr, 0);
}

void futex_wake(std::atomic<std::uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// The pid namespace this process's pids belong to (the inode of /proc/self/ns/pid), 0 if unknown;
// read once (reclaim_segments asks for every name in /dev/shm).
std::uint64_t pid_namespace() {
  static const std::uint64_t inode = [] {
    char link[64] = {};
    if (readlink("/proc/self/ns/pid", link, sizeof link - 1) <= 0) return std::uint64_t{0};  // "pid:[4026531836]"
    const char* number = std::strchr(link, '[');
    return number == nullptr ? std::uint64_t{0} : static_cast<std::uint64_t>(std::strtoull(number + 1, nullptr, 10));
  }();
  return inode;
}

std::uint64_t own_start_time() {
  static const std::uint64_t start_time = detail::process_start_time(getpid());
  return start_time;
}

std::string stamp(long pid, std::uint64_t start_time) {
  return std::to_string(pid) + "." + std::to_string(start_time) + "." + std::to_string(pid_namespace());
}

// The process a segment name's stamp names, if the name has this prefix and a stamp of this
// pid namespace.
bool stamped_here(const std::string& name, const std::string& prefix, long* pid, std::uint64_t* start_time) {
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  unsigned long long fields[3];
  const char* at = name.c_str() + prefix.size();
  for (int i = 0; i < 3; ++i) {
    if (*at < '0' || *at > '9') return false;
    char* end = nullptr;
    fields[i] = std::strtoull(at, &end, 10);
    if (*end != (i < 2 ? '.' : '-')) return false;
    at = end + 1;
  }
  *pid = static_cast<long>(fields[0]);
  *start_time = fields[1];
  return fields[2] == pid_namespace() && fields[2] != 0;
}

// See Note [Reclaiming the emulation's shared memory].
void reclaim_segments() {
  const std::string prefix = config().segment_prefix + "-";
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return;
  std::vector<std::string> stale;
  while (const dirent* entry = readdir(dir)) {
    long pid = 0;
    std::uint64_t start_time = 0;
    if (stamped_here(entry->d_name, prefix, &pid, &start_time) && !detail::process_still_running(pid, start_time))
      stale.push_back(entry->d_name);
  }
  closedir(dir);
  int removed = 0;
  for (const auto& name : stale) removed += shm_unlink(("/" + name).c_str()) == 0 ? 1 : 0;
  if (removed > 0)
    std::fprintf(stderr, "EMULATED NCCL: removed %d shared-memory segment(s) of processes that are gone (/dev/shm/%s*)\n",
                 removed, prefix.c_str());
}

void* map_shared(const std::string& name, std::size_t bytes, bool create, bool writable, std::string* error) {
  const int flags = writable ? O_RDWR | (create ? O_CREAT : 0) : O_RDONLY;
  const int fd = shm_open(name.c_str(), flags, 0600);
  if (fd < 0) {
    *error = "shm_open " + name + ": " + std::strerror(errno);
    return nullptr;
  }
  if (create) {
    struct stat st {};
    if (fstat(fd, &st) == 0 && static_cast<std::size_t>(st.st_size) < bytes && ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      *error = "ftruncate " + name + ": " + std::strerror(errno);
      close(fd);
      return nullptr;
    }
  }
  void* p = mmap(nullptr, bytes, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    *error = "mmap " + name + ": " + std::strerror(errno);
    return nullptr;
  }
  return p;
}

}  // namespace

const std::string& SharedRendezvous::process_stamp() {
  static const std::string own = stamp(static_cast<long>(getpid()), own_start_time());
  return own;
}

std::string SharedRendezvous::open(const std::string& creator, const std::string& key, int nranks, int rank,
                                   std::unique_ptr<SharedRendezvous>* out) {
  static std::once_flag reclaimed;
  std::call_once(reclaimed, reclaim_segments);
  std::unique_ptr<SharedRendezvous> r(new SharedRendezvous());
  r->key_ = key;
  r->header_name_ = "/" + config().segment_prefix + "-" + creator + "-" + key;
  r->nranks_ = nranks;
  r->rank_ = rank;
  r->header_bytes_ = sizeof(Header) + sizeof(Slot) * static_cast<std::size_t>(nranks - 1);
  std::string error;
  void* p = map_shared(r->header_name_, r->header_bytes_, true, true, &error);
  if (p == nullptr) return error;
  r->header_ = static_cast<Header*>(p);
  std::uint32_t expected = 0;
  if (!r->header_->nranks.compare_exchange_strong(expected, static_cast<std::uint32_t>(nranks)) &&
      expected != static_cast<std::uint32_t>(nranks)) {
    return "rank " + std::to_string(rank) + " was created with nranks " + std::to_string(nranks) +
           " but another rank of the same unique id with nranks " + std::to_string(expected);
  }
  r->mappings_.resize(static_cast<std::size_t>(nranks));
  *out = std::move(r);
  return {};
}

SharedRendezvous::~SharedRendezvous() {
  if (header_ != nullptr) let_peers_read_last_post();
  for (auto& m : mappings_)
    if (m.data != nullptr) munmap(m.data, m.size);
  for (std::uint32_t g : own_generations_) shm_unlink(data_name(rank_, g).c_str());
  if (header_ != nullptr) munmap(header_, header_bytes_);
  shm_unlink(header_name_.c_str());  // harmless when another rank did it first
}

// Stamped with the rank's own process (see Note [Reclaiming the emulation's shared memory]).
std::string SharedRendezvous::data_name(int rank, std::uint32_t generation) const {
  const Slot& slot = header_->slots[rank];
  return "/" + config().segment_prefix + "-" + stamp(slot.pid.load(), slot.start_time.load()) + "-" + key_ + "-" +
         std::to_string(rank) + "-" + std::to_string(generation);
}

void SharedRendezvous::wake() {
  header_->futex.fetch_add(1);
  futex_wake(&header_->futex);
}

std::string SharedRendezvous::peer_gone(int r) const {
  const Slot& slot = header_->slots[r];
  if (slot.aborted.load() != 0) return "rank " + std::to_string(r) + " aborted its communicator (ncclCommAbort)";
  const int pid = slot.pid.load();
  if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH)
    return "rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") exited";
  return {};
}

std::string SharedRendezvous::check_peers() {
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_) continue;
    if (config().peer_aborts_unseen && header_->slots[r].aborted.load() != 0) continue;
    std::string gone = peer_gone(r);
    if (!gone.empty()) return gone;
  }
  return {};
}

bool SharedRendezvous::wait(const std::function<bool()>& done, const Stop& stop, const Problem& problem,
                            const std::function<std::string()>& what) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto last_check = start;
  bool reported = false, announced = false;
  for (;;) {
    const std::uint32_t word = header_->futex.load();
    if (done()) return true;
    if (stop && stop()) return false;
    const auto now = Clock::now();
    if (now - last_check > std::chrono::milliseconds(100)) {
      last_check = now;
      if (!reported) {
        const std::string trouble = check_peers();
        if (!trouble.empty()) {
          reported = true;
          if (problem) problem(trouble);
        }
      }
      if (!announced && now - start > std::chrono::seconds(20)) {
        announced = true;  // what a hang looks like, for the test log
        std::fprintf(stderr, "EMULATED NCCL: rank %d of communicator %s has waited 20 s for %s\n", rank_,
                     key_.substr(0, 8).c_str(), what().c_str());
      }
    }
    futex_wait(&header_->futex, word, 20);
  }
}

bool SharedRendezvous::join(const Stop& stop) {
  header_->slots[rank_].start_time.store(own_start_time());
  header_->slots[rank_].pid.store(static_cast<std::int32_t>(getpid()));
  wake();
  const bool joined = wait(
      [this] {
        for (int r = 0; r < nranks_; ++r)
          if (header_->slots[r].pid.load() == 0) return false;
        return true;
      },
      stop, nullptr, [] { return std::string("every rank to join (ncclCommInitRank)"); });
  // Every rank has mapped the segment: its name is no longer needed.
  if (joined) shm_unlink(header_name_.c_str());
  return joined;
}

unsigned char* SharedRendezvous::reserve(std::uint32_t seq, std::size_t bytes, const Stop& stop, const Problem& problem) {
  const std::uint32_t previous = seq - 1;
  if (!wait(
          [&] {
            for (int r = 0; r < nranks_; ++r)
              if (header_->slots[r].consumed.load() < previous) return false;
            return true;
          },
          stop, problem, [&] { return "every rank to finish operation " + std::to_string(previous); }))
    return nullptr;
  Mapping& own = mappings_[static_cast<std::size_t>(rank_)];
  if (own.data == nullptr || own.size < bytes) {
    // A new, larger segment: no peer reads the old one any more (they consumed our last post).
    if (own.data != nullptr) {
      munmap(own.data, own.size);
      shm_unlink(data_name(rank_, own.generation).c_str());
    }
    const std::size_t size = std::max<std::size_t>({bytes, own.size * 2, std::size_t{1} << 16});
    const std::uint32_t generation = own.generation + 1;
    std::string error;
    void* p = map_shared(data_name(rank_, generation), size, true, true, &error);
    if (p == nullptr) {
      std::fprintf(stderr, "EMULATED NCCL: %s\n", error.c_str());
      std::abort();
    }
    own = Mapping{generation, static_cast<unsigned char*>(p), size};
    own_generations_.push_back(generation);
    header_->slots[rank_].generation.store(generation);
  }
  return own.data;
}

void SharedRendezvous::post(std::uint32_t seq, std::size_t bytes) {
  header_->slots[rank_].bytes.store(bytes);
  header_->slots[rank_].posted.store(seq);
  wake();
}

bool SharedRendezvous::wait_posted(std::uint32_t seq, const Stop& stop, const Problem& problem) {
  return wait(
      [&] {
        for (int r = 0; r < nranks_; ++r)
          if (header_->slots[r].posted.load() < seq) return false;
        return true;
      },
      stop, problem, [&] { return "every rank to post operation " + std::to_string(seq) + " (missing: " + missing(seq) + ")"; });
}

// A peer maps a post only once every rank has posted, so it may still need this rank's last one
// when this rank is destroyed or aborts right after its own part of the operation (as a GPU's
// would be done with it). The name stays until every peer has read the post, or aborted, or is
// gone: within a bound, as a peer stuck elsewhere never reads it.
void SharedRendezvous::let_peers_read_last_post() {
  const std::uint32_t last = header_->slots[rank_].posted.load();
  if (last == 0) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  wait(
      [&] {
        for (int r = 0; r < nranks_; ++r)
          if (r != rank_ && header_->slots[r].consumed.load() < last && peer_gone(r).empty()) return false;
        return true;
      },
      [&] { return std::chrono::steady_clock::now() > until; }, nullptr,
      [&] { return "every rank to read this rank's operation " + std::to_string(last); });
}

const unsigned char* SharedRendezvous::peer_post(int rank, std::size_t* bytes) {
  Slot& slot = header_->slots[rank];
  *bytes = slot.bytes.load();
  Mapping& m = mappings_[static_cast<std::size_t>(rank)];
  const std::uint32_t generation = slot.generation.load();
  if (m.data == nullptr || m.generation != generation) {
    if (m.data != nullptr) munmap(m.data, m.size);
    std::string error;
    const std::string name = data_name(rank, generation);
    const int fd = shm_open(name.c_str(), O_RDONLY, 0);
    struct stat st {};
    if (fd < 0 || fstat(fd, &st) != 0) {
      std::fprintf(stderr, "EMULATED NCCL: cannot open %s: %s\n", name.c_str(), std::strerror(errno));
      std::abort();
    }
    void* p = mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
      std::fprintf(stderr, "EMULATED NCCL: cannot map %s\n", name.c_str());
      std::abort();
    }
    m = Mapping{generation, static_cast<unsigned char*>(p), static_cast<std::size_t>(st.st_size)};
  }
  return m.data;
}

void SharedRendezvous::consumed(std::uint32_t seq) {
  header_->slots[rank_].consumed.store(seq);
  wake();
}

bool SharedRendezvous::finalize(std::uint32_t last_seq, const Stop& stop, const Problem& problem) {
  if (!wait(
          [&] {
            for (int r = 0; r < nranks_; ++r)
              if (header_->slots[r].consumed.load() < last_seq) return false;
            return true;
          },
          stop, problem, [] { return std::string("every rank to finish its operations before finalize"); }))
    return false;
  header_->slots[rank_].finalized.store(1);
  wake();
  return wait(
      [&] {
        for (int r = 0; r < nranks_; ++r)
          if (header_->slots[r].finalized.load() == 0) return false;
        return true;
      },
      stop, problem, [&] { return "every rank to finalize (missing: " + missing(0) + ")"; });
}

void SharedRendezvous::mark_aborted() {
  header_->slots[rank_].aborted.store(1);
  wake();
}

std::string SharedRendezvous::missing(std::uint32_t seq) const {
  std::string ranks;
  for (int r = 0; r < nranks_; ++r) {
    const Slot& slot = header_->slots[r];
    const bool there = seq == 0 ? slot.finalized.load() != 0 : slot.posted.load() >= seq;
    if (!there) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  }
  return ranks.empty() ? "none" : ranks;
}

}  // namespace hvd::emu
