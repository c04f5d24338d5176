// Strict JSON: what `check` must refuse although a tolerant reader would take it (a trailing
// comma, invalid UTF-8, lone surrogates, duplicate member names, numbers that are not finite
// doubles, leading zeros), each reported with the event and byte -- while a tail cut short by a
// crash is still read, as a warning, not an error.
#include <catch2/catch.hpp>

#include "timeline/trace_check.h"
#include "timeline_test_util.h"

using namespace hvd::timeline;
using namespace hvd::timeline::test;

namespace {

const std::string kMeta = R"({"name":"process_name","ph":"M","pid":1,"tid":1,"args":{"name":"w"}})";

std::string event_with(const std::string& name_json) {
  return R"({"name":)" + name_json + R"(,"ph":"B","ts":1,"pid":1,"tid":1})";
}

}  // namespace

TEST_CASE("malformed text is an error naming the event and the byte") {
  struct Case {
    const char* what;
    std::string text;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"trailing comma", "[" + kMeta + ",\n]\n", "event 1: malformed JSON: a ',' before the closing ']'"},
      {"trailing comma, spaced", "[" + kMeta + " , ]", "event 1: malformed JSON: a ',' before"},
      {"invalid UTF-8 byte", "[" + kMeta + "," + event_with("\"a\xff\"") + "]",
       "event 1: malformed JSON: invalid UTF-8 in string"},
      {"overlong UTF-8", "[" + kMeta + "," + event_with("\"\xc0\xaf\"") + "]", "invalid UTF-8"},
      {"UTF-8 surrogate", "[" + kMeta + "," + event_with("\"\xed\xa0\x80\"") + "]", "invalid UTF-8"},
      {"lone high surrogate", "[" + kMeta + "," + event_with(R"("\ud800x")") + "]",
       "event 1: malformed JSON: high surrogate without its low half"},
      {"lone low surrogate", "[" + kMeta + "," + event_with(R"("\udc00")") + "]",
       "event 1: malformed JSON: lone low surrogate"},
      {"duplicate key", "[" + kMeta + R"(,{"name":"A","ph":"B","ph":"E","ts":1,"pid":1,"tid":1}])",
       "event 1: malformed JSON: duplicate member name \"ph\""},
      {"non-finite number", "[" + kMeta + R"(,{"name":"A","ph":"B","ts":1e999,"pid":1,"tid":1}])",
       "event 1: malformed JSON: number out of range"},
      {"negative non-finite", "[" + kMeta + R"(,{"name":"A","ph":"B","ts":-2e400,"pid":1,"tid":1}])",
       "number out of range"},
      {"leading zero", "[" + kMeta + R"(,{"name":"A","ph":"B","ts":01,"pid":1,"tid":1}])",
       "leading zero in number"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    try {
      read_trace_text(c.text, "f.json");
      FAIL("accepted");
    } catch (const TraceError& e) {
      CHECK_THAT(e.what(), Catch::Contains(c.message));
      CHECK_THAT(e.what(), Catch::StartsWith("f.json: event 1: malformed JSON"));
      CHECK_THAT(e.what(), Catch::Contains("at byte"));
    }
  }
}

TEST_CASE("what strict JSON allows still reads") {
  const TraceFile ok = read_trace_text(
      "[" + kMeta + "," + event_with(R"("caf\u00e9 \ud83d\ude00 é 😀")") + R"(,{"ph":"E","ts":2e0,"pid":1,"tid":1}])",
      "f.json");
  REQUIRE(ok.events.size() == 3);
  CHECK(string_field(ok.events[1], "name") == "café \xf0\x9f\x98\x80 é 😀");
  CHECK(check_trace(ok).ok);
  // Duplicates are caught in large objects too (past the plain scan).
  std::string big = "{";
  for (int i = 0; i < 40; ++i) big += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  CHECK(parse_json(big + "\"k40\":1}").members().size() == 41);
  CHECK_THROWS_WITH(parse_json(big + "\"k37\":1}"), Catch::Contains("duplicate member name \"k37\""));
}

TEST_CASE("a tail cut short by a crash is read up to the cut, not reported as malformed") {
  const std::string events = "[" + kMeta + "," + event_with("\"A\"");
  for (const std::string& tail : {std::string(",\n"), std::string(",\n{\"name\":\"caf\xc3"),
                                  std::string(",\n{\"name\":\"A\",\"ts\":1e9"),
                                  std::string(",\n{\"name\":\"\\ud83d"), std::string("\n")}) {
    INFO(tail);
    const TraceFile cut = read_trace_text(events + tail, "f.json");
    CHECK_FALSE(cut.complete);
    CHECK(cut.events.size() == 2);
    CHECK(check_trace(cut).ok);
  }
}

TEST_CASE("hvd-timeline check: exit 1 on malformed text, 0 with a warning on a truncated tail") {
  const std::string path = temp_path("strict_cli");
  write_text(path, "[" + kMeta + "," + event_with("\"A\"") + ",\n]\n");
  auto [status, output] = run_tool("check " + path);
  CHECK(status == 1);
  CHECK_THAT(output, Catch::Contains("event 2: malformed JSON: a ',' before the closing ']'"));
  write_text(path, "[" + kMeta + "," + event_with("\"\xfe\"") + "]");
  std::tie(status, output) = run_tool("check " + path);
  CHECK(status == 1);
  CHECK_THAT(output, Catch::Contains("event 1: malformed JSON: invalid UTF-8"));
  write_text(path, "[" + kMeta + "," + event_with("\"A\"") + ",\n{\"name\":\"B\",\"ph");
  std::tie(status, output) = run_tool("check " + path);
  CHECK(status == 0);
  CHECK_THAT(output, Catch::Contains("warning: file cut short"));
  CHECK_THAT(output, Catch::Contains("ends inside event 2"));
  CHECK_THAT(output, Catch::Contains("OK: 2 events"));
  ::unlink(path.c_str());
}
