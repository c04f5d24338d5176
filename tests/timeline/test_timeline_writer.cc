// The recorder through its own API: the event sequences the core produces for unfused and fused
// allreduce and for an error response, QUEUE and activity switches, the file being valid JSON
// after every flush and written soon after an op, what a killed process leaves, start/stop and
// concurrent callers. (Bounds,
// row ids and the writer thread: test_timeline_bounds.cc.)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>

#include "horovodcpp/horovod.h"
#include "timeline/timeline.h"
#include "timeline/trace_check.h"
#include "timeline/trace_summary.h"
#include "timeline_test_util.h"

using hvd::Timeline;
using namespace hvd::timeline;
using namespace hvd::timeline::test;

namespace {

using Seq = std::vector<std::string>;

// What the coordinator's background thread records for one unfused allreduce of `name`.
void record_unfused(Timeline& t, const std::string& name, const std::vector<int>& ready_order) {
  t.negotiate_start(name, "ALLREDUCE");
  for (int r : ready_order) t.negotiate_rank_ready(name, r);
  t.negotiate_end(name);
  t.start_op(name, "ALLREDUCE", {{"dtype", "float32"}, {"shape", "[4]"}, {"bytes", "16"}});
  t.queue_start(name);
  t.queue_end(name);
  t.activity_start(name, "MPI_ALLREDUCE");
  t.activity_end(name);
  t.end_op(name, {});
}

const Seq kUnfused = {"B NEGOTIATE_ALLREDUCE", "B READY 0",       "E READY 0",   "B READY 1",
                      "E READY 1",             "E NEGOTIATE_ALLREDUCE", "B ALLREDUCE", "B QUEUE",
                      "E QUEUE",               "B MPI_ALLREDUCE",  "E MPI_ALLREDUCE", "E ALLREDUCE"};

// Timed events in the file, by phase ("X", "B", "E", ...).
std::map<std::string, std::size_t> phases(const TraceFile& trace) {
  std::map<std::string, std::size_t> count;
  for (const auto& e : trace.events) {
    if (string_field(e, "ph") != "M") ++count[string_field(e, "ph")];
  }
  return count;
}

TraceFile read_checked(const std::string& path) {
  TraceFile trace = read_trace_file(path);
  const CheckResult check = check_trace(trace);
  INFO(check.message);
  REQUIRE(check.ok);
  return trace;
}

}  // namespace

TEST_CASE("unfused allreduce: negotiation with ready instants, then the op and its activities") {
  const std::string path = temp_path("unfused");
  Timeline t;
  t.start(path, 3, false);
  REQUIRE(t.enabled());
  record_unfused(t, "grad/w", {0, 1});
  t.stop();
  REQUIRE_FALSE(t.enabled());
  const TraceFile trace = read_checked(path);
  CHECK(trace.complete);
  REQUIRE(trace.rank == 3);
  REQUIRE(trace.start_wall_us.has_value());
  CHECK(trace.dropped_events == 0u);
  CHECK(tensor_sequence(trace, "grad/w") == kUnfused);
  // Every span closed before it was written: complete events only, which no viewer mis-pairs.
  CHECK(phases(trace) == std::map<std::string, std::size_t>{{"X", 6}});
  const int pid = row_pid(trace, "grad/w");
  CHECK(pid == 2);  // row 1 is the runtime's own
  // Each row is named and sorted as a process and as a thread.
  std::map<std::string, int> meta;
  for (const auto& e : trace.events) {
    if (string_field(e, "ph") == "M" && e.find("pid")->as_number() == pid) {
      ++meta[string_field(e, "name")];
      if (string_field(e, "name") == "thread_name") CHECK(arg_text(e, "name") == "grad/w");
    }
  }
  CHECK(meta == std::map<std::string, int>{{"process_name", 1}, {"process_sort_index", 1},
                                           {"thread_name", 1}, {"thread_sort_index", 1}});
  // A READY slice runs from one report to the next; the last ends with the negotiation.
  const JsonValue* negotiation = find_begin(trace, pid, "NEGOTIATE_ALLREDUCE");
  const JsonValue* ready0 = find_begin(trace, pid, "READY 0");
  const JsonValue* ready1 = find_begin(trace, pid, "READY 1");
  REQUIRE((negotiation && ready0 && ready1));
  CHECK(arg_text(*ready1, "rank") == "1");
  const auto end_of = [](const JsonValue& e) {
    return e.find("ts")->as_number() + e.find("dur")->as_number();
  };
  CHECK(ready1->find("ts")->as_number() - end_of(*ready0) == Approx(0.001).margin(1e-6));
  CHECK(end_of(*ready1) <= end_of(*negotiation) + 1e-6);
  CHECK(ready0->find("ts")->as_number() >= negotiation->find("ts")->as_number());
  const JsonValue* op = find_begin(trace, pid, "ALLREDUCE");
  REQUIRE(op != nullptr);
  CHECK(arg_text(*op, "dtype") == "float32");
  CHECK(arg_text(*op, "shape") == "[4]");
  CHECK(op->find("args")->find("bytes")->as_number() == 16);  // integers are JSON numbers
  ::unlink(path.c_str());
}

