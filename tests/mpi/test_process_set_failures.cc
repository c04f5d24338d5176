// A failed negotiation stays inside its process set: at np=4 with the sets {0, 1}, {2, 3} and
// {1, 2} given at init, a mismatch (shape, dtype, reduce op) in one set fails every member of
// that set with a message naming the tensor, the ranks and the values, while the other sets run
// collectives in the same cycles and see no error and no wait; a tensor that only some members
// of a set have submitted waits (it is not an error) without holding up the other sets; and
// after each case a global allreduce returns the closed-form sum on every rank. Own main():
// hvd::init() with the sets.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <horovodcpp/horovod.h>

#include "expected_failure.h"
#include "process_set_forms.h"
#include "test_support.h"

namespace {

using hvd::DataType;
using hvd::HostTensor;
using hvd::ProcessSet;
using hvd::ReduceOp;
using hvd::test::filled;
using hvd::test::read_as_double;
using hvd::test::ramp;
using hvd::test::member_sum;
using hvd::test::is_member;
using hvd::test::failure_of;
using Clock = std::chrono::steady_clock;

ProcessSet g_low({0, 1}), g_high({2, 3}), g_middle({1, 2});

// How long one small allreduce of a bystander set may take while another set fails. A cycle is
// a millisecond; this only tells "a cycle or a few, on a loaded 2-core machine" from a wait on
// the failing set (the stall inspector's 60 s, or for good).
constexpr double kBystanderSeconds = 5.0;

int me() { return hvd::rank(); }


double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }



hvd::AllreduceOptions sum_in(const ProcessSet& set, const std::string& name) {
  hvd::AllreduceOptions o;
  o.op = ReduceOp::Sum;
  o.name = name;
  o.process_set = set;
  return o;
}


// `steps` Sum allreduces in `set` (ranks `members`), one at a time, each checked against the
// closed form and each within kBystanderSeconds. No error may reach them.
void run_bystander_steps(const ProcessSet& set, const std::vector<int>& members, const std::string& name, int steps) {
  for (int s = 0; s < steps; ++s) {
    auto t = ramp(DataType::Float32, {16}, s);
    const auto start = Clock::now();
    INFO("bystander step " << s << " of '" << name << "' on rank " << me());
    REQUIRE_NOTHROW(hvd::allreduce_async(t, t, sum_in(set, name)).wait());  // the same name: cached after the first
    CHECK(seconds_since(start) < kBystanderSeconds);
    for (int i = 0; i < 16; ++i) REQUIRE(read_as_double(*t, i) == Approx(member_sum(members, i, s)));
  }
}

// The job stays usable: a global allreduce gives the closed form on every rank.
void check_global_allreduce_works(const std::string& name) {
  auto t = ramp(DataType::Float64, {7});
  const auto start = Clock::now();
  REQUIRE_NOTHROW(hvd::allreduce_async(t, t, sum_in(hvd::global_process_set(), name)).wait());
  CHECK(seconds_since(start) < kBystanderSeconds);
  for (int i = 0; i < 7; ++i) REQUIRE(read_as_double(*t, i) == Approx(member_sum({0, 1, 2, 3}, i)));
}

enum class Mismatch { Shape, Dtype, Op };

// Rank `first` of a pair submits one thing, the other rank another; returns the handle and
// checks, on wait, the message the pair must see.
struct MismatchCase {
  Mismatch kind;
  const char* label;
  std::string lower_says, upper_says;  // "rank L has ...", "rank U has ..."
};

hvd::Handle submit_mismatch(Mismatch kind, bool lower, const ProcessSet& set, const std::string& name,
                            std::shared_ptr<HostTensor>* keep) {
  hvd::AllreduceOptions o = sum_in(set, name);
  switch (kind) {
    case Mismatch::Shape: *keep = ramp(DataType::Float32, {lower ? 4 : 5}); break;
    case Mismatch::Dtype: *keep = ramp(lower ? DataType::Float32 : DataType::Int32, {4}); break;
    case Mismatch::Op:
      *keep = ramp(DataType::Float32, {4});
      o.op = lower ? ReduceOp::Sum : ReduceOp::Max;
      break;
  }
  return hvd::allreduce_async(*keep, *keep, o);
}

