// Executing emulated NCCL operations on the stream's thread: post this rank's contribution,
// wait for every rank's, check that all enqueued the same collectives (a mismatch hangs, as on a
// GPU, after saying what differed), and compute this rank's outputs.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>
#include <type_traits>

#include "tests/gpu/emulation/device_memory.h"
#include "tests/gpu/emulation/emulation_control.h"
#include "tests/gpu/emulation/half_elements.h"
#include "tests/gpu/emulation/nccl_emulation.h"

namespace hvd::emu {

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::AllReduce: return "ncclAllReduce";
    case Kind::Broadcast: return "ncclBroadcast";
    case Kind::Reduce: return "ncclReduce";
    case Kind::AllGather: return "ncclAllGather";
    case Kind::ReduceScatter: return "ncclReduceScatter";
    case Kind::Send: return "ncclSend";
    case Kind::Recv: return "ncclRecv";
  }
  return "?";
}

std::size_t type_size(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

const char* type_name(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: return "int8";
    case ncclUint8: return "uint8";
    case ncclInt32: return "int32";
    case ncclUint32: return "uint32";
    case ncclInt64: return "int64";
    case ncclUint64: return "uint64";
    case ncclFloat16: return "float16";
    case ncclBfloat16: return "bfloat16";
    case ncclFloat32: return "float32";
    case ncclFloat64: return "float64";
    default: return "unsupported";
  }
}

std::size_t posted_bytes(const Primitive& p, int rank, int nranks) {
  const std::size_t esize = type_size(p.type);
  switch (p.kind) {
    case Kind::AllReduce: case Kind::Reduce: case Kind::AllGather: case Kind::Send: return p.count * esize;
    case Kind::Broadcast: return rank == p.peer ? p.count * esize : 0;
    case Kind::ReduceScatter: return p.count * esize * static_cast<std::size_t>(nranks);
    case Kind::Recv: return 0;
  }
  return 0;
}

