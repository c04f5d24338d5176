// The recorder's bounds and identities: the queue never holds more than its capacity (row
// metadata and E events included) and keeps every row nested when it drops; the rows it
// remembers are bounded while a recurring name keeps its row; no pid or tid is 0; the writer
// thread is named.
#include <catch2/catch.hpp>

#include "timeline/timeline.h"
#include "timeline/trace_check.h"
#include "timeline/trace_merge.h"
#include "timeline/trace_summary.h"
#include "tests/common/process_threads.h"
#include "timeline_test_util.h"

using hvd::Timeline;
using namespace hvd::timeline;
using namespace hvd::timeline::test;
using Seq = std::vector<std::string>;

namespace {

// Options whose writer drains only at stop(), so what the queue held is what reaches the file.
hvd::TimelineOptions held_queue(std::size_t capacity) {
  hvd::TimelineOptions options;
  options.queue_capacity = capacity;
  options.flush_interval = std::chrono::milliseconds(60000);
  options.wake_when_half_full = false;
  return options;
}

std::size_t timed_events(const TraceFile& trace) {
  std::size_t n = 0;
  for (const auto& e : trace.events) n += string_field(e, "ph") != "M";
  return n;
}

}  // namespace

TEST_CASE("a full queue drops events, counts them, and keeps every row nested") {
  const std::string path = temp_path("dropped");
  Timeline t(held_queue(16));
  t.start(path, 0, false);
  t.negotiate_start("kept", "ALLREDUCE");  // 4 metadata + B, and room kept for its E: 6 of 16
  // Each report ends the previous READY slice (E) and begins the next (B, with room for its E):
  // 5 fit (14 queued, 2 ends owed); the 6th B finds no room, and from then on each report
  // drops its B and the E of the dropped B before it: 1 + 14 * 2.
  for (int i = 0; i < 20; ++i) t.negotiate_rank_ready("kept", i % 4);
  t.start_op("lost", "ALLREDUCE", {});  // no room for metadata + B + E: dropped, and so its E
  t.activity_start("lost", "MPI_ALLREDUCE");
  t.activity_end("lost");
  t.end_op("lost", {});
  t.negotiate_end("kept");  // the E of a written B always fits: room was kept for it
  const std::uint64_t dropped = t.dropped_events();
  CHECK(dropped == 1 + 14 * 2 + 4 + 1);  // readies, B/B/E/E of "lost", the last READY's E
  t.stop();
  const TraceFile trace = read_trace_file(path);
  const CheckResult check = check_trace(trace);
  REQUIRE(check.ok);
  CHECK(check.warnings.size() == 1);  // the dropped-events warning
  REQUIRE(trace.dropped_events.has_value());
  CHECK(*trace.dropped_events == dropped);
  CHECK(tensor_sequence(trace, "kept") ==
        Seq{"B NEGOTIATE_ALLREDUCE", "B READY 0", "E READY 0", "B READY 1", "E READY 1",
            "B READY 2", "E READY 2", "B READY 3", "E READY 3", "B READY 0", "E READY 0",
            "E NEGOTIATE_ALLREDUCE"});
  CHECK(row_pid(trace, "lost") == -1);  // not even its metadata
  ::unlink(path.c_str());
}

TEST_CASE("row metadata and E events count against the queue bound") {
  const std::string path = temp_path("bound");
  Timeline t(held_queue(16));
  t.start(path, 0, false);
  // Each new row needs 4 metadata + B + room for its E: 2 rows fit in 16, the other 8 do not.
  for (int i = 0; i < 10; ++i) t.start_op("r" + std::to_string(i), "ALLREDUCE", {});
  for (int i = 0; i < 10; ++i) t.end_op("r" + std::to_string(i), {});
  CHECK(t.dropped_events() == 8 * 2);  // each lost row: its B and its E
  t.stop();
  const TraceFile trace = read_trace_file(path);
  REQUIRE(check_trace(trace).ok);
  // What was queued between start and stop (5 header events and the dropped count aside):
  // 2 rows of 4 metadata and a B/E pair, written as one complete event each.
  CHECK(trace.events.size() - 6 == 2 * 5u);
  CHECK(timed_events(trace) == 2u);
  for (int i = 0; i < 2; ++i) {
    CHECK(tensor_sequence(trace, "r" + std::to_string(i)) == Seq{"B ALLREDUCE", "E ALLREDUCE"});
  }
  ::unlink(path.c_str());
}

