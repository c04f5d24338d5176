// One fault on one rank only, for every kind of NCCL operation (emulated only:
// tests/gpu/emulation/emulation_control.h). Each case is its own job, since a fault may abort the
// communicators or stop the job; fault_sweep.sh runs them all (`--list` prints the cases).
//   HVD_TEST_SWEEP_CASE=NAME mpiexec -np NP test_nccl_fault_sweep_emulated
// runs one: a warm-up of the operation, then the fault armed on one rank, the operation, and the
// same operation again (for a process set's, the world's; or an alltoall). Every rank checks, without assuming
// which path ran:
//   - each operation ends within kBound on every rank (no hang; a rank that hangs says where);
//   - an operation that failed names its tensor; one that succeeded has the closed form's result;
//   - Expect::Every: the operation fails on every rank of its group (a failure its peers must
//     see: before the last collective, an asynchronous NCCL error, a plan that stops the job);
//   - Expect::Own: only the faulting rank's fails (after the last collective), and the next
//     operation is right on every rank: the job is still usable by design;
//   - Expect::Either: a rank may succeed while others fail, if its result is right (a node step
//     after the host step of hierarchical allreduce or device Adasum: docs/gpu.md "Failures").
// A rank prints "SWEEP rank R: ok" when all held, else "SWEEP rank R: FAIL: why".
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "emulation_control.h"
#include "tests/common/rank_markers.h"
#include "tests/gpu/gpu_test_util.h"

using namespace hvd;
using hvd::test::DeviceTensor;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kBound = std::chrono::seconds(20);

enum class Op {
  Allreduce, Fused, Allgather, AllgatherUneven, Broadcast, Alltoall, Reducescatter, Hierarchical, Adasum,
  AdasumWhole, Set
};
enum class Fault { Launch, Copy, Call, Async, Alloc };
enum class Expect { Every, Own, Either };

struct Case {
  const char* name;
  Op op;
  Fault fault;
  int nth;
  bool last;  // the fault on the last rank, else on rank 0
  int np;
  Expect expect;
  bool next_alltoall = false;  // the next operation an alltoall, else the case's own
};