namespace {

std::mutex g_last_error_mutex;
std::string g_last_error;

// What each rank posts: a header, one record per primitive, then the payloads.
struct WireHeader {
  std::uint32_t seq;
  std::uint32_t count;
};
struct WirePrimitive {
  std::uint8_t kind, op;
  std::int32_t type, peer;
  std::uint64_t count, offset, bytes;
};

struct Post {
  const WireHeader* header = nullptr;
  const WirePrimitive* prims = nullptr;
  const unsigned char* base = nullptr;
  const unsigned char* payload(const WirePrimitive& p) const { return base + p.offset; }
};

std::string describe(const WirePrimitive& p) {
  std::string text = std::string(kind_name(static_cast<Kind>(p.kind))) + " of " + std::to_string(p.count) + " " +
                     type_name(static_cast<ncclDataType_t>(p.type));
  const auto kind = static_cast<Kind>(p.kind);
  if (kind == Kind::AllReduce || kind == Kind::Reduce || kind == Kind::ReduceScatter) text += " op " + std::to_string(p.op);
  if (kind == Kind::Broadcast || kind == Kind::Reduce) text += " root " + std::to_string(p.peer);
  if (kind == Kind::Send || kind == Kind::Recv) text += " peer " + std::to_string(p.peer);
  return text;
}

bool is_collective(const WirePrimitive& p) {
  const auto kind = static_cast<Kind>(p.kind);
  return kind != Kind::Send && kind != Kind::Recv;
}

std::vector<const WirePrimitive*> collectives(const Post& post) {
  std::vector<const WirePrimitive*> out;
  for (std::uint32_t i = 0; i < post.header->count; ++i)
    if (is_collective(post.prims[i])) out.push_back(&post.prims[i]);
  return out;
}

std::vector<const WirePrimitive*> p2p(const Post& post, Kind kind, int peer) {
  std::vector<const WirePrimitive*> out;
  for (std::uint32_t i = 0; i < post.header->count; ++i)
    if (static_cast<Kind>(post.prims[i].kind) == kind && post.prims[i].peer == peer) out.push_back(&post.prims[i]);
  return out;
}

// Empty when every rank enqueued matching work, else what differs.
std::string mismatch(const std::vector<Post>& posts, int me) {
  const auto mine = collectives(posts[static_cast<std::size_t>(me)]);
  for (std::size_t r = 0; r < posts.size(); ++r) {
    const auto theirs = collectives(posts[r]);
    if (theirs.size() != mine.size())
      return "rank " + std::to_string(me) + " enqueued " + std::to_string(mine.size()) + " collective(s), rank " +
             std::to_string(r) + " " + std::to_string(theirs.size());
    for (std::size_t k = 0; k < mine.size(); ++k) {
      const auto& a = *mine[k];
      const auto& b = *theirs[k];
      if (a.kind != b.kind || a.type != b.type || a.count != b.count || a.peer != b.peer ||
          ((a.kind == static_cast<std::uint8_t>(Kind::AllReduce) || a.kind == static_cast<std::uint8_t>(Kind::ReduceScatter) ||
            a.kind == static_cast<std::uint8_t>(Kind::Reduce)) && a.op != b.op))
        return "rank " + std::to_string(me) + " enqueued " + describe(a) + ", rank " + std::to_string(r) + " " + describe(b);
    }
  }
  for (std::size_t r = 0; r < posts.size(); ++r) {
    const int peer = static_cast<int>(r);
    const auto recvs = p2p(posts[static_cast<std::size_t>(me)], Kind::Recv, peer);
    const auto sends = p2p(posts[r], Kind::Send, me);
    const auto my_sends = p2p(posts[static_cast<std::size_t>(me)], Kind::Send, peer);
    const auto their_recvs = p2p(posts[r], Kind::Recv, me);
    if (recvs.size() != sends.size() || my_sends.size() != their_recvs.size())
      return "rank " + std::to_string(me) + " and rank " + std::to_string(r) + " enqueued unmatched ncclSend/ncclRecv (" +
             std::to_string(recvs.size()) + " recv(s) here from " + std::to_string(sends.size()) + " send(s) there, " +
             std::to_string(my_sends.size()) + " send(s) here to " + std::to_string(their_recvs.size()) + " recv(s) there)";
    for (std::size_t j = 0; j < recvs.size(); ++j)
      if (recvs[j]->count * type_size(static_cast<ncclDataType_t>(recvs[j]->type)) != sends[j]->bytes)
        return "ncclRecv " + std::to_string(j) + " on rank " + std::to_string(me) + " from rank " + std::to_string(r) +
               " expects " + describe(*recvs[j]) + " but the send is " + describe(*sends[j]);
  }
  return {};
}

// --- reductions -------------------------------------------------------------------------------

template <class A>
A combine(A a, A b, ncclRedOp_t op) {
  if constexpr (std::is_integral<A>::value) {
    using U = std::make_unsigned_t<A>;  // wraps around, as the GPU's integer arithmetic does
    switch (op) {
      case ncclSum: case ncclAvg: return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
      case ncclProd: return static_cast<A>(static_cast<U>(a) * static_cast<U>(b));
      case ncclMax: return a > b ? a : b;
      case ncclMin: return a < b ? a : b;
      default: return a;
    }
  } else {
    switch (op) {
      case ncclSum: case ncclAvg: return a + b;
      case ncclProd: return a * b;
      case ncclMax: return a > b ? a : b;
      case ncclMin: return a < b ? a : b;
      default: return a;
    }
  }
}

// out[i] = op over ranks of in[r][i], in rank order, rounding to T after every step.
template <class T>
void reduce_typed(const std::vector<const unsigned char*>& in, std::size_t count, ncclRedOp_t op, unsigned char* out) {
  using A = typename Arithmetic<T>::type;
  for (std::size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, in[0] + i * sizeof(T), sizeof(T));
    for (std::size_t r = 1; r < in.size(); ++r) {
      T w;
      std::memcpy(&w, in[r] + i * sizeof(T), sizeof(T));
      v = narrow<T>(combine<A>(widen(v), widen(w), op));
    }
    if (op == ncclAvg) v = narrow<T>(static_cast<A>(widen(v) / static_cast<A>(in.size())));
    std::memcpy(out + i * sizeof(T), &v, sizeof(T));
  }
}