TEST_CASE("the coordinator's negotiation opens at the first report and is not restarted") {
  const std::string path = temp_path("coordinator");
  Timeline t;
  t.start(path, 0, false);
  t.negotiate_start("g", "ALLGATHER");  // rank 2 reported first
  t.negotiate_rank_ready("g", 2);
  t.negotiate_start("g", "ALLGATHER");  // then the coordinator's own request left its queue
  t.negotiate_rank_ready("g", 0);
  t.negotiate_start("g", "ALLGATHER");
  t.negotiate_rank_ready("g", 1);
  t.negotiate_end("g");
  t.start_op("g", "ALLGATHER", {});
  t.end_op("g", {});
  t.stop();
  const TraceFile trace = read_checked(path);
  CHECK(tensor_sequence(trace, "g") ==
        Seq{"B NEGOTIATE_ALLGATHER", "B READY 2", "E READY 2", "B READY 0", "E READY 0",
            "B READY 1", "E READY 1", "E NEGOTIATE_ALLGATHER", "B ALLGATHER", "E ALLGATHER"});
  // One rank's file cannot say who was last (the coordinator notes others in its own order).
  CHECK_FALSE(summarize_trace(trace).last_ready.merged);
  CHECK(summarize_trace(trace).last_ready.negotiations == 0);
  ::unlink(path.c_str());
}

TEST_CASE("fused allreduce: each tensor's row shows the fused response it rode in") {
  const std::string path = temp_path("fused");
  Timeline t;
  t.start(path, 0, false);
  const std::vector<std::string> names = {"a", "b", "c"};
  const std::string fused = "3 tensors, 48 bytes, first 'a'";  // the same every step
  for (int step = 0; step < 2; ++step) {
    for (const auto& n : names) t.negotiate_start(n, "ALLREDUCE");
    for (int r : {2, 0, 1}) {
      for (const auto& n : names) t.negotiate_rank_ready(n, r);
    }
    for (const auto& n : names) t.negotiate_end(n);
    for (const auto& n : names) {
      t.start_op(n, "ALLREDUCE",
                 {{"dtype", "float32"}, {"shape", "[4]"}, {"bytes", "16"}, {"fused_with", fused}});
      t.queue_start(n);
    }
    for (const auto& n : names) t.queue_end(n);
    for (const char* activity :
         {"MEMCPY_IN_FUSION_BUFFER", "MPI_ALLREDUCE", "MEMCPY_OUT_FUSION_BUFFER"}) {
      for (const auto& n : names) t.activity_start(n, activity);
      for (const auto& n : names) t.activity_end(n);
    }
    for (const auto& n : names) t.end_op(n, {});
  }
  t.stop();
  const TraceFile trace = read_checked(path);
  Seq expected = {"B NEGOTIATE_ALLREDUCE",
                  "B READY 2",
                  "E READY 2",
                  "B READY 0",
                  "E READY 0",
                  "B READY 1",
                  "E READY 1",
                  "E NEGOTIATE_ALLREDUCE",
                  "B ALLREDUCE",
                  "B QUEUE",
                  "E QUEUE",
                  "B MEMCPY_IN_FUSION_BUFFER",
                  "E MEMCPY_IN_FUSION_BUFFER",
                  "B MPI_ALLREDUCE",
                  "E MPI_ALLREDUCE",
                  "B MEMCPY_OUT_FUSION_BUFFER",
                  "E MEMCPY_OUT_FUSION_BUFFER",
                  "E ALLREDUCE"};
  const Seq once = expected;
  expected.insert(expected.end(), once.begin(), once.end());
  for (const auto& n : names) {
    INFO(n);
    CHECK(tensor_sequence(trace, n) == expected);
    CHECK(arg_text(*find_begin(trace, row_pid(trace, n), "ALLREDUCE"), "fused_with") == fused);
  }
  const TraceSummary s = summarize_trace(trace);
  CHECK(s.fused_ops == 6);
  CHECK(s.fused_responses == 2);  // one per step, though fused_with reads the same
  CHECK(s.unfused_ops == 0);
  CHECK(s.fused_bytes == 96);
  CHECK(s.spans.at("MPI_ALLREDUCE").count == 6);
  ::unlink(path.c_str());
}

