// `summary` on traces with known figures: phase times, negotiation wait, fusion, errors (op args
// on the B or the E event), the last rank ready -- only from each rank's own instant in a merged
// trace, k-th negotiation against k-th, ties for nobody -- the straggler by time lost (current
// format: complete events, READY and CYCLE slices, CYCLE_START instants), cycles counted once
// however they are marked, and the --top flag.
#include <catch2/catch.hpp>
#include <sstream>

#include "timeline/trace_check.h"
#include "timeline/trace_summary.h"
#include "timeline_test_util.h"

using namespace hvd::timeline;
using namespace hvd::timeline::test;

namespace {

const char* kMeta = R"({"name":"process_name","ph":"M","pid":2,"tid":2,"args":{"name":"w"}})";

std::string negotiation(const std::string& tensor_row, double begin, double end) {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                R"({"name":"NEGOTIATE_ALLREDUCE","ph":"B","ts":%g,%s},{"ph":"E","ts":%g,%s})", begin,
                tensor_row.c_str(), end, tensor_row.c_str());
  return buf;
}

// An instant on a merged row (group pid rank + 1, tensor tid) saying `rank` is ready.
std::string ready(int group_rank, int tid, int rank, double ts) {
  return R"({"name":")" + std::to_string(rank) + R"(","ph":"i","s":"t","ts":)" +
         std::to_string(ts) + R"(,"pid":)" + std::to_string(group_rank + 1) + R"(,"tid":)" +
         std::to_string(tid) + R"(,"args":{"rank":)" + std::to_string(rank) + "}}";
}

// One negotiation on a rank's row of a merged trace: its own ready instant at `own`, then what
// else it noted (the coordinator: other ranks, in the order it read them), ending at `end`.
std::string negotiation_on(int rank, int tid, double own, double end,
                           const std::vector<std::pair<int, double>>& others = {}) {
  const std::string row =
      R"("pid":)" + std::to_string(rank + 1) + R"(,"tid":)" + std::to_string(tid);
  std::string out = R"({"name":"NEGOTIATE_ALLREDUCE","ph":"B","ts":)" + std::to_string(own - 1) +
                    "," + row + "}," + ready(rank, tid, rank, own);
  for (const auto& [other, ts] : others) out += "," + ready(rank, tid, other, ts);
  return out + R"(,{"ph":"E","ts":)" + std::to_string(end) + "," + row + "}";
}

std::string cycle_mark(int rank, double ts) {
  return R"({"name":"CYCLE_START","ph":"i","s":"p","ts":)" + std::to_string(ts) +
         R"(,"pid":)" + std::to_string(rank + 1) + R"(,"tid":1})";
}

std::string group_meta(int rank, const std::vector<std::pair<int, std::string>>& rows) {
  const std::string pid = std::to_string(rank + 1);
  std::string out = R"({"name":"hvd_rank_group","ph":"M","pid":)" + pid +
                    R"(,"tid":1,"args":{"rank":)" + std::to_string(rank) + "}}";
  for (const auto& [tid, name] : rows) {
    out += R"(,{"name":"thread_name","ph":"M","pid":)" + pid + R"(,"tid":)" +
           std::to_string(tid) + R"(,"args":{"name":")" + name + R"("}})";
  }
  return out;
}

}  // namespace

