// Every rank records (HOROVOD_TIMELINE_ALL_RANKS=1 from ctest) while a middle rank -- not the
// last, whom the coordinator's gather order would blame anyway -- is a deliberate straggler.
// Rank 0 then merges the PATH.rankN files, through the library and through the hvd-timeline
// tool, and checks a row group per rank, the same tensor rows in each, and that the straggler is
// what the merged trace shows: last ready in every straggling step, shortest negotiations. A
// second recording without a straggler is the control: no rank may be "last" in most of it.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "mpi_test_main.h"
#include "timeline/trace_check.h"
#include "timeline/trace_merge.h"
#include "timeline/trace_summary.h"
#include "timeline_test_util.h"

using namespace hvd::timeline;
using namespace hvd::timeline::test;

namespace {

constexpr int kSteps = 5;
constexpr auto kStraggle = std::chrono::milliseconds(40);
constexpr int kControlSteps = 60;

int straggler() { return (hvd::size() - 1) / 2; }  // np 2: rank 0; np 4: rank 1

std::string base_path() {
  const char* path = std::getenv("HOROVOD_TIMELINE");
  REQUIRE(path != nullptr);
  return path;
}
std::string rank_file(const std::string& base, int rank) {
  return base + ".rank" + std::to_string(rank);
}

void allreduce_step(const std::string& name) {
  auto t = hvd::HostTensor::allocate(hvd::DataType::Float32, {16});
  for (int i = 0; i < 16; ++i) t->data_as<float>()[i] = static_cast<float>(hvd::rank() + 1);
  hvd::allreduce_async(t, t, {hvd::ReduceOp::Sum, name}).wait();
  const int n = hvd::size();
  REQUIRE(t->data_as<float>()[15] == static_cast<float>(n * (n + 1) / 2));
}

// Rank 0 merges every rank's file of one recording (given out of order: ranks come from the
// files) and reads the merged trace back.
TraceFile merge_recording(const std::string& base) {
  std::vector<TraceFile> traces;
  for (int r = hvd::size() - 1; r >= 0; --r) traces.push_back(read_trace_file(rank_file(base, r)));
  const std::string merged_path = base + ".merged.json";
  write_trace(merge_traces(traces), merged_path);
  TraceFile merged = read_trace_file(merged_path);
  const CheckResult check = check_trace(merged);
  INFO(check.message);
  REQUIRE(check.ok);
  return merged;
}

// Total NEGOTIATE_ALLREDUCE time of one rank's group in a merged trace, in microseconds.
double negotiation_us(const TraceFile& merged, int rank) {
  double total = 0;
  std::map<double, std::vector<double>> open;  // tid -> begin timestamps
  for (const auto& e : nested_events(merged.events)) {
    if (e.find("pid")->as_number() != merged_pid(rank) || !e.find("ts")) continue;
    const double tid = e.find("tid")->as_number();
    const std::string ph = string_field(e, "ph");
    if (ph == "B")
      open[tid].push_back(
          string_field(e, "name") == "NEGOTIATE_ALLREDUCE" ? e.find("ts")->as_number() : -1);
    if (ph == "E" && !open[tid].empty()) {
      if (open[tid].back() >= 0) total += e.find("ts")->as_number() - open[tid].back();
      open[tid].pop_back();
    }
  }
  return total;
}

// tensor name -> the tids its rows have in the merged trace
std::map<std::string, std::set<double>> tensor_tids(const TraceFile& merged, std::set<int>* groups) {
  std::map<std::string, std::set<double>> tids;
  for (const auto& e : merged.events) {
    if (string_field(e, "name") == "process_name") {
      const int pid = static_cast<int>(e.find("pid")->as_number());
      CHECK(arg_text(e, "name") == "rank " + std::to_string(pid - 1));
      groups->insert(pid);
    }
    if (string_field(e, "name") == "thread_name") {
      tids[arg_text(e, "name")].insert(e.find("tid")->as_number());
    }
  }
  return tids;
}

std::optional<TraceFile>& straggling_trace() {
  static std::optional<TraceFile> merged;
  return merged;
}

}  // namespace

TEST_CASE("all ranks record while a middle rank straggles") {
  for (int step = 0; step < kSteps; ++step) {
    if (hvd::rank() == straggler()) std::this_thread::sleep_for(kStraggle);
    allreduce_step("step" + std::to_string(step));
  }
  hvd::barrier();
  hvd::stop_timeline();
  hvd::barrier();
  const TraceFile own = read_trace_file(rank_file(base_path(), hvd::rank()));
  CHECK(check_trace(own).ok);
  CHECK(own.rank == hvd::rank());
  for (int step = 0; step < kSteps; ++step) {
    CHECK(row_pid(own, "step" + std::to_string(step)) > 1);
  }
}