std::vector<MismatchCase> mismatch_cases() {
  return {{Mismatch::Shape, "shapes", "has [4]", "has [5]"},
          {Mismatch::Dtype, "data types", "has float32", "has int32"},
          {Mismatch::Op, "reduce ops", "has Sum", "has Max"}};
}

// The message a member of `label` (ranks lower, upper) sees for `name`.
void check_mismatch_message(const std::string& m, const MismatchCase& c, const std::string& name, int lower, int upper,
                            const std::string& label) {
  INFO(m);
  CHECK_THAT(m, Catch::Contains(std::string("Mismatched ") + c.label + " for tensor '" + name + "'"));
  CHECK_THAT(m, Catch::Contains("rank " + std::to_string(lower) + " " + c.lower_says));
  CHECK_THAT(m, Catch::Contains("rank " + std::to_string(upper) + " " + c.upper_says));
  if (!label.empty()) CHECK_THAT(m, Catch::Contains(label));
}

}  // namespace

TEST_CASE("a mismatch in {0, 1} fails only there while {2, 3} runs collectives", "[failures]") {
  REQUIRE(hvd::size() == 4);
  for (const MismatchCase& c : mismatch_cases()) {
    const std::string name = std::string("low.bad.") + c.label;
    INFO(name);
    if (is_member({0, 1})) {
      std::shared_ptr<HostTensor> t;
      hvd::Handle h = submit_mismatch(c.kind, me() == 0, g_low, name, &t);
      check_mismatch_message(failure_of(h), c, name, 0, 1, "process set 1 (ranks [0, 1])");
      // The set itself still works, under the same name too.
      run_bystander_steps(g_low, {0, 1}, name, 2);
    } else {
      run_bystander_steps(g_high, {2, 3}, "high.busy", 20);
    }
    check_global_allreduce_works("low.bad.after." + std::string(c.label));
  }
}

TEST_CASE("other collectives' mismatches and a refused submission in {0, 1} fail only there", "[failures]") {
  // While {2, 3} reduces: allgather shapes beyond the first dimension, broadcast roots (global
  // ranks), grouped allreduce sizes, and alltoall splits that rank 1 refuses before submitting
  // (it withdraws the name, so rank 0 fails with its reason instead of waiting).
  if (is_member({2, 3})) {
    run_bystander_steps(g_high, {2, 3}, "others.high.busy", 20);
    check_global_allreduce_works("others.after");
    return;
  }
  const bool lower = me() == 0;
  const std::string where = "process set 1 (ranks [0, 1])";
  {
    hvd::AllgatherOptions o;
    o.name = "others.allgather";
    o.process_set = g_low;
    auto t = ramp(DataType::Float32, {2, lower ? 3 : 4});
    const std::string m = failure_of(hvd::allgather_async(t, hvd::host_allocator(), o));
    INFO(m);
    CHECK_THAT(m, Catch::Contains("Mismatched shapes (all but the first dimension must agree) for tensor "
                                  "'others.allgather'") &&
                      Catch::Contains("rank 0 has [2, 3], rank 1 has [2, 4]") && Catch::Contains(where));
  }
  {
    hvd::BroadcastOptions o;
    o.root = lower ? 0 : 1;
    o.name = "others.broadcast";
    o.process_set = g_low;
    auto t = ramp(DataType::Float32, {3});
    const std::string m = failure_of(hvd::broadcast_async(t, t, o));
    INFO(m);
    CHECK_THAT(m, Catch::Contains("Mismatched broadcast roots for tensor 'others.broadcast'") &&
                      Catch::Contains("rank 0 has root 0, rank 1 has root 1") && Catch::Contains(where));
  }
  {
    std::vector<hvd::TensorPtr> ins;
    for (int k = 0; k < (lower ? 2 : 3); ++k) ins.push_back(ramp(DataType::Float32, {2}));
    const std::string m = failure_of(hvd::grouped_allreduce_async(ins, ins, sum_in(g_low, "others.grouped")));
    INFO(m);
    CHECK_THAT(m, Catch::Contains("Mismatched group sizes for grouped ALLREDUCE 'others.grouped'") &&
                      Catch::Contains("rank 0 submitted 2 tensors, rank 1 submitted 3") && Catch::Contains(where));
  }
  {
    auto t = ramp(DataType::Float32, {4});
    hvd::AlltoallOptions o;
    o.splits = lower ? std::vector<std::int64_t>{2, 2} : std::vector<std::int64_t>{2, 3};
    o.name = "others.alltoall";
    o.process_set = g_low;
    if (lower) {
      const std::string m = failure_of(hvd::alltoall_async(t, hvd::host_allocator(), o));
      INFO(m);
      CHECK_THAT(m, Catch::Contains("ALLTOALL of 'others.alltoall' cannot run: rank 1 did not submit it") &&
                        Catch::Contains("splits sum to 5"));
    } else {
      CHECK_THROWS_WITH(hvd::alltoall_async(t, hvd::host_allocator(), o), Catch::Contains("splits sum to 5"));
    }
  }
  run_bystander_steps(g_low, {0, 1}, "others.low.after", 2);
  check_global_allreduce_works("others.after");
}