TEST_CASE("rows are forgotten beyond row_capacity; a recurring name keeps its row meanwhile") {
  const std::string path = temp_path("rows");
  hvd::TimelineOptions options;
  options.row_capacity = 4;
  Timeline t(options);
  t.start(path, 0, false);
  auto op = [&t](const std::string& name) {
    t.start_op(name, "ALLREDUCE", {{"bytes", "4"}});
    t.end_op(name, {});
  };
  op("grad");
  for (int i = 0; i < 2; ++i) op("allreduce.noname." + std::to_string(i));
  op("grad");  // still remembered: same row
  CHECK(t.remembered_rows() == 3);
  t.start_op("held", "ALLREDUCE", {});  // open: never forgotten
  for (int i = 2; i < 100; ++i) op("allreduce.noname." + std::to_string(i));
  CHECK(t.remembered_rows() <= 4);
  op("grad");  // forgotten by now: a new row with its own metadata
  t.end_op("held", {});
  t.stop();
  const TraceFile trace = read_trace_file(path);
  REQUIRE(check_trace(trace).ok);
  std::vector<int> grad_pids;
  for (const auto& e : trace.events) {
    if (string_field(e, "name") == "process_name" && arg_text(e, "name") == "grad") {
      grad_pids.push_back(static_cast<int>(e.find("pid")->as_number()));
    }
  }
  REQUIRE(grad_pids.size() == 2);
  CHECK(row_sequence(trace, grad_pids[0]).size() == 4);  // two ops on the first row
  CHECK(row_sequence(trace, grad_pids[1]).size() == 2);
  CHECK(tensor_sequence(trace, "held") == Seq{"B ALLREDUCE", "E ALLREDUCE"});
  // Summary and merge key rows by name: one tensor, three ops, one merged row.
  CHECK(summarize_trace(trace).tensors.at("grad").ops.count == 3);
  std::size_t merged_ops = 0;
  for (const auto& e : merge_traces({trace})) {
    merged_ops += string_field(e, "ph") == "X" && string_field(e, "name") == "ALLREDUCE" &&
                  e.find("tid")->as_number() == 2;
  }
  CHECK(merged_ops == 3);  // grad came first: tid 2 holds all three of its ops
  ::unlink(path.c_str());
}

TEST_CASE("no pid or tid is 0; a row's tid is its pid; the writer thread is named") {
  const std::string path = temp_path("ids");
  Timeline t;
  t.start(path, 0, true);
  const auto threads = hvd::test::threads_of_this_process();
  REQUIRE_FALSE(threads.empty());
  bool named = false;
  for (const auto& thread : threads) named = named || thread.name == "hvd-timeline";
  CHECK(named);
  t.mark_cycle_start();
  t.negotiate_start("x", "ALLREDUCE");
  t.negotiate_rank_ready("x", 0);
  t.negotiate_end("x");
  t.stop();
  const TraceFile trace = read_trace_file(path);
  REQUIRE(check_trace(trace).ok);
  for (const auto& e : trace.events) {
    INFO(e.dump());
    CHECK(e.find("pid")->as_number() >= 1);
    CHECK(e.find("tid")->as_number() == e.find("pid")->as_number());
  }
  CHECK(row_pid(trace, "rank 0") == 1);  // the runtime's own row
  CHECK(row_pid(trace, "x") == 2);
}

TEST_CASE("dropped events are reported once, through the options' warning callback") {
  const std::string path = temp_path("dropped_warning");
  hvd::TimelineOptions options = held_queue(8);
  std::vector<std::string> warnings;
  options.warn = [&warnings](const std::string& message) { warnings.push_back(message); };
  Timeline t(options);
  t.start(path, 0, false);
  for (int i = 0; i < 10; ++i) t.negotiate_start("n" + std::to_string(i), "ALLREDUCE");
  REQUIRE(t.dropped_events() > 0);
  CHECK(warnings.empty());  // reported when the recording stops
  t.stop();
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] == "timeline: " + std::to_string(t.dropped_events()) + " events were dropped from '" + path +
                           "' because the writer's queue was full");
  ::unlink(path.c_str());
}

TEST_CASE("a path that cannot be opened is a TimelineError, and nothing is reported through the callback") {
  hvd::TimelineOptions options;
  int warned = 0;
  options.warn = [&warned](const std::string&) { ++warned; };
  Timeline t(options);
  CHECK_THROWS_AS(t.start("/nonexistent-dir/y/timeline.json", 0, false), hvd::TimelineError);
  CHECK_FALSE(t.enabled());
  CHECK(warned == 0);
}
