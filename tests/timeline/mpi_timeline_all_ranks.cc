// Every rank records (HOROVOD_TIMELINE_ALL_RANKS=1 from ctest) while the last rank is a
// deliberate straggler. Rank 0 then merges the PATH.rankN files -- through the library and
// through the hvd-timeline tool -- and checks a row group per rank, the same tensor rows in each,
// and that the straggler is what the trace shows: last ready most often, shortest negotiations.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
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

std::string rank_file(int rank) {
  const char* path = std::getenv("HOROVOD_TIMELINE");
  REQUIRE(path != nullptr);
  return std::string(path) + ".rank" + std::to_string(rank);
}

// Total NEGOTIATE_ALLREDUCE time of one rank's group in a merged trace, in microseconds.
double negotiation_us(const TraceFile& merged, int rank) {
  double total = 0;
  std::map<double, std::vector<double>> open;  // tid -> begin timestamps
  for (const auto& e : merged.events) {
    if (!e.find("pid") || e.find("pid")->as_number() != rank || !e.find("ts")) continue;
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

}  // namespace

TEST_CASE("all ranks record while the last rank straggles") {
  const int straggler = hvd::size() - 1;
  for (int step = 0; step < kSteps; ++step) {
    auto t = hvd::HostTensor::allocate(hvd::DataType::Float32, {16});
    for (int i = 0; i < 16; ++i) t->data_as<float>()[i] = static_cast<float>(hvd::rank() + 1);
    if (hvd::rank() == straggler) std::this_thread::sleep_for(kStraggle);
    hvd::allreduce_async(t, t, {hvd::ReduceOp::Sum, "step" + std::to_string(step)}).wait();
    const int n = hvd::size();
    REQUIRE(t->data_as<float>()[15] == static_cast<float>(n * (n + 1) / 2));
  }
  hvd::barrier();
  hvd::stop_timeline();
  hvd::barrier();
  const TraceFile own = read_trace_file(rank_file(hvd::rank()));
  CHECK(check_trace(own).ok);
  CHECK(own.rank == hvd::rank());
  for (int step = 0; step < kSteps; ++step) {
    CHECK(row_pid(own, "step" + std::to_string(step)) > 0);
  }
}

TEST_CASE("rank 0 merges the per-rank files into one trace with a group per rank") {
  if (hvd::rank() != 0) return;
  const int n = hvd::size();
  const int straggler = n - 1;
  std::vector<TraceFile> traces;
  std::string args;
  for (int r = n - 1; r >= 0; --r) {  // any order: ranks come from the files
    traces.push_back(read_trace_file(rank_file(r)));
    args += " " + rank_file(r);
  }
  const std::string merged_path = rank_file(0) + ".merged.json";
  write_trace(merge_traces(traces), merged_path);
  const TraceFile merged = read_trace_file(merged_path);
  const CheckResult check = check_trace(merged);
  INFO(check.message);
  REQUIRE(check.ok);

  std::set<int> groups;
  std::map<std::string, std::set<double>> tensor_tids;  // each tensor: one row number everywhere
  for (const auto& e : merged.events) {
    if (string_field(e, "name") == "process_name") {
      const int pid = static_cast<int>(e.find("pid")->as_number());
      CHECK(arg_text(e, "name") == "rank " + std::to_string(pid));
      groups.insert(pid);
    }
    if (string_field(e, "name") == "thread_name") {
      tensor_tids[arg_text(e, "name")].insert(e.find("tid")->as_number());
    }
  }
  CHECK(groups.size() == static_cast<std::size_t>(n));
  for (int step = 0; step < kSteps; ++step) {
    const std::string name = "step" + std::to_string(step);
    REQUIRE(tensor_tids.count(name) == 1);
    CHECK(tensor_tids[name].size() == 1);
    const int tid = static_cast<int>(*tensor_tids[name].begin());
    for (int r = 0; r < n; ++r) {
      INFO(name << " on rank " << r);
      // Ready instants lie inside the negotiation span (the coordinator's opens at the first
      // report, even when its own request comes later).
      std::vector<std::string> spans;
      std::size_t ready = 0;
      bool negotiating = false;
      for (const auto& e : row_sequence(merged, r, tid)) {
        if (e[0] == 'i') {
          ++ready;
          CHECK(negotiating);
        } else {
          spans.push_back(e);
          negotiating = e == "B NEGOTIATE_ALLREDUCE";
        }
      }
      CHECK(spans == std::vector<std::string>{"B NEGOTIATE_ALLREDUCE", "E NEGOTIATE_ALLREDUCE",
                                              "B ALLREDUCE", "B MPI_ALLREDUCE", "E MPI_ALLREDUCE",
                                              "E ALLREDUCE"});
      CHECK(ready == (r == 0 ? static_cast<std::size_t>(n) : 1u));  // coordinator: everyone
    }
  }

  // The coordinator heard the straggler last; the straggler waited least in negotiation.
  const TraceSummary coordinator = summarize_trace(traces.back());  // rank 0's own file
  REQUIRE(coordinator.ranked_negotiations >= static_cast<std::size_t>(kSteps));
  int most = -1;
  std::size_t most_count = 0;
  for (const auto& [rank, count] : coordinator.last_ready) {
    if (count > most_count) most = rank, most_count = count;
  }
  CHECK(most == straggler);
  CHECK(negotiation_us(merged, straggler) < negotiation_us(merged, 0));

  // The same through the command-line tool.
  const std::string tool = HVD_TIMELINE_TOOL;
  const std::string cli_out = rank_file(0) + ".cli-merged.json";
  CHECK(std::system((tool + " merge" + args + " -o " + cli_out + " > /dev/null").c_str()) == 0);
  CHECK(std::system((tool + " check " + cli_out + " > /dev/null").c_str()) == 0);
  CHECK(read_trace_file(cli_out).events.size() == merged.events.size());
  CHECK(std::system((tool + " summary " + rank_file(0) + " | grep -q 'most often last: rank " +
                     std::to_string(straggler) + "'")
                        .c_str()) == 0);
  for (int r = 0; r < n; ++r) ::unlink(rank_file(r).c_str());
  ::unlink(merged_path.c_str());
  ::unlink(cli_out.c_str());
}

int main(int argc, char** argv) { return run_mpi_catch_session(argc, argv); }
