// Where the processes of one emulated NCCL communicator meet (test-only): a shared-memory
// segment per communicator (/dev/shm/hvdemu-<key>) with one slot of counters per rank, and one
// growable data segment per rank holding what that rank posts for the current operation.
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

class SharedRendezvous {
 public:
  using Stop = std::function<bool()>;
  using Problem = std::function<void(const std::string&)>;

  // Opens (creating when first) the segment of communicator `key`. Empty on success, else why not.
  static std::string open(const std::string& key, int nranks, int rank, std::unique_ptr<SharedRendezvous>* out);
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
  std::string check_peers();
  std::string data_name(int rank, std::uint32_t generation) const;

  std::string key_;
  int nranks_ = 0, rank_ = 0;
  Header* header_ = nullptr;
  std::size_t header_bytes_ = 0;
  std::vector<Mapping> mappings_;  // per rank; this rank's own is writable
  std::vector<std::uint32_t> own_generations_;  // to unlink at the end
};

}  // namespace hvd::emu