TEST_CASE("summary: phase times, negotiation wait, fusion and errors") {
  const std::string w = R"("pid":2,"tid":2)", v = R"("pid":3,"tid":3)";
  const std::string text = std::string("[") + kMeta + R"(,
{"name":"process_name","ph":"M","pid":3,"tid":3,"args":{"name":"v"}},)" +
                           negotiation(w, 0, 40) + R"(,
{"name":"ALLREDUCE","ph":"B","ts":40,"pid":2,"tid":2,"args":{"fused_with":"2 tensors, 300 bytes"}},
{"ph":"E","ts":60,"pid":2,"tid":2,"args":{"bytes":100}},)" +
                           negotiation(w, 100, 160) + R"(,
{"name":"ALLREDUCE","ph":"B","ts":40,"pid":3,"tid":3,"args":{"bytes":"200","fused_with":"2 tensors, 300 bytes"}},
{"ph":"E","ts":60,"pid":3,"tid":3},
{"name":"ALLREDUCE","ph":"B","ts":200,"pid":3,"tid":3,"args":{"bytes":"50"}},
{"name":"MPI_ALLREDUCE","ph":"B","ts":201,"pid":3,"tid":3},
{"ph":"E","ts":209,"pid":3,"tid":3},
{"ph":"E","ts":300,"pid":3,"tid":3,"args":{"error":"boom"}}
])";
  const TraceFile trace = read_trace_text(text, "s.json");
  REQUIRE(check_trace(trace).ok);
  const TraceSummary s = summarize_trace(trace);
  CHECK(s.spans.at("NEGOTIATE_ALLREDUCE").count == 2);
  CHECK(s.spans.at("NEGOTIATE_ALLREDUCE").total_us == Approx(40 + 60));
  CHECK(s.spans.at("MPI_ALLREDUCE").max_us == Approx(8));
  CHECK(s.spans.at("ALLREDUCE").count == 3);
  CHECK(s.tensors.at("w").negotiation.total_us == Approx(100));
  CHECK(s.tensors.at("w").negotiation.max_us == Approx(60));
  CHECK(s.tensors.at("v").ops.max_us == Approx(100));
  CHECK(s.tensors.at("v").errors == 1);
  CHECK(s.fused_ops == 2);
  CHECK(s.fused_responses == 1);
  CHECK(s.unfused_ops == 1);
  CHECK(s.bytes == Approx(350));  // 100 from an E event's args
  CHECK(s.errors == 1);
  std::ostringstream out;
  print_summary(trace, s, out);
  CHECK_THAT(out.str(), Catch::Contains("2 tensor op(s) rode in 1 fused response(s)"));
  CHECK_THAT(out.str(), Catch::Contains("v: boom"));
  // One rank's file cannot say who was last: the summary says what it needs instead.
  CHECK_FALSE(s.last_ready.merged);
  CHECK_THAT(out.str(), Catch::Contains("not computed for a single-rank file"));
  CHECK_THAT(out.str(), Catch::Contains("HOROVOD_TIMELINE_ALL_RANKS=1"));
  CHECK_THAT(out.str(), Catch::Contains("hvd-timeline merge"));
}

TEST_CASE("last rank ready: each rank's own instant, k-th against k-th, ties for nobody") {
  // Tensor w (tid 2) on ranks 0..2: three negotiations; v (tid 3) on ranks 0 and 1 only, once
  // on rank 1 and twice on rank 0 (only the first pairs up). No cycle marks: by timestamp.
  std::string text = "[" + group_meta(0, {{2, "w"}, {3, "v"}}) + "," +
                     group_meta(1, {{2, "w"}, {3, "v"}}) + "," + group_meta(2, {{2, "w"}});
  const double w_ready[3][3] = {{10, 30, 20}, {110, 105, 120}, {260, 260, 250}};
  for (int rank = 0; rank < 3; ++rank) {
    for (int k = 0; k < 3; ++k) {
      // The coordinator notes rank 1, then rank 2, last of all: it must not count.
      const std::vector<std::pair<int, double>> noted = {{1, 100.0 * k + 70}, {2, 100.0 * k + 71}};
      text += "," + negotiation_on(rank, 2, w_ready[k][rank], 100.0 * k + 95,
                                   rank == 0 ? noted : std::vector<std::pair<int, double>>{});
    }
  }
  text += "," + negotiation_on(0, 3, 1000, 1001) + "," + negotiation_on(0, 3, 2000, 2001) + "," +
          negotiation_on(1, 3, 900, 1001) + "]";
  const TraceFile trace = read_trace_text(text, "m.json");
  const CheckResult check = check_trace(trace);
  INFO(check.message);
  REQUIRE(check.ok);
  const LastReadyStats r = summarize_trace(trace).last_ready;
  CHECK(r.merged);
  CHECK(r.negotiations == 4);
  CHECK(r.by_cycle == 0);
  CHECK(r.ties == 1);  // w's third: ranks 0 and 1 both at 260
  CHECK(r.last == std::map<int, std::size_t>{{0, 1}, {1, 1}, {2, 1}});
  std::ostringstream out;
  print_summary(trace, summarize_trace(trace), out);
  CHECK_THAT(out.str(), Catch::Contains("over 4 negotiation(s)"));
  CHECK_THAT(out.str(), Catch::Contains("1 tie(s), counted for nobody"));
  CHECK_THAT(out.str(), Catch::Contains("rank 2: last in 1 (25%)"));
  CHECK_THAT(out.str(), Catch::Contains("4 of them compared by timestamp"));
}

