// Logging as users see it: run with HOROVOD_LOG_LEVEL=debug (lines per busy cycle, each with
// the rank and, unless HOROVOD_LOG_HIDE_TIME=1, the time) and HOROVOD_LOG_LEVEL=error (neither
// debug lines nor warnings).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "captured_stderr.h"
#include "test_support.h"

using namespace hvd;
using hvd::test::CapturedStderr;
using hvd::test::count_occurrences;

TEST_CASE("HOROVOD_LOG_LEVEL selects the lines and every line names its rank", "[logging]") {
  const char* raw = std::getenv("HOROVOD_LOG_LEVEL");
  const std::string level = raw ? raw : "";
  REQUIRE((level == "debug" || level == "error"));
  const std::string prefix = "[horovodcpp rank " + std::to_string(hvd::rank()) + "]";
  CapturedStderr captured;
  for (int step = 0; step < 3; ++step) {
    auto t = test::filled(DataType::Float32, {8}, [](std::int64_t) { return 1; });
    allreduce_async(t, t, {ReduceOp::Sum, "logged"}).wait();
    REQUIRE(test::read_as_double(*t, 7) == hvd::size());
  }
  const std::string err = captured.text();
  const int debug_lines = count_occurrences(err, "[debug] cycle ");
  if (level == "debug") {
    CHECK(debug_lines >= 3);  // one busy cycle per allreduce at least
    CHECK(count_occurrences(err, prefix + " [debug] cycle ") == debug_lines);
    // "[12:34:56.789] [horovodcpp rank 0] ..." or, with the time hidden, the line starts at the rank.
    const char* hide = std::getenv("HOROVOD_LOG_HIDE_TIME");
    const bool hidden = hide != nullptr && std::string(hide) == "1";
    CHECK(count_occurrences(err, "] " + prefix + " [debug] cycle ") == (hidden ? 0 : debug_lines));
    CHECK(count_occurrences(err, "\n" + prefix + " [debug] cycle ") >= (hidden ? debug_lines - 1 : 0));
    CHECK_THAT(err, Catch::Contains("ALLREDUCE[1 tensor(s), 32 B]") && Catch::Contains("2 cache hit(s)"));
  } else {
    CHECK(debug_lines == 0);
    CHECK(count_occurrences(err, "[warning]") == 0);
  }
}