TEST_CASE("an error response is an ERROR op carrying the message") {
  const std::string path = temp_path("error");
  Timeline t;
  t.start(path, 0, false);
  t.negotiate_start("bad", "ALLREDUCE");
  t.negotiate_end("bad");
  t.start_op("bad", "ERROR", {{"error", "Mismatched shapes: rank 0 [4], rank 1 [5]"}});
  t.end_op("bad", {});
  t.start_op("late", "ALLREDUCE", {});
  t.activity_start("late", "MPI_ALLREDUCE");
  t.end_op("late", {{"error", "MPI_Allreduce failed"}});  // closes the open activity first
  t.stop();
  const TraceFile trace = read_checked(path);
  CHECK(tensor_sequence(trace, "bad") ==
        Seq{"B NEGOTIATE_ALLREDUCE", "E NEGOTIATE_ALLREDUCE", "B ERROR", "E ERROR"});
  CHECK(tensor_sequence(trace, "late") ==
        Seq{"B ALLREDUCE", "B MPI_ALLREDUCE", "E MPI_ALLREDUCE", "E ALLREDUCE"});
  const TraceSummary s = summarize_trace(trace);
  CHECK(s.errors == 2);
  REQUIRE(s.error_messages.size() == 2);
  CHECK(s.error_messages[0] == "bad: Mismatched shapes: rank 0 [4], rank 1 [5]");
  CHECK(s.error_messages[1] == "late: MPI_Allreduce failed");
  ::unlink(path.c_str());
}

TEST_CASE("the file is strict JSON after every flush, while recording") {
  const std::string path = temp_path("flush");
  Timeline t;
  t.start(path, 0, false);
  std::size_t previous = 0;
  for (int step = 0; step < 3; ++step) {
    record_unfused(t, "x" + std::to_string(step), {0, 1});
    t.negotiate_start("open", "ALLREDUCE");  // left open: the file must still be valid JSON
    t.flush();
    const JsonValue doc = parse_json(file_text(path));  // throws if not strict JSON
    REQUIRE(doc.kind() == JsonValue::Kind::Array);
    CHECK(doc.items().size() > previous);
    previous = doc.items().size();
    // The open span is in the trailer, as a begin event; once it closes, the trailer that held
    // it is overwritten and only complete events remain.
    CHECK(phases(read_trace_file(path)) == std::map<std::string, std::size_t>{{"X", 6 * (step + 1) + step}, {"B", 1}});
    t.negotiate_end("open");
    t.flush();
    CHECK(phases(read_trace_file(path)) == std::map<std::string, std::size_t>{{"X", 7 * (step + 1)}});
  }
  t.stop();
  CHECK(parse_json(file_text(path)).items().size() > previous);
  CHECK(file_text(path).back() == '\n');  // the padding of longer trailers is gone
  ::unlink(path.c_str());
}