TEST_CASE("last rank ready with cycle marks: ready in the same cycle is a tie") {
  // Rank 1's cycles start 80 us after rank 0's. First negotiation: both ready in the cycle that
  // ends it (rank 1 later only by that phase): a tie. Second: rank 1 a whole cycle later.
  std::string text = "[" + group_meta(0, {{2, "x"}}) + "," + group_meta(1, {{2, "x"}});
  for (int rank = 0; rank < 2; ++rank) {
    for (int c = 0; c < 5; ++c) text += "," + cycle_mark(rank, 1000.0 * c + 99 + 80 * rank);
  }
  text += "," + negotiation_on(0, 2, 100, 300) + "," + negotiation_on(0, 2, 2100, 3300);
  text += "," + negotiation_on(1, 2, 180, 300) + "," + negotiation_on(1, 2, 3180, 3300) + "]";
  const TraceFile trace = read_trace_text(text, "c.json");
  REQUIRE(check_trace(trace).ok);
  const LastReadyStats r = summarize_trace(trace).last_ready;
  CHECK(r.negotiations == 2);
  CHECK(r.by_cycle == 2);
  CHECK(r.ties == 1);
  CHECK(r.last == std::map<int, std::size_t>{{1, 1}});
  std::ostringstream out;
  print_summary(trace, summarize_trace(trace), out);
  CHECK_THAT(out.str(), !Catch::Contains("compared by timestamp"));
}

TEST_CASE("summary --top N limits the per-tensor tables and says how many it left out") {
  const std::string path = temp_path("top");
  std::string text = "[";
  for (int i = 0; i < 15; ++i) {
    const std::string row = R"("pid":)" + std::to_string(i + 2) + R"(,"tid":)" + std::to_string(i + 2);
    text += std::string(i ? "," : "") + R"({"name":"process_name","ph":"M",)" + row +
            R"(,"args":{"name":"t)" + std::to_string(i) + R"("}},)" + negotiation(row, 0, i + 1);
  }
  write_text(path, text + "]");
  auto [status, output] = run_tool("summary " + path);
  CHECK(status == 0);
  CHECK_THAT(output, Catch::Contains("... 5 more tensor(s) not shown (--top N shows more)"));
  std::tie(status, output) = run_tool("summary --top 3 " + path);
  CHECK(status == 0);
  CHECK_THAT(output, Catch::Contains("... 12 more tensor(s) not shown"));
  CHECK_THAT(output, Catch::Contains("  t14 "));  // the longest wait first
  CHECK_THAT(output, !Catch::Contains("  t11 "));
  std::tie(status, output) = run_tool("summary --top 20 " + path);
  CHECK_THAT(output, !Catch::Contains("not shown"));
  std::tie(status, output) = run_tool("summary --top 0 " + path);
  CHECK(status == 2);
  CHECK_THAT(output, Catch::Contains("--top needs a whole number of at least 1, not '0'"));
  std::tie(status, output) = run_tool("summary " + path + " --top");
  CHECK(status == 2);
  ::unlink(path.c_str());
}

namespace {

// The current format on a merged row: complete events, READY slices, CYCLE slices.
std::string complete(const std::string& name, int rank, int tid, double ts, double dur,
                     const std::string& args = "") {
  char buf[320];
  std::snprintf(buf, sizeof(buf), R"({"name":"%s","ph":"X","ts":%.3f,"dur":%.3f,"pid":%d,"tid":%d%s})",
                name.c_str(), ts, dur, rank + 1, tid,
                args.empty() ? "" : (R"(,"args":)" + args).c_str());
  return buf;
}

// One negotiation of tensor row 2 on `rank`: it reports at `ready`, agreement at `end`.
std::string negotiated(int rank, double ready, double end) {
  return complete("NEGOTIATE_ALLREDUCE", rank, 2, ready - 1, end - ready + 1) + "," +
         complete("READY " + std::to_string(rank), rank, 2, ready, end - ready - 0.001,
                  R"({"rank":)" + std::to_string(rank) + "}");
}

// One op of tensor row 2 on `rank` whose collective begins at `start`.
std::string op_run(int rank, double begin, double start, double end) {
  return complete("ALLREDUCE", rank, 2, begin, end - begin) + "," +
         complete("QUEUE", rank, 2, begin + 0.001, start - begin - 0.002) + "," +
         complete("MPI_ALLREDUCE", rank, 2, start, end - start - 0.001);
}

// How a trace marks its cycles: CYCLE slices, CYCLE_START instants (Horovod's, and older
// horovodcpp files), or both at each start (what the recorder writes).
enum class Marks { Slices, Instants, Both };

// Two ranks, 1 ms cycles for 120 ms; rank 0 reports 1.5 ms after rank 1 in three negotiations;
// with `pause`, rank 1 then reports 21 ms late once and begins the collective 31 ms late.
std::string two_rank_trace(bool pause, Marks marks = Marks::Slices) {
  std::string events = group_meta(0, {{2, "w"}}) + "," + group_meta(1, {{2, "w"}});
  for (int rank = 0; rank < 2; ++rank) {
    for (int j = 0; j < 120; ++j) {
      if (marks != Marks::Slices) events += "," + cycle_mark(rank, j * 1000.0);
      if (marks != Marks::Instants) events += "," + complete("CYCLE", rank, 1, j * 1000.0, 999.999);
    }
  }
  for (int k = 0; k < 3; ++k) {
    const double b = k * 25000.0;
    events += "," + negotiated(1, b + 100, b + 2000) + "," + negotiated(0, b + 1600, b + 2000);
  }
  if (pause) {
    events += "," + negotiated(0, 75100, 96500) + "," + negotiated(1, 96100, 96500);
    events += "," + op_run(0, 100000, 100100, 132000) + "," + op_run(1, 131000, 131100, 132000);
  }
  return "[" + events + "]";
}

}  // namespace