// Kernel launches (Fault::Launch) each op makes, in order (the emulation counts the runtime's own
// kernels; copies and memsets are not launches): allreduce prescale, postscale; fused and
// hierarchical copy in, copy out; reducescatter (padded) copy in, postscale; Adasum copy in, copy
// out. Device-to-device copies (Fault::Copy): the padded reducescatter's copy of this rank's rows
// out of the fusion buffer, before the postscale. NCCL calls (Fault::Call): one per collective,
// one per send, receive or broadcast of a group. NCCL operations (Fault::Async): one per
// collective or group.
const Case kCases[] = {
    {"allreduce:launch:1", Op::Allreduce, Fault::Launch, 1, false, 2, Expect::Every},
    {"allreduce:launch:2", Op::Allreduce, Fault::Launch, 2, true, 2, Expect::Own},
    {"allreduce:call:1", Op::Allreduce, Fault::Call, 1, true, 2, Expect::Every},
    {"allreduce:async:1", Op::Allreduce, Fault::Async, 1, false, 4, Expect::Every},
    {"allreduce:call:1@np4", Op::Allreduce, Fault::Call, 1, false, 4, Expect::Every},
    {"fused:launch:1", Op::Fused, Fault::Launch, 1, true, 4, Expect::Every},
    {"fused:launch:2", Op::Fused, Fault::Launch, 2, false, 4, Expect::Own},
    {"fused:call:1", Op::Fused, Fault::Call, 1, false, 2, Expect::Every},
    {"fused:async:1", Op::Fused, Fault::Async, 1, true, 2, Expect::Every},
    {"allgather:call:1", Op::Allgather, Fault::Call, 1, true, 2, Expect::Every},
    {"allgather:async:1", Op::Allgather, Fault::Async, 1, false, 2, Expect::Every},
    {"allgather:alloc:1", Op::Allgather, Fault::Alloc, 1, true, 2, Expect::Every},
    {"allgather-uneven:call:1", Op::AllgatherUneven, Fault::Call, 1, false, 4, Expect::Every},
    {"allgather-uneven:call:3", Op::AllgatherUneven, Fault::Call, 3, true, 4, Expect::Every},
    {"allgather-uneven:async:1", Op::AllgatherUneven, Fault::Async, 1, true, 4, Expect::Every},
    {"allgather-uneven:call:4", Op::AllgatherUneven, Fault::Call, 4, false, 4, Expect::Every},
    {"broadcast:call:1", Op::Broadcast, Fault::Call, 1, false, 2, Expect::Every},
    {"broadcast:call:1@last", Op::Broadcast, Fault::Call, 1, true, 2, Expect::Every},
    {"broadcast:async:1", Op::Broadcast, Fault::Async, 1, true, 2, Expect::Every},
    {"broadcast:async:1@root", Op::Broadcast, Fault::Async, 1, false, 4, Expect::Every},
    {"alltoall:call:1", Op::Alltoall, Fault::Call, 1, false, 4, Expect::Every},
    {"alltoall:call:3", Op::Alltoall, Fault::Call, 3, true, 4, Expect::Every},
    {"alltoall:async:1", Op::Alltoall, Fault::Async, 1, true, 4, Expect::Every},
    {"alltoall:call:4", Op::Alltoall, Fault::Call, 4, false, 4, Expect::Every},
    {"alltoall:call:1@np2", Op::Alltoall, Fault::Call, 1, true, 2, Expect::Every},
    {"alltoall:alloc:1", Op::Alltoall, Fault::Alloc, 1, false, 4, Expect::Every},
    {"reducescatter:launch:1", Op::Reducescatter, Fault::Launch, 1, true, 2, Expect::Every},
    {"reducescatter:launch:2", Op::Reducescatter, Fault::Launch, 2, false, 2, Expect::Own},
    // The copy out comes before the next entry's collective, so the communicators are aborted; the
    // peers have their rows by then and may complete first.
    {"reducescatter:copy:1", Op::Reducescatter, Fault::Copy, 1, false, 2, Expect::Either},
    {"reducescatter:copy:1@np4", Op::Reducescatter, Fault::Copy, 1, true, 4, Expect::Either},
    {"reducescatter:call:1", Op::Reducescatter, Fault::Call, 1, false, 2, Expect::Every},
    {"reducescatter:async:1", Op::Reducescatter, Fault::Async, 1, true, 2, Expect::Every},
    {"reducescatter:alloc:1", Op::Reducescatter, Fault::Alloc, 1, true, 2, Expect::Every},
    {"hierarchical:launch:1", Op::Hierarchical, Fault::Launch, 1, true, 4, Expect::Every},
    {"hierarchical:launch:2", Op::Hierarchical, Fault::Launch, 2, false, 4, Expect::Own},
    {"hierarchical:call:1", Op::Hierarchical, Fault::Call, 1, false, 4, Expect::Every},
    {"hierarchical:call:2", Op::Hierarchical, Fault::Call, 2, true, 4, Expect::Either},
    // After one node failed, the other's next alltoall exchanges splits with it on the host.
    {"hierarchical:call:2>alltoall", Op::Hierarchical, Fault::Call, 2, true, 4, Expect::Either, true},
    {"hierarchical:async:1", Op::Hierarchical, Fault::Async, 1, true, 4, Expect::Every},
    {"hierarchical:async:2", Op::Hierarchical, Fault::Async, 2, false, 4, Expect::Either},
    {"adasum:launch:1", Op::Adasum, Fault::Launch, 1, false, 4, Expect::Every},
    {"adasum:launch:2", Op::Adasum, Fault::Launch, 2, true, 4, Expect::Own},
    {"adasum:call:1", Op::Adasum, Fault::Call, 1, true, 4, Expect::Every},
    {"adasum:call:2", Op::Adasum, Fault::Call, 2, false, 4, Expect::Either},
    {"adasum:async:1", Op::Adasum, Fault::Async, 1, false, 4, Expect::Every},
    {"adasum:async:2", Op::Adasum, Fault::Async, 2, true, 4, Expect::Either},
    // 2 nodes x 3 ranks: local rank 0 takes the whole vector across the nodes, then ncclBroadcast
    // (NCCL call and operation 2) hands it to the node.
    {"adasum-whole:launch:1", Op::AdasumWhole, Fault::Launch, 1, true, 6, Expect::Every},
    {"adasum-whole:launch:2", Op::AdasumWhole, Fault::Launch, 2, false, 6, Expect::Own},
    {"adasum-whole:call:2", Op::AdasumWhole, Fault::Call, 2, true, 6, Expect::Either},
    {"adasum-whole:async:1", Op::AdasumWhole, Fault::Async, 1, false, 6, Expect::Every},
    {"set:launch:1", Op::Set, Fault::Launch, 1, true, 4, Expect::Every},
    {"set:launch:2", Op::Set, Fault::Launch, 2, true, 4, Expect::Own},
    {"set:call:1", Op::Set, Fault::Call, 1, true, 4, Expect::Every},
    {"set:async:1", Op::Set, Fault::Async, 1, true, 4, Expect::Every},
};

