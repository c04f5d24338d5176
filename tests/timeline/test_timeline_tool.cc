// The reading side: the JSON parser, `check` on hand-made bad traces (the first bad event and
// the right message), and `merge`. (Strict JSON: test_timeline_strict.cc; summary:
// test_timeline_summary.cc.)
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>

#include "timeline/timeline.h"
#include "timeline/trace_check.h"
#include "timeline/trace_merge.h"
#include "timeline/trace_summary.h"
#include "timeline_test_util.h"

using namespace hvd::timeline;
using namespace hvd::timeline::test;

namespace {

CheckResult check_text(const std::string& text) { return check_trace(read_trace_text(text, "t")); }

const char* kMeta = R"({"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"w"}})";

}  // namespace

TEST_CASE("the JSON parser reads what JSON allows and reports where it stops") {
  const JsonValue v =
      parse_json(R"( {"a": [1, -2.5e1, true, false, null], "s": "q\"\\\u00e9\ud83d\ude00\n"} )");
  REQUIRE(v.is_object());
  const auto& a = v.find("a")->items();
  REQUIRE(a.size() == 5);
  CHECK(a[0].as_number() == 1);
  CHECK(a[1].as_number() == -25);
  CHECK(a[2].as_bool());
  CHECK(a[4].kind() == JsonValue::Kind::Null);
  CHECK(v.find("s")->as_string() == "q\"\\\xc3\xa9\xf0\x9f\x98\x80\n");
  CHECK(parse_json(v.dump()).dump() == v.dump());  // round trip

  try {
    parse_json(R"({"a": [1, 2)");
    FAIL("no error");
  } catch (const JsonError& e) {
    CHECK(e.at_end());
  }
  try {
    parse_json(R"({"a": [1 2]})");
    FAIL("no error");
  } catch (const JsonError& e) {
    CHECK_FALSE(e.at_end());
    CHECK(e.offset() == 9);
    CHECK_THAT(e.what(), Catch::Contains("expected ',' or ']'"));
  }
  CHECK_THROWS_AS(parse_json("[01x]"), JsonError);
  CHECK_THROWS_AS(parse_json("{} {}"), JsonError);
}

TEST_CASE("check accepts a well-formed trace in array and object form") {
  const std::string events =
      std::string(kMeta) +
      R"(,{"name":"A","ph":"B","ts":1,"pid":1,"tid":0},{"name":"i","ph":"i","ts":1.5,"pid":1,"tid":0,"s":"t"},)"
      R"({"name":"A","ph":"E","ts":2,"pid":1,"tid":0},{"name":"X","ph":"X","ts":0.5,"dur":3,"pid":2,"tid":0},)"
      R"({"name":"Y","ph":"X","ts":1,"dur":2.5,"pid":2,"tid":0},{"name":"Z","ph":"X","ts":3.5,"dur":0,"pid":2,"tid":0})";
  CheckResult r = check_text("[" + events + "]");
  INFO(r.message);
  CHECK(r.ok);
  CHECK(r.rows == 2);
  CHECK(r.warnings.empty());
  r = check_text(R"({"traceEvents":[)" + events + R"(],"displayTimeUnit":"ms"})");
  CHECK(r.ok);
}

TEST_CASE("check warns about unnamed ends (older files) and refuses overlapping complete events") {
  CheckResult r = check_text("[" + std::string(kMeta) +
                             R"(,{"name":"A","ph":"B","ts":1,"pid":1,"tid":1},{"ph":"E","ts":2,"pid":1,"tid":1}])");
  CHECK(r.ok);
  REQUIRE(r.warnings.size() == 1);
  CHECK_THAT(r.warnings[0], Catch::Contains("1 end event(s) without a name") &&
                                Catch::Contains("hvd-timeline merge FILE -o OUT"));
  r = check_text("[" + std::string(kMeta) +
                 R"(,{"name":"A","ph":"X","ts":1,"dur":5,"pid":1,"tid":1},{"name":"B","ph":"X","ts":4,"dur":3,"pid":1,"tid":1}])");
  CHECK_FALSE(r.ok);
  CHECK(r.bad_index == 2);
  CHECK_THAT(r.message, Catch::Contains("X \"B\" (4.000 to 7.000) overlaps the end of X \"A\""));
}