TEST_CASE("a mismatch in {1, 2} fails only there while {0, 1} and {2, 3} run collectives", "[failures]") {
  // Every rank is busy in some set, and the failing set shares a rank with each of the others.
  for (const MismatchCase& c : mismatch_cases()) {
    const std::string name = std::string("middle.bad.") + c.label;
    INFO(name);
    std::shared_ptr<HostTensor> t;
    hvd::Handle bad;
    if (is_member({1, 2})) bad = submit_mismatch(c.kind, me() == 1, g_middle, name, &t);
    if (is_member({0, 1}))
      run_bystander_steps(g_low, {0, 1}, "middle.low.busy", 10);
    else
      run_bystander_steps(g_high, {2, 3}, "middle.high.busy", 10);
    if (bad.valid()) check_mismatch_message(failure_of(bad), c, name, 1, 2, "process set 3 (ranks [1, 2])");
    check_global_allreduce_works("middle.bad.after." + std::string(c.label));
  }
}

TEST_CASE("a mismatch after the name was cached in the set fails only there", "[failures]") {
  // The response cache answers "cache.x" in {0, 1} twice; then rank 1 changes its shape, which
  // invalidates the entry, and the coordinator of {0, 1} must fail it on both ranks.
  if (is_member({0, 1})) {
    run_bystander_steps(g_low, {0, 1}, "cache.x", 2);
    auto t = ramp(DataType::Float32, {me() == 0 ? 16 : 8});
    const std::string m = failure_of(hvd::allreduce_async(t, t, sum_in(g_low, "cache.x")));
    INFO(m);
    CHECK_THAT(m, Catch::Contains("Mismatched shapes for tensor 'cache.x'") && Catch::Contains("rank 0 has [16]") &&
                      Catch::Contains("rank 1 has [8]") && Catch::Contains("process set 1 (ranks [0, 1])"));
    run_bystander_steps(g_low, {0, 1}, "cache.x", 2);
  } else {
    run_bystander_steps(g_high, {2, 3}, "cache.high.busy", 20);
  }
  check_global_allreduce_works("cache.after");
}