TEST_CASE("a process killed with SIGKILL leaves a file the tool reads up to the last flush") {
  const std::string path = temp_path("killed");
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    Timeline t;
    t.start(path, 1, true);
    record_unfused(t, "done", {0, 1});
    t.negotiate_start("inflight", "ALLREDUCE");
    t.start_op("inflight", "ALLREDUCE", {});
    t.activity_start("inflight", "MPI_ALLREDUCE");
    t.flush();
    ::raise(SIGKILL);  // no stop(): the spans stay open, as in a real crash
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  const TraceFile trace = read_trace_file(path);
  const CheckResult check = check_trace(trace);
  CHECK(check.ok);
  CHECK(trace.complete);  // killed between writes: the trailer is in place
  CHECK(tensor_sequence(trace, "done") == kUnfused);
  CHECK(tensor_sequence(trace, "inflight") ==
        Seq{"B NEGOTIATE_ALLREDUCE", "E NEGOTIATE_ALLREDUCE", "B ALLREDUCE", "B MPI_ALLREDUCE"});
  // The closed spans are complete events; the two the process died in are begin events.
  CHECK(phases(trace) == std::map<std::string, std::size_t>{{"X", 7}, {"B", 2}});
  REQUIRE_FALSE(check.warnings.empty());
  CHECK_THAT(check.warnings[0], Catch::Contains("2 span(s) still open"));

  // A kill inside a write: the file stops in the middle of an event, or before the "]".
  const std::string text = file_text(path);
  const std::size_t last = text.rfind("{\"name\"");
  const TraceFile cut = read_trace_text(text.substr(0, last + 20), path);
  CHECK_FALSE(cut.complete);
  CHECK_THAT(cut.note,
             Catch::Contains("ends inside event " + std::to_string(trace.events.size() - 1)));
  CHECK(cut.events.size() == trace.events.size() - 1);
  CHECK(check_trace(cut).ok);
  const TraceFile open = read_trace_text(text.substr(0, text.rfind(']')), path);
  CHECK_FALSE(open.complete);
  CHECK(open.events.size() == trace.events.size());
  CHECK_THAT(open.note, Catch::Contains("closing ']' is missing"));
  ::unlink(path.c_str());
}

TEST_CASE("start/stop at run time: each recording is its own file; stop closes open spans") {
  const std::string first = temp_path("first");
  const std::string second = temp_path("second");
  Timeline t;
  t.negotiate_start("before", "ALLREDUCE");  // not recording: ignored
  t.start(first, 0, false);
  record_unfused(t, "one", {0, 1});
  t.start_op("left_open", "ALLGATHER", {});
  t.activity_start("left_open", "MPI_ALLGATHER");
  t.start(second, 0, false);  // stops the first recording
  record_unfused(t, "two", {1, 0});
  t.stop();
  t.stop();                            // idempotent
  record_unfused(t, "after", {0, 1});  // not recording: ignored

  const TraceFile a = read_checked(first);
  CHECK(check_trace(a).warnings.empty());  // stop closed every span
  CHECK(tensor_sequence(a, "one") == kUnfused);
  CHECK(tensor_sequence(a, "left_open") ==
        Seq{"B ALLGATHER", "B MPI_ALLGATHER", "E MPI_ALLGATHER", "E ALLGATHER"});
  CHECK(row_pid(a, "two") == -1);
  CHECK(row_pid(a, "before") == -1);
  const TraceFile b = read_checked(second);
  CHECK(row_pid(b, "two") == 2);  // rows are numbered afresh per file
  CHECK(row_pid(b, "one") == -1);
  CHECK(row_pid(b, "after") == -1);
  ::unlink(first.c_str());
  ::unlink(second.c_str());
}

TEST_CASE("a path that cannot be opened is an hvd::Error naming it") {
  Timeline t;
  CHECK_THROWS_WITH(
      t.start("/nonexistent-dir/x/timeline.json", 0, false),
      Catch::Contains("/nonexistent-dir/x/timeline.json") && Catch::Contains("cannot open"));
  CHECK_FALSE(t.enabled());
}

// See Note [Output files are never followed through links] (timeline/output_file.h).
TEST_CASE("a symlink where the timeline goes is refused, naming the path; its target is untouched") {
  const std::string target = temp_path("symlink_target");
  const std::string link = temp_path("symlink");
  { std::ofstream(target) << "the job's own file"; }
  ::unlink(link.c_str());
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  Timeline t;
  CHECK_THROWS_WITH(t.start(link, 0, false), Catch::Contains("timeline: '" + link + "' is a symbolic link"));
  CHECK_FALSE(t.enabled());
  std::ifstream in(target);
  CHECK(std::string((std::istreambuf_iterator<char>(in)), {}) == "the job's own file");
  ::unlink(link.c_str());
  ::unlink(target.c_str());
}