TEST_CASE("check names the first bad event and what is wrong with it") {
  struct Case {
    const char* what;
    std::string body;  // events after the metadata event (index 0)
    std::size_t index;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"E with nothing open",
       R"({"name":"A","ph":"B","ts":1,"pid":1,"tid":0},{"ph":"E","ts":2,"pid":1,"tid":0},{"ph":"E","ts":3,"pid":1,"tid":0})",
       3, "E closes no open B on row pid 1 tid 0"},
      {"E on another row",
       R"({"name":"A","ph":"B","ts":1,"pid":1,"tid":0},{"ph":"E","ts":2,"pid":2,"tid":0})", 2,
       "E closes no open B on row pid 2 tid 0"},
      {"E closing the wrong span",
       R"({"name":"A","ph":"B","ts":1,"pid":1,"tid":0},{"name":"Q","ph":"B","ts":1,"pid":1,"tid":0},{"name":"A","ph":"E","ts":2,"pid":1,"tid":0})",
       3, "E \"A\" does not match the open B \"Q\" (event 2)"},
      {"time going back",
       R"({"name":"A","ph":"B","ts":5,"pid":1,"tid":0},{"name":"r","ph":"i","ts":4.5,"pid":1,"tid":0})",
       2, "\"ts\" 4.500 goes back in time on row pid 1 tid 0 (event 1 had 5.000)"},
      {"missing ph", R"({"name":"A","ts":5,"pid":1,"tid":0})", 1, "missing \"ph\""},
      {"unknown ph", R"({"name":"A","ph":"Z","ts":5,"pid":1,"tid":0})", 1, "unknown phase \"Z\""},
      {"B without ts", R"({"name":"A","ph":"B","pid":1,"tid":0})", 1,
       "missing or non-numeric \"ts\""},
      {"ts as a string", R"({"name":"A","ph":"B","ts":"5","pid":1,"tid":0})", 1,
       "missing or non-numeric \"ts\""},
      {"B without name", R"({"ph":"B","ts":5,"pid":1,"tid":0})", 1, "phase B needs a \"name\""},
      {"no pid", R"({"name":"A","ph":"B","ts":5,"tid":0})", 1, "missing \"pid\""},
      {"no tid", R"({"name":"A","ph":"B","ts":5,"pid":1})", 1, "missing \"tid\""},
      {"X without dur", R"({"name":"A","ph":"X","ts":5,"pid":1,"tid":0})", 1,
       "phase X needs a non-negative \"dur\""},
      {"bad instant scope", R"({"name":"A","ph":"i","ts":5,"pid":1,"tid":0,"s":"x"})", 1,
       "instant scope"},
      {"args not an object", R"({"name":"A","ph":"B","ts":5,"pid":1,"tid":0,"args":3})", 1,
       "\"args\" must be an object"},
      {"process_name without a name", R"({"name":"process_name","ph":"M","pid":1,"args":{}})", 1,
       "process_name needs args.name"},
      {"not an object", R"(7)", 1, "an event must be a JSON object"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    const CheckResult r = check_text(std::string("[") + kMeta + "," + c.body + "]");
    CHECK_FALSE(r.ok);
    CHECK(r.bad_index == c.index);
    CHECK_THAT(r.message, Catch::StartsWith("event " + std::to_string(c.index) + ": " + c.message));
  }
}

TEST_CASE("malformed JSON before the end is an error naming the event; a cut-short tail is not") {
  CHECK_THROWS_WITH(read_trace_text(std::string("[") + kMeta + R"(, {"name": x}, {}])", "f.json"),
                    Catch::StartsWith("f.json: event 1: malformed JSON"));
  CHECK_THROWS_WITH(read_trace_text("", "f.json"), Catch::Contains("empty"));
  CHECK_THROWS_WITH(read_trace_text("hello", "f.json"), Catch::Contains("expected '[' or '{'"));
  const TraceFile cut =
      read_trace_text(std::string("[") + kMeta + R"(, {"name":"A","ph":"B","ts":1,"pi)", "f");
  CHECK_FALSE(cut.complete);
  CHECK(cut.events.size() == 1);
  const TraceFile comma = read_trace_text(std::string("[") + kMeta + ",\n", "f");
  CHECK_FALSE(comma.complete);
  CHECK(comma.events.size() == 1);
}

TEST_CASE("hvd-timeline check exits non-zero printing the first bad event with its index") {
  const std::string path = temp_path("bad_cli");
  write_text(
      path,
      std::string("[") + kMeta +
          R"(,{"name":"A","ph":"B","ts":1,"pid":1,"tid":0},{"ph":"E","ts":0.5,"pid":1,"tid":0}])");
  auto [status, output] = run_tool("check " + path);
  CHECK(status == 1);
  CHECK_THAT(output, Catch::Contains("event 2: \"ts\" 0.500 goes back in time"));
  CHECK_THAT(output, Catch::Contains(R"({"ph":"E","ts":0.5,"pid":1,"tid":0})"));
  write_text(path, std::string("[") + kMeta + R"(,{"name":"A","ph":"B","ts":1,"pid":1,"tid":0})");
  std::tie(status, output) = run_tool("check " + path);
  CHECK(status == 0);
  CHECK_THAT(output, Catch::Contains("OK: 2 events"));
  CHECK_THAT(output, Catch::Contains("closing ']' is missing"));
  std::tie(status, output) = run_tool("check /nonexistent/trace.json");
  CHECK(status == 1);
  CHECK_THAT(output, Catch::Contains("/nonexistent/trace.json: cannot open"));
  std::tie(status, output) = run_tool("frobnicate x");
  CHECK(status == 2);
  CHECK_THAT(output, Catch::Contains("unknown command 'frobnicate'"));
  std::tie(status, output) = run_tool("merge " + path);
  CHECK(status == 2);
  CHECK_THAT(output, Catch::Contains("-o OUT"));
  ::unlink(path.c_str());
}