const char* kind_env(Op op) {
  switch (op) {
    case Op::Hierarchical: return "HVD_TEST_FAKE_LOCAL_SIZE=2 HOROVOD_HIERARCHICAL_ALLREDUCE=1";
    case Op::Adasum: return "HVD_TEST_FAKE_LOCAL_SIZE=2";
    case Op::AdasumWhole: return "HVD_TEST_FAKE_LOCAL_SIZE=3";
    case Op::Set: return "HOROVOD_DYNAMIC_PROCESS_SETS=1";
    default: return "";
  }
}

std::string g_failure;  // this rank's first failed check

void check(bool ok, const std::string& what) {
  if (!ok && g_failure.empty()) g_failure = what;
}

double pattern(std::int64_t i) { return static_cast<double>(i % 7 + 1); }

test::DeviceTensorPtr device_tensor(TensorShape shape, const std::function<double(std::int64_t)>& value) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<double> values(n);
  for (std::int64_t i = 0; i < n; ++i) values[i] = value(i);
  auto t = DeviceTensor::allocate(DataType::Float32, shape);
  t->upload(values);
  return t;
}

std::vector<double> download(const TensorPtr& t) { return static_cast<DeviceTensor&>(*t).download(); }

// The global ranks of the process set the Set case reduces in: 1 and the last.
std::vector<int> set_ranks() { return {1, size() - 1}; }
bool in_set() { return rank() == 1 || rank() == size() - 1; }

// One run of the case's operation: its handle and how to check a success.
struct Run {
  Handle handle;
  std::string name;
  std::function<std::string()> verify;  // empty when right, else what differs
};

std::string compare(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  if (got.size() != want.size())
    return what + ": " + std::to_string(got.size()) + " elements, not " + std::to_string(want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      std::ostringstream s;
      s << what << ": element " << i << " is " << got[i] << ", not " << want[i];
      return s.str();
    }
  }
  return {};
}

OutputAllocator g_allocator;  // the device allocator, or one that throws when the case says

// Rank r's value at i: (r + 1) * pattern(i); the sum over `members` ranks.
double summed_factor(const std::vector<int>& members) {
  double f = 0;
  for (int r : members) f += r + 1;
  return f;
}
std::vector<int> world_ranks() {
  std::vector<int> all;
  for (int r = 0; r < size(); ++r) all.push_back(r);
  return all;
}

