// The recorder's phase rules inside an op: QUEUE opens only directly in an op and closes when
// its response starts (queue_end) or when the first activity starts, whichever comes first;
// switch_activity (what a GPU stream callback runs) moves from one activity to the next.
#include <catch2/catch.hpp>

#include "timeline/timeline.h"
#include "timeline/trace_check.h"
#include "timeline_test_util.h"

using hvd::Timeline;
using namespace hvd::timeline;
using namespace hvd::timeline::test;
using Seq = std::vector<std::string>;

namespace {

TraceFile record(const std::string& stem, void (*body)(Timeline&)) {
  const std::string path = temp_path(stem);
  Timeline t;
  t.start(path, 0, false);
  body(t);
  t.stop();
  TraceFile trace = read_trace_file(path);
  const CheckResult check = check_trace(trace);
  INFO(check.message);
  REQUIRE(check.ok);
  CHECK(check.warnings.empty());  // stop closed everything; nothing was dropped
  ::unlink(path.c_str());
  return trace;
}

}  // namespace

TEST_CASE("QUEUE: the ops of a cycle open together and each waits until its response runs") {
  const TraceFile trace = record("queue_cycle", [](Timeline& t) {
    for (const char* n : {"first", "second"}) {  // the cycle's response list is known
      t.start_op(n, "ALLREDUCE", {});
      t.queue_start(n);
    }
    t.queue_end("first");  // the first response runs
    t.activity_start("first", "MPI_ALLREDUCE");
    t.end_op("first", {{"bytes", "8"}});
    t.queue_end("second");  // then the second: its QUEUE spans the first one's run
    t.activity_start("second", "MPI_ALLREDUCE");
    t.end_op("second", {});
  });
  const Seq expected = {"B ALLREDUCE",     "B QUEUE",        "E QUEUE",
                        "B MPI_ALLREDUCE", "E MPI_ALLREDUCE", "E ALLREDUCE"};
  CHECK(tensor_sequence(trace, "first") == expected);
  CHECK(tensor_sequence(trace, "second") == expected);
  CHECK(span_arg(trace, row_pid(trace, "first"), "ALLREDUCE", "bytes") == "8");  // on the E
  // The second tensor's QUEUE closes after the first op ended.
  double first_end = -1, second_queue_end = -1;
  int depth = 0;
  for (const auto& e : nested_events(trace.events)) {
    if (string_field(e, "ph") == "E" && e.find("pid")->as_number() == row_pid(trace, "first")) {
      first_end = e.find("ts")->as_number();
    }
    if (e.find("pid")->as_number() != row_pid(trace, "second")) continue;
    const std::string ph = string_field(e, "ph");
    if (ph == "B") ++depth;
    if (ph == "E" && depth-- == 2 && second_queue_end < 0) second_queue_end = e.find("ts")->as_number();
  }
  CHECK(second_queue_end >= first_end);
}

TEST_CASE("QUEUE: closed by the first activity, by end_op, and never opened outside an op") {
  const TraceFile trace = record("queue_rules", [](Timeline& t) {
    t.start_op("a", "ALLREDUCE", {});
    t.queue_start("a");
    t.activity_start("a", "NCCL_ALLREDUCE");  // handed to the GPU stream: the wait is over
    t.queue_end("a");                         // nothing open to close: no-op
    t.end_op("a", {});
    t.start_op("b", "BARRIER", {});
    t.queue_start("b");
    t.end_op("b", {{"error", "boom"}});  // closes QUEUE, then the op
    t.queue_start("c");                  // no op open on c: nothing
    t.negotiate_start("d", "ALLREDUCE");
    t.queue_start("d");  // inside a negotiation, not an op: nothing
    t.negotiate_end("d");
  });
  CHECK(tensor_sequence(trace, "a") == Seq{"B ALLREDUCE", "B QUEUE", "E QUEUE", "B NCCL_ALLREDUCE",
                                           "E NCCL_ALLREDUCE", "E ALLREDUCE"});
  CHECK(tensor_sequence(trace, "b") == Seq{"B BARRIER", "B QUEUE", "E QUEUE", "E BARRIER"});
  CHECK(span_arg(trace, row_pid(trace, "b"), "BARRIER", "error") == "boom");
  CHECK(row_pid(trace, "c") == -1);
  CHECK(tensor_sequence(trace, "d") == Seq{"B NEGOTIATE_ALLREDUCE", "E NEGOTIATE_ALLREDUCE"});
}

TEST_CASE("switch_activity ends the open activity and starts the next at one instant") {
  const TraceFile trace = record("switch", [](Timeline& t) {
    t.start_op("f", "ALLREDUCE", {{"fused_with", "2 tensors"}});
    t.activity_start("f", "NCCL_ALLREDUCE");
    t.switch_activity("f", "MEMCPY_OUT_FUSION_BUFFER");  // the GPU reached the copy out
    t.activity_end("f");                                 // the finalizer saw the work done
    t.end_op("f", {});
    t.start_op("g", "ALLREDUCE", {});
    t.switch_activity("g", "MEMCPY_OUT_FUSION_BUFFER");  // no activity open: nothing
    t.end_op("g", {});
    t.switch_activity("gone", "MEMCPY_OUT_FUSION_BUFFER");  // no such row: nothing
  });
  CHECK(tensor_sequence(trace, "f") ==
        Seq{"B ALLREDUCE", "B NCCL_ALLREDUCE", "E NCCL_ALLREDUCE", "B MEMCPY_OUT_FUSION_BUFFER",
            "E MEMCPY_OUT_FUSION_BUFFER", "E ALLREDUCE"});
  CHECK(tensor_sequence(trace, "g") == Seq{"B ALLREDUCE", "E ALLREDUCE"});
  CHECK(row_pid(trace, "gone") == -1);
  // MEMCPY_OUT begins as NCCL_ALLREDUCE ends: 1 ns later, so no viewer sees them overlap.
  const JsonValue* nccl = find_begin(trace, row_pid(trace, "f"), "NCCL_ALLREDUCE");
  const JsonValue* copy_out = find_begin(trace, row_pid(trace, "f"), "MEMCPY_OUT_FUSION_BUFFER");
  REQUIRE((nccl && copy_out));
  CHECK(copy_out->find("ts")->as_number() -
            (nccl->find("ts")->as_number() + nccl->find("dur")->as_number()) ==
        Approx(0.001).margin(1e-6));
}