TEST_CASE("rank 0 merges the files into a group per rank, one row per tensor") {
  if (hvd::rank() != 0) return;
  straggling_trace() = merge_recording(base_path());
  const TraceFile& merged = *straggling_trace();
  std::set<int> groups;
  auto tids = tensor_tids(merged, &groups);
  CHECK(groups.size() == static_cast<std::size_t>(hvd::size()));
  for (int step = 0; step < kSteps; ++step) {
    const std::string name = "step" + std::to_string(step);
    REQUIRE(tids.count(name) == 1);
    CHECK(tids[name].size() == 1);  // the same row number in every group
    const int tid = static_cast<int>(*tids[name].begin());
    CHECK(tid >= 2);
    for (int r = 0; r < hvd::size(); ++r) {
      INFO(name << " on rank " << r);
      std::vector<std::string> spans;
      std::size_t ready = 0;
      bool negotiating = false;
      for (const auto& e : row_sequence(merged, merged_pid(r), tid)) {
        if (e.compare(1, 7, " READY ") == 0) {
          ready += e[0] == 'B';
          CHECK(negotiating);  // READY slices lie inside the negotiation span
        } else {
          spans.push_back(e);
          negotiating = e == "B NEGOTIATE_ALLREDUCE";
        }
      }
      CHECK(spans == std::vector<std::string>{"B NEGOTIATE_ALLREDUCE", "E NEGOTIATE_ALLREDUCE",
                                              "B ALLREDUCE", "B QUEUE", "E QUEUE",
                                              "B MPI_ALLREDUCE", "E MPI_ALLREDUCE", "E ALLREDUCE"});
      CHECK(ready == (r == 0 ? static_cast<std::size_t>(hvd::size()) : 1u));  // coordinator: all
    }
  }
}

TEST_CASE("the merged trace names the straggler; its own file alone does not pretend to") {
  if (hvd::rank() != 0) return;
  REQUIRE(straggling_trace().has_value());
  const LastReadyStats r = summarize_trace(*straggling_trace()).last_ready;
  REQUIRE(r.merged);
  CHECK(r.negotiations >= static_cast<std::size_t>(kSteps));  // the steps, and the barrier
  CHECK(r.last.count(straggler()) == 1);
  CHECK(r.last.at(straggler()) >= static_cast<std::size_t>(kSteps));
  CHECK(negotiation_us(*straggling_trace(), straggler()) <
        negotiation_us(*straggling_trace(), straggler() == 0 ? 1 : 0));
  const TraceFile own0 = read_trace_file(rank_file(base_path(), 0));
  CHECK_FALSE(summarize_trace(own0).last_ready.merged);

  // The same through the command-line tool.
  const std::string base = base_path();
  std::string inputs;
  for (int r = 0; r < hvd::size(); ++r) inputs += " " + rank_file(base, r);
  const std::string cli_out = base + ".cli-merged.json";
  CHECK(run_tool("merge" + inputs + " -o " + cli_out).first == 0);
  CHECK(run_tool("check " + cli_out).first == 0);
  CHECK(read_trace_file(cli_out).events.size() == straggling_trace()->events.size());
  auto [status, output] = run_tool("summary " + cli_out);
  CHECK(status == 0);
  CHECK_THAT(output,
             Catch::Contains("straggler (most time lost): rank " + std::to_string(straggler())));
  CHECK_THAT(run_tool("summary " + rank_file(base, 0)).second,
             Catch::Contains("not computed for a single-rank file"));
  ::unlink(cli_out.c_str());
}

TEST_CASE("control: without a straggler no rank is last in most negotiations") {
  const std::string base = base_path() + ".control";
  hvd::barrier();
  hvd::start_timeline(base, /*mark_cycles=*/true);  // ranks ready in the same cycle tie
  for (int step = 0; step < kControlSteps; ++step) allreduce_step("control");  // cached after 1
  hvd::barrier();
  hvd::stop_timeline();
  hvd::barrier();
  if (hvd::rank() != 0) return;
  const LastReadyStats r = summarize_trace(merge_recording(base)).last_ready;
  REQUIRE(r.merged);
  CHECK(r.negotiations >= static_cast<std::size_t>(kControlSteps));
  CHECK(r.by_cycle == r.negotiations);
  for (const auto& [rank, count] : r.last) {
    INFO("rank " << rank << " last in " << count << " of " << r.negotiations);
    CHECK(count <= r.negotiations * 6 / 10);
  }
  for (int rank = 0; rank < hvd::size(); ++rank) {
    ::unlink(rank_file(base, rank).c_str());
    ::unlink(rank_file(base_path(), rank).c_str());
  }
  ::unlink((base + ".merged.json").c_str());
  ::unlink((base_path() + ".merged.json").c_str());
}

int main(int argc, char** argv) { return run_mpi_catch_session(argc, argv); }
