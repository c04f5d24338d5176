// The emulated NCCL API (test-only): the subset horovodcpp's NCCL backend calls, with nccl.h's
// signatures. Arguments are checked as NCCL checks them (device pointers of the communicator's
// device, streams of that device); groups collect calls until ncclGroupEnd and enqueue one
// operation per (communicator, stream). Nonblocking communicators return ncclInProgress from
// their init, their finalize and their first launch (NCCL connects lazily), and refuse other
// calls until ncclCommGetAsyncError says ncclSuccess. See Note [What the emulated CUDA and NCCL model].
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <thread>

#include "tests/gpu/emulation/device_memory.h"
#include "tests/gpu/emulation/emulation.h"
#include "tests/gpu/emulation/emulation_control.h"
#include "tests/gpu/emulation/nccl_emulation.h"
#include "tests/gpu/emulation/streams.h"

using hvd::emu::CommState;
using hvd::emu::Kind;
using hvd::emu::Primitive;

struct ncclComm {
  std::shared_ptr<CommState> state;
};

namespace {

// An id: the magic, 16 random bytes (the communicator's key), then the creating process's stamp
// (see Note [Reclaiming the emulation's shared memory]) up to a NUL.
constexpr char kMagic[8] = {'H', 'V', 'D', 'E', 'M', 'U', '0', '2'};
constexpr int kKeyEnd = 24;

std::mutex g_comms_mutex;
std::set<ncclComm*> g_comms;

bool registered(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(g_comms_mutex);
  return g_comms.count(comm) == 1;
}

struct Pending {
  std::shared_ptr<CommState> comm;
  std::shared_ptr<hvd::emu::Stream> stream;
  Primitive prim;
};

thread_local int t_group_depth = 0;
thread_local std::vector<Pending> t_group;
thread_local ncclResult_t t_group_error = ncclSuccess;

ncclResult_t fail_call(ncclResult_t result, const std::string& message) {
  hvd::emu::set_last_error(message);
  if (t_group_depth > 0 && t_group_error == ncclSuccess) t_group_error = result;
  return result;
}

std::string hex(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

ncclResult_t usable(ncclComm_t comm, const char* call) {
  if (!registered(comm)) return fail_call(ncclInvalidArgument, std::string(call) + ": comm " + hex(comm) + " is not a live communicator");
  CommState& s = *comm->state;
  if (s.stopped()) return fail_call(ncclInvalidUsage, std::string(call) + ": the communicator was aborted");
  if (s.finalized) return fail_call(ncclInvalidUsage, std::string(call) + ": the communicator was finalized");
  const int state = s.state.load();
  if (state == ncclInProgress)
    return fail_call(ncclInvalidUsage, std::string(call) +
                                           ": the nonblocking communicator is still in progress (wait until "
                                           "ncclCommGetAsyncError reports ncclSuccess)");
  if (state != ncclSuccess)
    return fail_call(static_cast<ncclResult_t>(state), std::string(call) + ": the communicator has failed: " + hvd::emu::last_error());
  return ncclSuccess;
}

// As NCCL's pointer check: device memory of the communicator's device.
ncclResult_t check_buffer(const void* ptr, std::size_t bytes, int device, const char* call, const char* which) {
  if (bytes == 0) return ncclSuccess;
  const auto info = hvd::emu::DeviceMemory::get().describe(ptr);
  std::string why;
  if (!info.known || info.kind != hvd::emu::MemoryKind::Device)
    why = "is host memory, not device memory";
  else if (info.device != device)
    why = "was allocated on device " + std::to_string(info.device) + ", which mismatches NCCL device " + std::to_string(device);
  else if (!info.live)
    why = "was freed";
  if (why.empty()) return ncclSuccess;
  return fail_call(ncclInvalidArgument, std::string(call) + ": " + which + " " + hex(ptr) + " " + why);
}

ncclResult_t launch(const std::shared_ptr<CommState>& comm, const std::shared_ptr<hvd::emu::Stream>& stream,
                    std::vector<Primitive> prims) {
  const std::uint32_t seq = ++comm->next_seq;
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    ++comm->enqueued;
  }
  auto op = [comm, seq, prims = std::move(prims)] { hvd::emu::run_operation(comm, seq, prims); };
  if (!comm->blocking && !comm->launched) {
    // The first launch of a nonblocking communicator connects in the background and reaches the
    // stream later: the caller must wait for ncclSuccess before relying on stream order.
    comm->launched = true;
    comm->state.store(ncclInProgress);
    std::thread([comm, stream, op = std::move(op)]() mutable {
      hvd::emu::name_this_thread("emu-nccl-launch");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      hvd::emu::enqueue_on(*stream, std::move(op));
      int expected = ncclInProgress;
      comm->state.compare_exchange_strong(expected, ncclSuccess);
    }).detach();
    return ncclInProgress;
  }
  comm->launched = true;
  hvd::emu::enqueue_on(*stream, std::move(op));
  return ncclSuccess;
}

ncclResult_t enqueue(ncclComm_t comm, cudaStream_t stream_handle, const Primitive& p, const char* call) {
  if (const ncclResult_t fault = hvd::emu::take_nccl_call_fault(); fault != ncclSuccess)
    return fail_call(fault, std::string(call) + ": emulated failure injected by the test (emulation_control.h)");
  if (const ncclResult_t r = usable(comm, call); r != ncclSuccess) return r;
  const CommState& s = *comm->state;
  if (hvd::emu::type_size(p.type) == 0)
    return fail_call(ncclInvalidArgument, std::string(call) + ": datatype " + std::to_string(p.type) + " is not emulated");
  if ((p.kind == Kind::AllReduce || p.kind == Kind::Reduce || p.kind == Kind::ReduceScatter) &&
      (p.op < ncclSum || p.op > ncclAvg))
    return fail_call(ncclInvalidArgument, std::string(call) + ": reduction op " + std::to_string(p.op) + " is not emulated");
  if ((p.kind == Kind::Broadcast || p.kind == Kind::Reduce || p.kind == Kind::Send || p.kind == Kind::Recv) &&
      (p.peer < 0 || p.peer >= s.nranks))
    return fail_call(ncclInvalidArgument, std::string(call) + ": root/peer " + std::to_string(p.peer) + " is not a rank of " +
                                              std::to_string(s.nranks));
  auto stream = hvd::emu::resolve_stream(stream_handle);
  if (!stream) return fail_call(ncclInvalidArgument, std::string(call) + ": invalid stream " + hex(stream_handle));
  if (stream->device() != s.device)
    return fail_call(ncclInvalidArgument, std::string(call) + ": the stream belongs to device " + std::to_string(stream->device()) +
                                              " but the communicator to device " + std::to_string(s.device));
  const std::size_t bytes = p.count * hvd::emu::type_size(p.type), all = bytes * static_cast<std::size_t>(s.nranks);
  const bool root = s.rank == p.peer;
  const std::size_t send_bytes = p.kind == Kind::ReduceScatter ? all
                                 : p.kind == Kind::Recv || (p.kind == Kind::Broadcast && !root) ? 0
                                                                                                 : bytes;
  const std::size_t recv_bytes = p.kind == Kind::AllGather ? all
                                 : p.kind == Kind::Send || (p.kind == Kind::Reduce && !root) ? 0
                                                                                             : bytes;
  if (const ncclResult_t r = check_buffer(p.send, send_bytes, s.device, call, "sendbuff"); r != ncclSuccess) return r;
  if (const ncclResult_t r = check_buffer(p.recv, recv_bytes, s.device, call, "recvbuff"); r != ncclSuccess) return r;
  if (t_group_depth > 0) {
    t_group.push_back(Pending{comm->state, stream, p});
    return ncclSuccess;
  }
  return launch(comm->state, stream, {p});
}

Primitive primitive(Kind kind, const void* send, void* recv, std::size_t count, ncclDataType_t type, ncclRedOp_t op,
                    int peer) {
  Primitive p;
  p.kind = kind;
  p.send = send;
  p.recv = recv;
  p.count = count;
  p.type = type;
  p.op = op;
  p.peer = peer;
  return p;
}

std::string key_of(const ncclUniqueId& id) {
  static const char digits[] = "0123456789abcdef";
  std::string key;
  for (int i = sizeof kMagic; i < kKeyEnd; ++i) {
    const auto b = static_cast<unsigned char>(id.internal[i]);
    key += digits[b >> 4];
    key += digits[b & 15];
  }
  return key;
}

std::string creator_of(const ncclUniqueId& id) {
  const char* begin = id.internal + kKeyEnd;
  return std::string(begin, strnlen(begin, sizeof id.internal - kKeyEnd));
}

ncclResult_t finalize_now(const std::shared_ptr<CommState>& s) {
  if (!s->wait_operations_done()) return ncclInvalidUsage;
  if (hvd::emu::finalize_stalls()) {
    s->hang();
    return ncclInvalidUsage;
  }
  const hvd::emu::SharedRendezvous::Stop stop = [s] { return s->stopped(); };
  const hvd::emu::SharedRendezvous::Problem problem = [s](const std::string& why) { s->fail(ncclRemoteError, why); };
  return s->link->finalize(s->next_seq, stop, problem) ? ncclSuccess : ncclInvalidUsage;
}

ncclResult_t init(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank, bool blocking) {
  if (out == nullptr) return fail_call(ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return fail_call(ncclInvalidArgument, "ncclCommInitRank: rank " + std::to_string(rank) + " of " + std::to_string(nranks) + " is out of range");
  if (std::memcmp(id.internal, kMagic, sizeof kMagic) != 0)
    return fail_call(ncclInvalidArgument, "ncclCommInitRank: the unique id did not come from ncclGetUniqueId");
  if (hvd::emu::config().devices == 0) return fail_call(ncclUnhandledCudaError, "ncclCommInitRank: no CUDA device");
  auto state = std::make_shared<CommState>();
  state->rank = rank;
  state->nranks = nranks;
  state->device = hvd::emu::current_device();
  state->blocking = blocking;
  state->key = key_of(id);
  state->creator = creator_of(id);
  const bool stall = hvd::emu::take_init_stall();
  auto join = [state, stall]() -> ncclResult_t {
    if (stall) {  // this rank never arrives
      state->hang();
      return ncclInvalidUsage;
    }
    std::unique_ptr<hvd::emu::SharedRendezvous> link;
    const std::string error = hvd::emu::SharedRendezvous::open(state->creator, state->key, state->nranks, state->rank, &link);
    if (!error.empty()) {
      hvd::emu::set_last_error("ncclCommInitRank: " + error);
      return ncclInvalidUsage;
    }
    hvd::emu::SharedRendezvous* raw = link.get();
    {
      std::lock_guard<std::mutex> lock(state->mutex);
      state->link = std::move(link);
    }
    return raw->join([state] { return state->stopped(); }) ? ncclSuccess : ncclInvalidUsage;
  };
  auto* comm = new ncclComm{state};
  if (blocking) {
    const ncclResult_t r = join();
    if (r != ncclSuccess) {
      delete comm;
      return r;
    }
  } else {
    state->state.store(ncclInProgress);
    state->helper = std::thread([state, join] {
      hvd::emu::name_this_thread("emu-nccl-init");
      const ncclResult_t r = join();
      if (r != ncclSuccess) {
        if (!state->stopped()) state->fail(r, hvd::emu::last_error());
        return;
      }
      int expected = ncclInProgress;
      state->state.compare_exchange_strong(expected, ncclSuccess);
    });
  }
  {
    std::lock_guard<std::mutex> lock(g_comms_mutex);
    g_comms.insert(comm);
  }
  *out = comm;
  return blocking ? ncclSuccess : ncclInProgress;
}

void release(ncclComm_t comm) {
  {
    std::lock_guard<std::mutex> lock(g_comms_mutex);
    g_comms.erase(comm);
  }
  if (comm->state->helper.joinable()) comm->state->helper.join();
  delete comm;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t) {
  thread_local std::string copy;
  copy = hvd::emu::last_error();
  return copy.c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return ncclInvalidArgument;
  std::memset(id, 0, sizeof *id);
  std::memcpy(id->internal, kMagic, sizeof kMagic);
  std::random_device device;
  std::seed_seq seed{static_cast<unsigned>(device()), static_cast<unsigned>(device()), static_cast<unsigned>(getpid()),
                     static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count())};
  std::mt19937 generator(seed);
  for (int i = sizeof kMagic; i < kKeyEnd; ++i) id->internal[i] = static_cast<char>(generator() & 0xff);
  const std::string& creator = hvd::emu::SharedRendezvous::process_stamp();
  std::memcpy(id->internal + kKeyEnd, creator.data(), std::min(creator.size(), sizeof id->internal - kKeyEnd - 1));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  const bool blocking = config == nullptr || config->blocking == NCCL_CONFIG_UNDEF_INT || config->blocking != 0;
  return init(comm, nranks, id, rank, blocking);
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return init(comm, nranks, id, rank, true);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* result) {
  if (result == nullptr || !registered(comm)) return ncclInvalidArgument;
  *result = static_cast<ncclResult_t>(comm->state->state.load());
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (count == nullptr || !registered(comm)) return ncclInvalidArgument;
  *count = comm->state->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (device == nullptr || !registered(comm)) return ncclInvalidArgument;
  *device = comm->state->device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (rank == nullptr || !registered(comm)) return ncclInvalidArgument;
  *rank = comm->state->rank;
  return ncclSuccess;
}

// Flushes this rank's operations and waits until every rank has finalized: blocks (blocking
// communicators) or runs in the background while the state says ncclInProgress.
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (!registered(comm)) return fail_call(ncclInvalidArgument, "ncclCommFinalize: not a live communicator");
  std::shared_ptr<CommState> s = comm->state;
  if (s->finalized) return fail_call(ncclInvalidUsage, "ncclCommFinalize: already finalized");
  if (s->state.load() == ncclInProgress) return fail_call(ncclInvalidUsage, "ncclCommFinalize: the communicator is in progress");
  if (s->helper.joinable()) s->helper.join();  // the init helper, done
  s->finalized = true;
  if (s->blocking) return finalize_now(s);
  s->state.store(ncclInProgress);
  s->helper = std::thread([s] {
    hvd::emu::name_this_thread("emu-nccl-final");
    if (finalize_now(s) != ncclSuccess) return;
    int expected = ncclInProgress;
    s->state.compare_exchange_strong(expected, ncclSuccess);
  });
  return ncclInProgress;
}

