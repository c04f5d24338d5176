// hvd::start_timeline / hvd::stop_timeline in the middle of a run (HOROVOD_TIMELINE=DYNAMIC,
// Horovod's "no file until start_timeline"): rank 0 records just the steps between them. The file passes `check`, holds those tensors and no
// others, has CYCLE slices (and as many CYCLE_START instants) only for a recording started with
// mark_cycles, and stays as it was once stopped while the run goes on.
#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "mpi_test_main.h"
#include "timeline/trace_check.h"
#include "timeline/trace_summary.h"
#include "timeline_test_util.h"

using namespace hvd::timeline;
using namespace hvd::timeline::test;

namespace {

std::string path_of(const std::string& stem) {
  const char* dir = std::getenv("HOROVOD_TIMELINE_DIR");
  REQUIRE(dir != nullptr);
  return std::string(dir) + "/" + stem + ".json";
}

void step(const std::string& name) {
  auto t = hvd::HostTensor::allocate(hvd::DataType::Float32, {8});
  for (int i = 0; i < 8; ++i) t->data_as<float>()[i] = static_cast<float>(hvd::rank() + 1);
  hvd::allreduce_async(t, t, {hvd::ReduceOp::Sum, name}).wait();
  const int n = hvd::size();
  REQUIRE(t->data_as<float>()[7] == static_cast<float>(n * (n + 1) / 2));
}

long file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<long>(st.st_size) : -1;
}

// The CYCLE slices: how many, the latest one's start and the latest time of any event.
std::size_t cycle_marks(const TraceFile& trace, double* last_mark, double* last_event) {
  std::size_t marks = 0;
  for (const auto& e : trace.events) {
    const auto ts = number_field(e, "ts");
    if (!ts) continue;
    *last_event = std::max(*last_event, *ts);
    if (string_field(e, "name") == "CYCLE") {
      ++marks;
      *last_mark = std::max(*last_mark, *ts);
    }
  }
  return marks;
}

std::size_t cycle_instants(const TraceFile& trace) {
  std::size_t n = 0;
  for (const auto& e : trace.events) n += string_field(e, "name") == "CYCLE_START";
  return n;
}

}  // namespace

TEST_CASE("a recording started and stopped at run time holds just those steps") {
  const std::string marked = path_of("runtime_start_marked");
  step("rt.before");
  hvd::start_timeline(marked, /*mark_cycles=*/true);
  for (int i = 0; i < 3; ++i) step("rt.during" + std::to_string(i));
  hvd::stop_timeline();
  const long size_at_stop = file_size(marked);
  for (int i = 0; i < 3; ++i) step("rt.after" + std::to_string(i));
  hvd::barrier();
  if (hvd::rank() != 0) return;
  CHECK(file_size(marked) == size_at_stop);  // nothing written once stopped
  const TraceFile trace = read_trace_file(marked);
  const CheckResult check = check_trace(trace);
  INFO(check.message);
  REQUIRE(check.ok);
  CHECK(check.warnings.empty());
  CHECK(trace.complete);
  for (int i = 0; i < 3; ++i) CHECK(row_pid(trace, "rt.during" + std::to_string(i)) > 1);
  CHECK(row_pid(trace, "rt.before") == -1);
  CHECK(row_pid(trace, "rt.after0") == -1);
  double last_mark = -1, last_event = -1;
  const std::size_t cycles = cycle_marks(trace, &last_mark, &last_event);
  CHECK(cycles > 0);
  CHECK(cycle_instants(trace) == cycles);  // stop ends the last slice: one of each per cycle
  CHECK(last_mark >= 0);
  CHECK(last_mark <= last_event);
  CHECK(run_tool("check " + marked).first == 0);
  ::unlink(marked.c_str());
}

TEST_CASE("HOROVOD_TIMELINE=DYNAMIC names no file: nothing is written before start_timeline") {
  const char* setting = std::getenv("HOROVOD_TIMELINE");
  REQUIRE(setting != nullptr);
  REQUIRE(std::string(setting) == "DYNAMIC");
  step("rt.dynamic");
  CHECK(file_size("DYNAMIC") == -1);  // in the working directory, where a path would have gone
}

TEST_CASE("a recording started without mark_cycles has no cycle marks") {
  const std::string plain = path_of("runtime_start_plain");
  hvd::start_timeline(plain, /*mark_cycles=*/false);
  for (int i = 0; i < 3; ++i) step("rt.plain" + std::to_string(i));
  hvd::stop_timeline();
  hvd::barrier();
  if (hvd::rank() != 0) return;
  const TraceFile trace = read_trace_file(plain);
  REQUIRE(check_trace(trace).ok);
  double last_mark = -1, last_event = -1;
  CHECK(cycle_marks(trace, &last_mark, &last_event) == 0);
  CHECK(cycle_instants(trace) == 0);
  CHECK(summarize_trace(trace).tensors.count("rt.plain2") == 1);
  CHECK(last_event > 0);
  ::unlink(plain.c_str());
}

int main(int argc, char** argv) { return run_mpi_catch_session(argc, argv); }
