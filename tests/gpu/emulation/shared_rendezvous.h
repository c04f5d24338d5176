// Where the processes of one emulated NCCL communicator meet (test-only): a shared-memory
// segment per communicator (/dev/shm/hvdemu-<stamp>-<key>) with one slot of counters per rank,
// and one growable data segment per rank holding what that rank posts for the current operation.
// Operation n: every rank waits until the others have consumed its post n-1, writes its post n,
// waits until every rank has posted n, reads what it needs, and marks n consumed. Waits sleep on
// a futex in the shared segment and give up when `stop` says so (the communicator was aborted);
// meanwhile a peer that aborted or whose process is gone is reported through `problem`, once.
// Used by one stream thread at a time (operations of a communicator are ordered), plus
// mark_aborted from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace hvd::emu {

// Note [Reclaiming the emulation's shared memory]
// A segment's name starts with the process whose end makes it garbage, stamped
// "<pid>.<start time>.<pid namespace>" (core/process_identity.h): hvdemu-<stamp>-<key> is a
// communicator's header, stamped with the process that made the unique id (the stamp travels in
// the id), and hvdemu-<stamp>-<key>-<rank>-<generation> a rank's data, stamped with that rank.
// Ranks unlink what they can as early as they can: the header once every rank has joined (each
// keeps its mapping), a data segment when a larger one replaces it and when the communicator
// ends. A killed process unlinks nothing, so the first communicator each process opens removes
// every segment of its prefix (HVD_EMU_SHM_PREFIX, default hvdemu) whose stamp names a process
// that no longer runs. A running process's segments are never touched, whoever's they are (the
// other ranks of a job, the jobs ctest runs side by side); stamps of another pid namespace (its
// pids mean nothing here) and names of any other form (an older build's) are left alone. Hence
// the process that makes a unique id must run until every rank has joined, as NCCL's bootstrap
// root must.

class SharedRendezvous {
 public:
  using Stop = std::function<bool()>;
  using Problem = std::function<void(const std::string&)>;

  // This process, as segment names stamp it (see Note [Reclaiming the emulation's shared memory]).
  static const std::string& process_stamp();
  // Opens (creating when first) the segment of communicator `key`, whose unique id the process
  // stamped `creator` made. Empty on success, else why not. The first call in a process first
  // removes the segments of processes that are gone.
  static std::string open(const std::string& creator, const std::string& key, int nranks, int rank,
                          std::unique_ptr<SharedRendezvous>* out);
  ~SharedRendezvous();
  SharedRendezvous(const SharedRendezvous&) = delete;
  SharedRendezvous& operator=(const SharedRendezvous&) = delete;

  // Registers this rank and waits for every other; false when stopped.
  bool join(const Stop& stop);
  // This rank's data area for post `seq`, of at least `bytes`, once no peer reads post seq-1.
  unsigned char* reserve(std::uint32_t seq, std::size_t bytes, const Stop& stop, const Problem& problem);
  void post(std::uint32_t seq, std::size_t bytes);
  bool wait_posted(std::uint32_t seq, const Stop& stop, const Problem& problem);
  // Rank `rank`'s current post (valid until this rank marks it consumed).
  const unsigned char* peer_post(int rank, std::size_t* bytes);
  void consumed(std::uint32_t seq);
  // Finalize: waits until every rank has consumed this rank's last post, marks this rank
  // finalized and waits for every rank to be; false when stopped.
  bool finalize(std::uint32_t last_seq, const Stop& stop, const Problem& problem);
  void mark_aborted();
  // The ranks that have not reached `seq` (posted, or finalized when seq is 0), for messages.
  std::string missing(std::uint32_t seq) const;

 private:
  struct Slot;
  struct Header;
  struct Mapping {
    std::uint32_t generation = 0;
    unsigned char* data = nullptr;
    std::size_t size = 0;
  };

  SharedRendezvous() = default;
  bool wait(const std::function<bool()>& done, const Stop& stop, const Problem& problem,
            const std::function<std::string()>& what);
  void wake();
  std::string peer_gone(int r) const;  // why rank r is gone (aborted, exited); empty while it is not
  std::string check_peers();          // the first peer gone
  void let_peers_read_last_post();  // before this rank's data segments are unlinked
  std::string data_name(int rank, std::uint32_t generation) const;

  std::string key_;
  std::string header_name_;
  int nranks_ = 0, rank_ = 0;
  Header* header_ = nullptr;
  std::size_t header_bytes_ = 0;
  std::vector<Mapping> mappings_;  // per rank; this rank's own is writable
  std::vector<std::uint32_t> own_generations_;  // to unlink at the end
};

}  // namespace hvd::emu