// Frees local resources; finalizes first (blocking) when the caller did not.
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (!registered(comm)) return fail_call(ncclInvalidArgument, "ncclCommDestroy: not a live communicator");
  std::shared_ptr<CommState> s = comm->state;
  if (!s->finalized) {
    if (s->helper.joinable()) s->helper.join();
    s->finalized = true;
    finalize_now(s);
  }
  release(comm);  // joins a finalize still running: blocks as NCCL does
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (!registered(comm)) return fail_call(ncclInvalidArgument, "ncclCommAbort: not a live communicator");
  std::shared_ptr<CommState> s = comm->state;
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    s->aborted = true;
    if (s->link) s->link->mark_aborted();
  }
  s->cv.notify_all();
  release(comm);  // operations still queued on streams hold the state and skip themselves
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  if (t_group_depth++ == 0) t_group_error = ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (t_group_depth <= 0) return fail_call(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--t_group_depth > 0) return ncclSuccess;
  std::vector<Pending> group;
  group.swap(t_group);
  if (t_group_error != ncclSuccess) return t_group_error;  // nothing of a failed group is launched
  ncclResult_t result = ncclSuccess;
  std::vector<bool> taken(group.size(), false);
  for (std::size_t i = 0; i < group.size(); ++i) {
    if (taken[i]) continue;
    std::vector<Primitive> prims;
    for (std::size_t j = i; j < group.size(); ++j) {
      if (taken[j] || group[j].comm != group[i].comm || group[j].stream != group[i].stream) continue;
      taken[j] = true;
      prims.push_back(group[j].prim);
    }
    if (launch(group[i].comm, group[i].stream, std::move(prims)) == ncclInProgress) result = ncclInProgress;
  }
  return result;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return enqueue(comm, stream, primitive(Kind::AllReduce, sendbuff, recvbuff, count, type, op, 0), "ncclAllReduce");
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  return enqueue(comm, stream, primitive(Kind::Reduce, sendbuff, recvbuff, count, type, op, root), "ncclReduce");
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return enqueue(comm, stream, primitive(Kind::Broadcast, sendbuff, recvbuff, count, type, ncclSum, root), "ncclBroadcast");
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t type, int root, ncclComm_t comm, cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, type, root, comm, stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  return enqueue(comm, stream, primitive(Kind::AllGather, sendbuff, recvbuff, sendcount, type, ncclSum, 0), "ncclAllGather");
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  return enqueue(comm, stream, primitive(Kind::ReduceScatter, sendbuff, recvbuff, recvcount, type, op, 0),
                 "ncclReduceScatter");
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
  return enqueue(comm, stream, primitive(Kind::Send, sendbuff, nullptr, count, type, ncclSum, peer), "ncclSend");
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
  return enqueue(comm, stream, primitive(Kind::Recv, nullptr, recvbuff, count, type, ncclSum, peer), "ncclRecv");
}

}  // extern "C"