TEST_CASE("the straggler is named by the time the others waited, late reports and late entries") {
  const std::string path = temp_path("straggler_time");
  write_text(path, two_rank_trace(true));
  const TraceFile trace = read_trace_file(path);
  REQUIRE(check_trace(trace).ok);
  const LastReadyStats r = summarize_trace(trace).last_ready;
  REQUIRE(r.merged);
  CHECK(r.negotiations == 4);
  CHECK(r.cycle_us == Approx(1000));
  REQUIRE(r.lost_us.count(0) == 1);
  CHECK_THAT(r.lost_us.at(0), Catch::Matchers::Approx(std::vector<double>{500, 500, 500}).margin(0.01));
  REQUIRE(r.lost_us.count(1) == 1);
  CHECK_THAT(r.lost_us.at(1), Catch::Matchers::Approx(std::vector<double>{20000}).margin(0.01));
  REQUIRE(r.late_entry_us.count(1) == 1);
  CHECK_THAT(r.late_entry_us.at(1), Catch::Matchers::Approx(std::vector<double>{30000}).margin(0.01));
  CHECK(r.late_entry_us.count(0) == 0);
  const StragglerVerdict verdict = straggler_verdict(r);
  CHECK(verdict.rank == 1);  // last in fewer negotiations than rank 0, but for far longer
  CHECK(verdict.total_us == Approx(50000));
  std::ostringstream out;
  print_summary(trace, summarize_trace(trace), out);
  CHECK_THAT(out.str(), Catch::Contains("straggler (most time lost): rank 1 (50.000 ms in 2 "
                                        "negotiation(s) and op(s))"));
  CHECK_THAT(out.str(), Catch::Contains("rank 0: last in") &&
                            Catch::Contains("the others waited for it 1.500 ms in all"));

  // Without the pause: rank 0 is later by half a cycle's worth three times -- 1.5 ms of a
  // 120 ms recording -- which is noise, not a straggler.
  write_text(path, two_rank_trace(false));
  const TraceFile quiet = read_trace_file(path);
  CHECK(straggler_verdict(summarize_trace(quiet).last_ready).rank == -1);
  std::ostringstream quiet_out;
  print_summary(quiet, summarize_trace(quiet), quiet_out);
  CHECK_THAT(quiet_out.str(), Catch::Contains("straggler: none stands out"));
  ::unlink(path.c_str());
}

TEST_CASE("a cycle marked by both its CYCLE slice and a CYCLE_START instant counts once") {
  // The same figures whichever way the cycles are marked: 120 per rank, a 1 ms period, the same
  // waits, last places and straggler (counted twice, half the gaps between starts would be 0).
  const auto summary_of = [](Marks marks) {
    const TraceFile trace = read_trace_text(two_rank_trace(true, marks), "marks.json");
    REQUIRE(check_trace(trace).ok);
    return summarize_trace(trace);
  };
  const TraceSummary slices = summary_of(Marks::Slices);
  CHECK(slices.cycles == 240);
  CHECK(slices.last_ready.by_cycle == 4);
  CHECK(slices.last_ready.cycle_us == Approx(1000));
  CHECK(straggler_verdict(slices.last_ready).rank == 1);
  for (Marks marks : {Marks::Instants, Marks::Both}) {
    INFO("marks " << static_cast<int>(marks));
    const TraceSummary s = summary_of(marks);
    const LastReadyStats& r = s.last_ready;
    CHECK(s.cycles == slices.cycles);
    CHECK(r.negotiations == slices.last_ready.negotiations);
    CHECK(r.by_cycle == slices.last_ready.by_cycle);
    CHECK(r.ties == slices.last_ready.ties);
    CHECK(r.last == slices.last_ready.last);
    CHECK(r.cycle_us == Approx(slices.last_ready.cycle_us));
    CHECK(r.lost_us == slices.last_ready.lost_us);
    CHECK(r.late_entry_us == slices.last_ready.late_entry_us);
    CHECK(straggler_verdict(r).rank == 1);
  }
}