TEST_CASE("merge: an output path that is a symlink is refused; its target is untouched") {
  const std::string target = temp_path("merge_link_target");
  const std::string link = temp_path("merge_link");
  { std::ofstream(target) << "the job's own file"; }
  ::unlink(link.c_str());
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  CHECK_THROWS_WITH(write_trace({}, link), Catch::Contains("merge: '" + link + "' is a symbolic link"));
  std::ifstream in(target);
  CHECK(std::string((std::istreambuf_iterator<char>(in)), {}) == "the job's own file");
  ::unlink(link.c_str());
  ::unlink(target.c_str());
}

TEST_CASE("merge: a row group per rank, the same row per tensor in every group") {
  std::vector<TraceFile> traces;
  for (int rank : {1, 0}) {  // given out of order, and each names its tensors in its own order
    const std::string path = temp_path("merge_in" + std::to_string(rank));
    hvd::Timeline t;
    t.start(path, rank, true);
    t.mark_cycle_start();
    const std::vector<std::string> names =
        rank == 0 ? std::vector<std::string>{"a", "b"} : std::vector<std::string>{"b", "a"};
    for (const auto& n : names) {
      t.negotiate_start(n, "ALLREDUCE");
      t.negotiate_rank_ready(n, rank);
      t.negotiate_end(n);
      t.start_op(n, "ALLREDUCE", {});
      t.end_op(n, {});
    }
    t.stop();
    traces.push_back(read_trace_file(path));
    ::unlink(path.c_str());
  }
  const std::string out = temp_path("merged");
  write_trace(merge_traces(traces), out);
  const TraceFile merged = read_trace_file(out);
  const CheckResult r = check_trace(merged);
  INFO(r.message);
  REQUIRE(r.ok);
  // Rank r is pid r + 1; tid 1 is its runtime row; tensor rows are numbered from 2 by first
  // appearance over the inputs: rank 1's file came first.
  const std::vector<std::string> op = {"B NEGOTIATE_ALLREDUCE", "B READY 0", "E READY 0",
                                       "E NEGOTIATE_ALLREDUCE", "B ALLREDUCE", "E ALLREDUCE"};
  std::vector<std::string> op1 = op;
  op1[1] = "B READY 1";
  op1[2] = "E READY 1";
  CHECK(row_sequence(merged, 1, 2) == op);   // rank 0, tensor b
  CHECK(row_sequence(merged, 1, 3) == op);   // rank 0, tensor a
  CHECK(row_sequence(merged, 2, 2) == op1);  // rank 1, tensor b
  CHECK(row_sequence(merged, 2, 1) == std::vector<std::string>{"i CYCLE_START", "B CYCLE", "E CYCLE"});
  for (const auto& e : merged.events) {
    CHECK(e.find("pid")->as_number() >= 1);
    CHECK(e.find("tid")->as_number() >= 1);
  }
  const TraceSummary s = summarize_trace(merged);
  CHECK(s.tensors.size() == 2);
  CHECK(s.tensors.at("a").ops.count == 2);  // one per rank
  CHECK(s.cycles == 2);  // one per rank: its slice and its instant mark one cycle
  for (const auto& e : merged.events) {
    if (string_field(e, "name") == "CYCLE_START") CHECK(string_field(e, "s") == "p");  // per rank
  }
  std::size_t groups = 0;
  for (const auto& e : merged.events) {
    if (string_field(e, "name") == "process_name") {
      ++groups;
      CHECK(arg_text(e, "name") ==
            "rank " + std::to_string(static_cast<int>(e.find("pid")->as_number()) - 1));
    }
  }
  CHECK(groups == 2);
  traces[1].rank = 1;
  CHECK_THROWS_WITH(merge_traces(traces), Catch::Contains("records rank 1, which another input"));
  ::unlink(out.c_str());
}