void reduce(ncclDataType_t type, const std::vector<const unsigned char*>& in, std::size_t count, ncclRedOp_t op,
            unsigned char* out) {
  switch (type) {
    case ncclInt8: return reduce_typed<std::int8_t>(in, count, op, out);
    case ncclUint8: return reduce_typed<std::uint8_t>(in, count, op, out);
    case ncclInt32: return reduce_typed<std::int32_t>(in, count, op, out);
    case ncclUint32: return reduce_typed<std::uint32_t>(in, count, op, out);
    case ncclInt64: return reduce_typed<std::int64_t>(in, count, op, out);
    case ncclUint64: return reduce_typed<std::uint64_t>(in, count, op, out);
    case ncclFloat16: return reduce_typed<Half>(in, count, op, out);
    case ncclBfloat16: return reduce_typed<BFloat16>(in, count, op, out);
    case ncclFloat32: return reduce_typed<float>(in, count, op, out);
    case ncclFloat64: return reduce_typed<double>(in, count, op, out);
    default: return;
  }
}

// This rank's outputs from every rank's posts.
void compute(const std::vector<Post>& posts, int me, int device, const std::vector<Primitive>& prims) {
  DeviceMemory& memory = DeviceMemory::get();
  const Post& own = posts[static_cast<std::size_t>(me)];
  std::size_t k = 0;  // this rank's collective number
  std::vector<std::size_t> recvs_seen(posts.size(), 0);
  for (std::uint32_t i = 0; i < own.header->count; ++i) {
    const Primitive& p = prims[i];
    const WirePrimitive& w = own.prims[i];
    const std::size_t esize = type_size(p.type), bytes = p.count * esize;
    const std::string what = std::string(kind_name(p.kind)) + " (recvbuff)";
    if (p.kind == Kind::Recv) {
      const auto sends = p2p(posts[static_cast<std::size_t>(p.peer)], Kind::Send, me);
      const WirePrimitive& s = *sends[recvs_seen[static_cast<std::size_t>(p.peer)]++];
      if (bytes > 0) std::memcpy(memory.access(p.recv, bytes, device, what), posts[static_cast<std::size_t>(p.peer)].payload(s), bytes);
      continue;
    }
    if (!is_collective(w)) continue;
    std::vector<const unsigned char*> in;
    for (const Post& post : posts) in.push_back(post.payload(*collectives(post)[k]));
    ++k;
    switch (p.kind) {
      case Kind::AllReduce:
        if (bytes > 0) reduce(p.type, in, p.count, p.op, memory.access(p.recv, bytes, device, what));
        break;
      case Kind::Reduce:
        if (bytes > 0 && me == p.peer) reduce(p.type, in, p.count, p.op, memory.access(p.recv, bytes, device, what));
        break;
      case Kind::Broadcast:
        if (bytes > 0) std::memcpy(memory.access(p.recv, bytes, device, what), in[static_cast<std::size_t>(p.peer)], bytes);
        break;
      case Kind::AllGather:
        if (bytes > 0) {
          unsigned char* out = memory.access(p.recv, bytes * posts.size(), device, what);
          for (std::size_t r = 0; r < posts.size(); ++r) std::memcpy(out + r * bytes, in[r], bytes);
        }
        break;
      case Kind::ReduceScatter:
        if (bytes > 0) {
          for (auto& ptr : in) ptr += static_cast<std::size_t>(me) * bytes;
          reduce(p.type, in, p.count, p.op, memory.access(p.recv, bytes, device, what));
        }
        break;
      default: break;
    }
  }
}

}  // namespace

void set_last_error(const std::string& message) {
  std::lock_guard<std::mutex> lock(g_last_error_mutex);
  g_last_error = message;
}

std::string last_error() {
  std::lock_guard<std::mutex> lock(g_last_error_mutex);
  return g_last_error;
}