TEST_CASE("a mismatch in the global set fails every rank while sets have work pending", "[failures]") {
  // {2, 3}: rank 2 submits before the failing global tensor, rank 3 only after it failed, so
  // the set's tensor is pending across the failure. {0, 1}: both submit with it, in one cycle.
  std::shared_ptr<HostTensor> pending = ramp(DataType::Float32, {8});
  hvd::Handle pending_handle;
  if (me() == 2) pending_handle = hvd::allreduce_async(pending, pending, sum_in(g_high, "global.bad.pending"));
  auto bad = ramp(DataType::Float32, {me() == 3 ? 6 : 3});
  hvd::Handle bad_handle = hvd::allreduce_async(bad, bad, sum_in(hvd::global_process_set(), "global.bad"));
  if (is_member({0, 1})) pending_handle = hvd::allreduce_async(pending, pending, sum_in(g_low, "global.bad.pending"));
  const std::string m = failure_of(bad_handle);
  INFO(m);
  CHECK_THAT(m, Catch::Contains("Mismatched shapes for tensor 'global.bad'") && Catch::Contains("rank 0 has [3]") &&
                    Catch::Contains("rank 3 has [6]"));
  CHECK_THAT(m, !Catch::Contains("process set"));
  if (me() == 3) pending_handle = hvd::allreduce_async(pending, pending, sum_in(g_high, "global.bad.pending"));
  REQUIRE_NOTHROW(pending_handle.wait());
  const std::vector<int> members = is_member({0, 1}) ? std::vector<int>{0, 1} : std::vector<int>{2, 3};
  for (int i = 0; i < 8; ++i) REQUIRE(read_as_double(*pending, i) == Approx(member_sum(members, i)));
  check_global_allreduce_works("global.bad.after");
}

TEST_CASE("a tensor only one member of a set submitted waits without holding up the others", "[failures]") {
  // Rank 0 submits "partial.x" in {0, 1}; rank 1 does not yet. That is a wait (Horovod warns of
  // a stall later), not an error, and the global set and {2, 3} keep working meanwhile.
  auto x = ramp(DataType::Float32, {6});
  hvd::Handle waiting;
  if (me() == 0) waiting = hvd::allreduce_async(x, x, sum_in(g_low, "partial.x"));
  for (int step = 0; step < 5; ++step) check_global_allreduce_works("partial.global." + std::to_string(step));
  if (is_member({2, 3})) run_bystander_steps(g_high, {2, 3}, "partial.high.busy", 10);
  if (is_member({1, 2})) run_bystander_steps(g_middle, {1, 2}, "partial.middle.busy", 3);
  check_global_allreduce_works("partial.global.last");  // rank 0 still has not got its answer
  if (me() == 0) CHECK_FALSE(waiting.poll());
  if (me() == 1) waiting = hvd::allreduce_async(x, x, sum_in(g_low, "partial.x"));
  if (is_member({0, 1})) {
    REQUIRE_NOTHROW(waiting.wait());
    for (int i = 0; i < 6; ++i) REQUIRE(read_as_double(*x, i) == Approx(member_sum({0, 1}, i)));
  }
  check_global_allreduce_works("partial.after");
}

TEST_CASE("a mismatch whose second member arrives late fails only when it arrives", "[failures]") {
  // Rank 0 submits "late.bad" in {0, 1} with [4]; the other sets work; only then does rank 1
  // submit it with [5]. Both fail then, and nobody else sees anything.
  std::shared_ptr<HostTensor> t;
  hvd::Handle bad;
  if (me() == 0) bad = submit_mismatch(Mismatch::Shape, true, g_low, "late.bad", &t);
  check_global_allreduce_works("late.global");
  if (is_member({2, 3})) run_bystander_steps(g_high, {2, 3}, "late.high.busy", 10);
  check_global_allreduce_works("late.global.again");
  if (me() == 0) CHECK_FALSE(bad.poll());
  if (me() == 1) bad = submit_mismatch(Mismatch::Shape, false, g_low, "late.bad", &t);
  if (is_member({0, 1})) check_mismatch_message(failure_of(bad), mismatch_cases()[0], "late.bad", 0, 1, "process set 1 (ranks [0, 1])");
  check_global_allreduce_works("late.after");
}

int main(int argc, char** argv) {
  hvd::init({g_low, g_high, g_middle});
  std::fprintf(stderr, "rank %d of %d starting process set failure tests\n", hvd::rank(), hvd::size());
  Catch::Session session;
  const int failed = session.run(argc, argv);
  hvd::shutdown();
  return failed == 0 ? 0 : 1;
}