// What horovodcpp wrote before complete events: B/E pairs with unnamed ends, ready and cycle
// instants. Rank 0 of two; a tensor negotiated and reduced twice.
const char* kOldFormat = R"([
{"name":"hvd_timeline","ph":"M","pid":1,"tid":1,"args":{"rank":0,"start_wall_us":1000,"format":"horovodcpp-timeline-1"}},
{"name":"process_name","ph":"M","pid":1,"tid":1,"args":{"name":"rank 0"}},
{"name":"CYCLE_START","ph":"i","ts":1,"pid":1,"tid":1,"s":"g"},
{"name":"process_name","ph":"M","pid":2,"tid":2,"args":{"name":"grad"}},
{"name":"NEGOTIATE_ALLREDUCE","ph":"B","ts":2,"pid":2,"tid":2},
{"name":"0","ph":"i","ts":2,"pid":2,"tid":2,"s":"t","args":{"rank":0}},
{"name":"1","ph":"i","ts":4,"pid":2,"tid":2,"s":"t","args":{"rank":1}},
{"ph":"E","ts":5,"pid":2,"tid":2},
{"name":"ALLREDUCE","ph":"B","ts":5,"pid":2,"tid":2,"args":{"fused_with":"2 tensors"}},
{"name":"MPI_ALLREDUCE","ph":"B","ts":6,"pid":2,"tid":2},
{"ph":"E","ts":9,"pid":2,"tid":2},
{"ph":"E","ts":10,"pid":2,"tid":2,"args":{"bytes":64}},
{"name":"CYCLE_START","ph":"i","ts":11,"pid":1,"tid":1,"s":"g"},
{"name":"NEGOTIATE_ALLREDUCE","ph":"B","ts":12,"pid":2,"tid":2},
{"ph":"E","ts":14,"pid":2,"tid":2},
{"name":"ALLREDUCE","ph":"B","ts":14,"pid":2,"tid":2},
{"name":"MPI_ALLREDUCE","ph":"B","ts":15,"pid":2,"tid":2},
{"ph":"E","ts":17.5,"pid":2,"tid":2},
{"ph":"E","ts":18,"pid":2,"tid":2,"args":{"bytes":64}}
])";

TEST_CASE("an older file (unnamed ends, instants) reads the same, and merge makes it complete") {
  const std::string path = temp_path("old_format");
  write_text(path, kOldFormat);
  const TraceFile old = read_trace_file(path);
  const CheckResult check = check_trace(old);
  REQUIRE(check.ok);
  REQUIRE(check.warnings.size() == 1);
  CHECK_THAT(check.warnings[0], Catch::Contains("6 end event(s) without a name"));
  const TraceSummary before = summarize_trace(old);
  CHECK(before.cycles == 2);
  CHECK(before.spans.at("MPI_ALLREDUCE").count == 2);
  CHECK(before.spans.at("MPI_ALLREDUCE").total_us == Approx(5.5));
  CHECK(before.tensors.at("grad").negotiation.total_us == Approx(5));

  const std::string out = temp_path("old_format_merged");
  auto [status, output] = run_tool("merge " + path + " -o " + out);
  REQUIRE(status == 0);
  const TraceFile merged = read_trace_file(out);
  const CheckResult merged_check = check_trace(merged);
  INFO(merged_check.message);
  REQUIRE(merged_check.ok);
  CHECK(merged_check.warnings.empty());  // no unnamed ends left
  std::map<std::string, int> phases;
  for (const auto& e : merged.events) ++phases[string_field(e, "ph")];
  CHECK(phases["B"] == 0);
  CHECK(phases["E"] == 0);
  CHECK(phases["X"] == 6);
  // The ALLREDUCE keeps its begin's args and gains its end's.
  const JsonValue* op = find_begin(merged, merged_pid(0), "ALLREDUCE");
  REQUIRE(op != nullptr);
  CHECK(op->find("dur")->as_number() == 5);
  CHECK(arg_text(*op, "fused_with") == "2 tensors");
  CHECK(arg_text(*op, "bytes") == "64");
  const TraceSummary after = summarize_trace(merged);
  CHECK(after.cycles == 2);
  CHECK(after.spans.at("MPI_ALLREDUCE").total_us == Approx(5.5));
  CHECK(after.tensors.at("grad").negotiation.total_us == Approx(5));
  CHECK(after.fused_ops == before.fused_ops);

  // A torn file (cut inside an event, as kill -9 in a write leaves it): merge repairs it into
  // strict JSON; the span that was open at the cut stays a begin event.
  const std::string text = kOldFormat;
  write_text(path, text.substr(0, text.find(R"({"ph":"E","ts":17.5)") + 10));
  auto [torn_status, torn_output] = run_tool("merge " + path + " -o " + out);
  CHECK(torn_status == 0);
  CHECK_THAT(torn_output, Catch::Contains("ends inside event"));
  const JsonValue repaired = parse_json(file_text(out));  // strict: throws if not valid JSON
  CHECK(repaired.items().size() > 5);
  const TraceFile torn = read_trace_file(out);
  CHECK(check_trace(torn).ok);
  CHECK(summarize_trace(torn).open_spans == 2);  // ALLREDUCE and MPI_ALLREDUCE of step 2
  ::unlink(path.c_str());
  ::unlink(out.c_str());
}