Run start(Op op, const std::string& name, const ProcessSet& set) {
  const int me = rank(), n = size();
  const double mine = me + 1;
  switch (op) {
    case Op::Allreduce: {  // prescale 2, postscale 1/4: the sum halved
      auto t = device_tensor({40}, [&](std::int64_t i) { return mine * pattern(i); });
      AllreduceOptions o{ReduceOp::Sum, name, 2.0, 0.25};
      return {allreduce_async(t, t, o), name, [t] {
                std::vector<double> want(40);
                for (int i = 0; i < 40; ++i) want[i] = summed_factor(world_ranks()) * pattern(i) / 2;
                return compare(download(t), want, "allreduce");
              }};
    }
    case Op::Fused:
    case Op::Hierarchical:
    case Op::Set: {
      const bool world = op != Op::Set || set.id() == 0;
      std::vector<TensorPtr> ts = {device_tensor({10}, [&](std::int64_t i) { return mine * pattern(i); }),
                                   device_tensor({21}, [&](std::int64_t i) { return mine * pattern(i); })};
      AllreduceOptions o{ReduceOp::Sum, name};
      o.process_set = set;
      const double factor = summed_factor(world ? world_ranks() : set_ranks());
      return {grouped_allreduce_async(ts, ts, o), name, [ts, factor] {
                for (const auto& t : ts) {
                  std::vector<double> want(t->num_elements());
                  for (std::size_t i = 0; i < want.size(); ++i) want[i] = factor * pattern(i);
                  if (auto d = compare(download(t), want, "fused allreduce"); !d.empty()) return d;
                }
                return std::string();
              }};
    }
    case Op::Allgather:
    case Op::AllgatherUneven: {  // rank r: 3 rows of 2 (uneven: r + 1 rows), (r + 1) * pattern
      const auto rows = [op](int r) { return op == Op::Allgather ? 3 : r + 1; };
      auto in = device_tensor({rows(me), 2}, [&](std::int64_t i) { return mine * pattern(i); });
      Handle h = allgather_async(in, g_allocator, {name});
      return {h, name, [h, rows, n] {
                std::vector<double> want;
                for (int r = 0; r < n; ++r)
                  for (int i = 0; i < rows(r) * 2; ++i) want.push_back((r + 1) * pattern(i));
                return compare(download(h.outputs().at(0)), want, "allgather");
              }};
    }
    case Op::Broadcast: {
      auto t = device_tensor({24}, [&](std::int64_t i) { return mine * pattern(i); });
      return {broadcast_async(t, t, {0, name}), name, [t] {
                std::vector<double> want(24);
                for (int i = 0; i < 24; ++i) want[i] = pattern(i);
                return compare(download(t), want, "broadcast");
              }};
    }
    case Op::Alltoall: {  // rank r sends (r + p) % 3 rows of 2 to rank p, valued 1000 r + 100 p + j
      const auto rows = [](int from, int to) { return (from + to) % 3; };
      std::vector<std::int64_t> splits;
      std::vector<double> values;
      for (int p = 0; p < n; ++p) {
        splits.push_back(rows(me, p));
        for (int j = 0; j < rows(me, p) * 2; ++j) values.push_back(1000 * me + 100 * p + j);
      }
      auto in = DeviceTensor::allocate(DataType::Float32, {static_cast<std::int64_t>(values.size() / 2), 2});
      in->upload(values);
      AlltoallOptions o{splits, name};
      Handle h = alltoall_async(in, g_allocator, o);
      return {h, name, [h, rows, me, n] {
                std::vector<double> want;
                for (int r = 0; r < n; ++r)
                  for (int j = 0; j < rows(r, me) * 2; ++j) want.push_back(1000 * r + 100 * me + j);
                return compare(download(h.outputs().at(0)), want, "alltoall");
              }};
    }
    case Op::Reducescatter: {  // 2n + 1 rows of 2 (rank 0 keeps 3, the others 2), postscale 1/2
      const std::int64_t rows = 2 * n + 1;
      auto in = device_tensor({rows, 2}, [&](std::int64_t i) { return mine * pattern(i); });
      ReducescatterOptions o{ReduceOp::Sum, name, 1.0, 0.5};
      Handle h = reducescatter_async(in, g_allocator, o);
      return {h, name, [h, me, n] {
                const std::int64_t first = me == 0 ? 0 : 3 + 2 * (me - 1), count = me == 0 ? 3 : 2;
                std::vector<double> want;
                for (std::int64_t i = first * 2; i < (first + count) * 2; ++i)
                  want.push_back(summed_factor(world_ranks()) * pattern(i) / 2);
                return compare(download(h.outputs().at(0)), want, "reducescatter");
              }};
    }
    case Op::Adasum:
    case Op::AdasumWhole: {
      // Node k's ranks are nonzero only where i % 2 == k: the two nodes' averages are
      // orthogonal, so their Adasum is their sum, exactly: (local_size + 1) / 2 * pattern everywhere.
      const int node = me / local_size(), local = me % local_size();
      const double mean = (local_size() + 1) / 2.0;
      auto t = device_tensor({48}, [&](std::int64_t i) { return i % 2 == node ? (local + 1) * pattern(i) : 0.0; });
      return {allreduce_async(t, t, {ReduceOp::Adasum, name}), name, [t, mean] {
                std::vector<double> want(48);
                for (int i = 0; i < 48; ++i) want[i] = mean * pattern(i);
                return compare(download(t), want, "Adasum");
              }};
    }
  }
  return {};
}

