// The emulated NCCL's communicator state and operations (test-only; see
// Note [What the emulated CUDA and NCCL model]). nccl_api.cc turns calls into Primitives and
// enqueues one operation per (communicator, stream) of a group; run_operation executes it on the
// stream's worker thread against the other ranks' posts.
#pragma once

#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/gpu/emulation/shared_rendezvous.h"

namespace hvd::emu {

enum class Kind : std::uint8_t { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, Send, Recv };
const char* kind_name(Kind kind);

struct Primitive {
  Kind kind = Kind::AllReduce;
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int peer = 0;  // root, or the peer of Send/Recv
  std::size_t count = 0;  // per rank: AllGather's sendcount, ReduceScatter's recvcount
  const void* send = nullptr;
  void* recv = nullptr;
};
std::size_t type_size(ncclDataType_t type);  // 0: not emulated
const char* type_name(ncclDataType_t type);
// Bytes this rank contributes to the others (what it posts).
std::size_t posted_bytes(const Primitive& p, int rank, int nranks);

// Shared by the handle and every operation enqueued on it, so a stream can still run (and skip)
// an operation after its communicator was aborted and freed.
struct CommState {
  int rank = 0, nranks = 0, device = 0;
  bool blocking = true;
  std::string key;      // from the unique id
  std::string creator;  // the stamp of the process that made the unique id
  std::unique_ptr<SharedRendezvous> link;
  std::atomic<int> state{ncclSuccess};  // what ncclCommGetAsyncError reports
  std::atomic<bool> aborted{false};
  std::mutex mutex;
  std::condition_variable cv;
  std::uint64_t enqueued = 0, completed = 0;  // operations, under mutex
  std::uint32_t next_seq = 0;                 // enqueue order (the caller's thread)
  bool launched = false;                      // a nonblocking communicator defers its first launch
  bool finalized = false;
  std::thread helper;                         // a nonblocking init or finalize

  bool stopped() const { return aborted.load(); }
  // The first asynchronous error wins; ncclGetLastError says `message` either way.
  void fail(ncclResult_t result, const std::string& message);
  // Blocks the calling stream thread until the communicator is aborted (a hung kernel).
  void hang();
  void operation_done();
  bool wait_operations_done();  // false when aborted first
};

void set_last_error(const std::string& message);
std::string last_error();

// Runs operation `seq` (the primitives one group put on this communicator and stream).
void run_operation(const std::shared_ptr<CommState>& comm, std::uint32_t seq, const std::vector<Primitive>& prims);

}  // namespace hvd::emu