TEST_CASE("a CYCLE slice and a CYCLE_START instant per background cycle, only with mark_cycles") {
  for (bool mark : {false, true}) {
    const std::string path = temp_path("cycles");
    Timeline t;
    t.start(path, 0, mark);
    for (int i = 0; i < 5; ++i) t.mark_cycle_start();
    t.stop();  // ends the last cycle
    const TraceFile trace = read_checked(path);
    CHECK(summarize_trace(trace).cycles == (mark ? 5u : 0u));  // each cycle once, not twice
    // Back to back on the runtime's row: each ends where the next begins; Horovod's instant
    // marks each start.
    const Seq cycle = {"i CYCLE_START", "B CYCLE", "E CYCLE"};
    Seq expected;
    for (int i = 0; mark && i < 5; ++i) expected.insert(expected.end(), cycle.begin(), cycle.end());
    CHECK(row_sequence(trace, 1) == expected);
    // The instant is Horovod's global one, at the very time its slice begins.
    std::vector<double> instants, slices;
    for (const auto& e : trace.events) {
      if (string_field(e, "name") == "CYCLE_START") {
        CHECK(string_field(e, "ph") == "i");
        CHECK(string_field(e, "s") == "g");
        instants.push_back(*number_field(e, "ts"));
      }
      if (string_field(e, "name") == "CYCLE") slices.push_back(*number_field(e, "ts"));
    }
    CHECK(instants == slices);
    CHECK(instants.size() == (mark ? 5u : 0u));
    ::unlink(path.c_str());
  }
}

TEST_CASE("an op reaches the file well within the 0.1 s Horovod's test_timeline.py waits for it") {
  // That test (like a user tailing the file) reads 0.1 s after its allreduce returns. The writer
  // writes every flush_interval, counted from its last write: an op recorded just after one must
  // not wait a whole 0.1 s for the next. Just after start() is just after the first wait began.
  const std::string path = temp_path("latency");
  Timeline t;  // the default flush_interval
  t.start(path, 0, true);
  t.mark_cycle_start();
  record_unfused(t, "allreduce.test_allreduce", {0});
  const auto recorded = std::chrono::steady_clock::now();
  while (file_text(path).find("allreduce.test_allreduce") == std::string::npos &&
         std::chrono::steady_clock::now() - recorded < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const auto latency = std::chrono::steady_clock::now() - recorded;
  CHECK(latency < std::chrono::milliseconds(90));
  const std::string text = file_text(path);
  for (const char* name : {"NEGOTIATE_ALLREDUCE", "\"ALLREDUCE\"", "CYCLE_START"}) {
    CHECK(text.find(name) != std::string::npos);
  }
  t.stop();
  ::unlink(path.c_str());
}

TEST_CASE("background and finalizer threads may record at the same time") {
  const std::string path = temp_path("threads");
  hvd::TimelineOptions options;
  options.flush_interval = std::chrono::milliseconds(1);
  Timeline t(options);
  t.start(path, 0, false);
  auto worker = [&t](const std::string& prefix) {
    for (int i = 0; i < 200; ++i) record_unfused(t, prefix + std::to_string(i % 7), {0, 1});
  };
  std::thread a(worker, "bg_"), b(worker, "gpu_");
  a.join();
  b.join();
  t.stop();
  const TraceFile trace = read_checked(path);
  const TraceSummary s = summarize_trace(trace);
  CHECK(s.spans.at("ALLREDUCE").count == 400);
  CHECK(s.spans.at("NEGOTIATE_ALLREDUCE").count == 400);
  CHECK(s.tensors.size() == 14);
  ::unlink(path.c_str());
}

TEST_CASE("tensor names are escaped in the JSON") {
  const std::string path = temp_path("escape");
  const std::string name = "layer \"1\"\\bias\n\t\x01";
  Timeline t;
  t.start(path, 0, false);
  record_unfused(t, name, {0});
  t.stop();
  const TraceFile trace = read_checked(path);
  CHECK(row_pid(trace, name) == 2);
  ::unlink(path.c_str());
}

TEST_CASE("a name that is not UTF-8 is written as valid UTF-8, bad bytes as U+FFFD") {
  const std::string path = temp_path("utf8");
  const std::string good = "caf\xc3\xa9/\xf0\x9f\x98\x80";         // é and an emoji: kept
  const std::string bad = "w\xff\xc0\xaf\xed\xa0\x80x\xe2\x82";  // stray, overlong, surrogate, cut
  Timeline t;
  t.start(path, 0, false);
  record_unfused(t, good, {0});
  record_unfused(t, bad, {0});
  t.stop();
  const TraceFile trace = read_checked(path);  // the strict parser rejects invalid UTF-8
  CHECK(row_pid(trace, good) == 2);
  const std::string fffd = "\xef\xbf\xbd";
  CHECK(row_pid(trace, "w" + fffd + fffd + fffd + fffd + fffd + fffd + "x" + fffd + fffd) == 3);
  ::unlink(path.c_str());
}