// Waits at most kBound; a rank that would hang says so and leaves, so the job ends.
bool finished(const Run& run) {
  const auto until = Clock::now() + kBound;
  while (!run.handle.poll()) {
    if (Clock::now() > until) {
      std::printf("SWEEP rank %d: FAIL: %s did not end within %lld s (hang)\n", rank(), run.name.c_str(),
                  static_cast<long long>(kBound.count()));
      std::fflush(stdout);
      _exit(3);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Waits for `run`: "" on a right success, "error" on a failure that names the tensor; any other
// outcome is recorded as a failed check.
std::string outcome(const Run& run) {
  finished(run);
  try {
    run.handle.wait();
  } catch (const Error& e) {
    const std::string message = e.what();
    check(message.find(run.name) != std::string::npos, run.name + " failed without naming it: " + message);
    std::printf("rank %d: %s failed: %s\n", rank(), run.name.c_str(), message.c_str());
    return "error";
  }
  const std::string wrong = run.verify();
  check(wrong.empty(), run.name + " succeeded with a wrong result (" + wrong + ")");
  return {};
}

// Starts and waits for one run of `op`, as outcome(). After a job stopped (a plan that failed on
// some rank) the submission itself is refused, naming `culprit`, the operation that stopped it.
std::string attempt(Op op, const std::string& name, const ProcessSet& set, const std::string& culprit) {
  Run run;
  try {
    run = start(op, name, set);
  } catch (const Error& e) {
    const std::string message = e.what();
    check(message.find("stopped") != std::string::npos && message.find(culprit) != std::string::npos,
          name + " was refused without saying the job stopped and why: " + message);
    std::printf("rank %d: %s refused: %s\n", rank(), name.c_str(), message.c_str());
    return "error";
  }
  return outcome(run);
}

void arm(const Case& c) {
  switch (c.fault) {
    case Fault::Launch: emu::fail_kernel_launch(c.nth, cudaErrorLaunchOutOfResources); break;
    case Fault::Copy: emu::fail_device_copy(c.nth, cudaErrorInvalidValue); break;
    case Fault::Call: emu::fail_nccl_call(c.nth, ncclSystemError); break;
    case Fault::Async: emu::inject_async_error(c.nth, ncclSystemError); break;
    case Fault::Alloc: {
      auto left = std::make_shared<int>(c.nth);
      g_allocator = [left](DataType dtype, const TensorShape& shape) -> TensorPtr {
        if (--*left == 0) throw Error("no device memory for the output (injected by the sweep)");
        return DeviceTensor::allocate(dtype, shape);
      };
      break;
    }
  }
}

void run_case(const Case& c) {
  const int faulting = c.last ? size() - 1 : 0;
  const bool member = c.op != Op::Set || in_set();
  ProcessSet set{};
  if (c.op == Op::Set) set = add_process_set(set_ranks());
  g_allocator = test::device_allocator();
  if (member) check(attempt(c.op, "sweep.warmup", set, "").empty(), "the warm-up failed");
  if (rank() == faulting) arm(c);
  const std::string name = std::string("sweep.") + c.name;
  std::string got;
  if (member) {
    got = attempt(c.op, name, set, name);
    if (rank() == faulting) check(got == "error", "the faulting rank's " + name + " succeeded");
    const std::string others = "rank " + std::to_string(faulting);
    if (c.expect == Expect::Every) check(got == "error", name + " succeeded here while " + others + "'s failed");
    if (c.expect == Expect::Own && rank() != faulting)
      check(got.empty(), name + " failed here, not only on the faulting " + others);
  }
  g_allocator = test::device_allocator();
  // The next operation (for a process set's, the world's): on every rank, right or failing
  // saying which; right everywhere when the job is usable by design.
  const std::string after = attempt(c.next_alltoall ? Op::Alltoall : c.op, name + ".next", ProcessSet{}, name);
  if (c.expect == Expect::Own) check(after.empty(), "the operation after " + name + " failed");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--list") == 0) {  // NAME NP [VAR=VALUE...]
    for (const Case& c : kCases) std::printf("%s %d %s\n", c.name, c.np, kind_env(c.op));
    return 0;
  }
  const char* wanted = std::getenv("HVD_TEST_SWEEP_CASE");
  const Case* chosen = nullptr;
  for (const Case& c : kCases)
    if (wanted != nullptr && std::strcmp(wanted, c.name) == 0) chosen = &c;
  if (chosen == nullptr) {
    std::fprintf(stderr, "HVD_TEST_SWEEP_CASE='%s' names no case (--list)\n", wanted ? wanted : "");
    return 2;
  }
  init();
  test::check_cuda(cudaSetDevice(local_rank() % test::cuda_device_count()), "cudaSetDevice");
  const int me = rank(), ranks = size();
  if (ranks != chosen->np) {
    std::printf("SWEEP rank %d: FAIL: %s runs at np=%d, not %d\n", me, chosen->name, chosen->np, ranks);
    return 1;
  }
  try {
    run_case(*chosen);
  } catch (const std::exception& e) {
    check(false, std::string("unexpected exception: ") + e.what());
  }
  if (g_failure.empty()) {
    std::printf("SWEEP rank %d: ok\n", me);
  } else {
    std::printf("SWEEP rank %d: FAIL: %s\n", me, g_failure.c_str());
  }
  std::fflush(stdout);
  shutdown();
  // After a stopped job the stopping rank cannot finalize MPI (see stopped_job.sh).
  if (const char* dir = std::getenv("HVD_TEST_DIR"))
    test::mark_and_wait_for_ranks(std::string(dir) + "/left.", me, ranks, std::chrono::seconds(10));
  return g_failure.empty() ? 0 : 1;
}