void CommState::fail(ncclResult_t result, const std::string& message) {
  int expected = ncclSuccess;
  state.compare_exchange_strong(expected, result);
  if (expected == ncclInProgress) state.compare_exchange_strong(expected, result);
  set_last_error(message);
}

void CommState::hang() {
  std::unique_lock<std::mutex> lock(mutex);
  cv.wait(lock, [this] { return aborted.load(); });
}

void CommState::operation_done() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    ++completed;
  }
  cv.notify_all();
}

bool CommState::wait_operations_done() {
  std::unique_lock<std::mutex> lock(mutex);
  cv.wait(lock, [this] { return aborted.load() || completed >= enqueued; });
  return !aborted.load();
}

void run_operation(const std::shared_ptr<CommState>& comm, std::uint32_t seq, const std::vector<Primitive>& prims) {
  struct Done {
    CommState& comm;
    ~Done() { comm.operation_done(); }
  } done{*comm};
  if (comm->stopped()) return;  // aborted: the kernel never runs
  if (const ncclResult_t fault = take_async_fault(); fault != ncclSuccess) {
    comm->fail(fault, "emulated asynchronous NCCL error injected by the test (emulation_control.h)");
    comm->hang();
    return;
  }
  const SharedRendezvous::Stop stop = [&comm] { return comm->stopped(); };
  const SharedRendezvous::Problem problem = [&comm](const std::string& why) { comm->fail(ncclRemoteError, why); };
  DeviceMemory& memory = DeviceMemory::get();

  std::size_t total = sizeof(WireHeader) + prims.size() * sizeof(WirePrimitive);
  std::vector<std::size_t> offsets;
  for (const auto& p : prims) {
    offsets.push_back(total);
    total += posted_bytes(p, comm->rank, comm->nranks);
  }
  unsigned char* area = comm->link->reserve(seq, total, stop, problem);
  if (area == nullptr) return;
  auto* header = reinterpret_cast<WireHeader*>(area);
  header->seq = seq;
  header->count = static_cast<std::uint32_t>(prims.size());
  auto* wire = reinterpret_cast<WirePrimitive*>(area + sizeof(WireHeader));
  for (std::size_t i = 0; i < prims.size(); ++i) {
    const Primitive& p = prims[i];
    const std::size_t bytes = posted_bytes(p, comm->rank, comm->nranks);
    wire[i] = WirePrimitive{static_cast<std::uint8_t>(p.kind), static_cast<std::uint8_t>(p.op),
                            static_cast<std::int32_t>(p.type), p.peer, p.count, offsets[i], bytes};
    if (bytes > 0)
      std::memcpy(area + offsets[i], memory.access(p.send, bytes, comm->device, std::string(kind_name(p.kind)) + " (sendbuff)"),
                  bytes);
  }
  comm->link->post(seq, total);
  if (!comm->link->wait_posted(seq, stop, problem)) return;
  if (const int hold = take_read_hold(); hold > 0) std::this_thread::sleep_for(std::chrono::milliseconds(hold));

  std::vector<Post> posts(static_cast<std::size_t>(comm->nranks));
  for (int r = 0; r < comm->nranks; ++r) {
    std::size_t bytes = 0;
    const unsigned char* base = comm->link->peer_post(r, &bytes);
    posts[static_cast<std::size_t>(r)] = Post{reinterpret_cast<const WireHeader*>(base),
                                               reinterpret_cast<const WirePrimitive*>(base + sizeof(WireHeader)), base};
  }
  const std::string differs = mismatch(posts, comm->rank);
  if (!differs.empty()) {
    std::fprintf(stderr,
                 "EMULATED NCCL: operation %u of communicator %s: %s; the ranks hang here as they would on a GPU\n",
                 seq, comm->key.substr(0, 8).c_str(), differs.c_str());
    comm->hang();
    return;
  }
  compute(posts, comm->rank, comm->device, prims);
  comm->link->consumed(seq);
}

}  // namespace hvd::emu
