// Through the real runtime (HOROVOD_TIMELINE set by ctest, so rank 0 records): allreduce unfused
// and fused, allgather, broadcast, a mismatched allreduce (an error response) and two responses
// in one cycle. Every rank checks its results against the closed form; rank 0 then stops the
// recording and checks `check` on the whole file and each tensor's event sequence, QUEUE
// included, with the tool's parser.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>

#include "mpi_test_main.h"
#include "timeline/trace_check.h"
#include "timeline/trace_summary.h"
#include "timeline_test_util.h"

using namespace hvd::timeline;
using namespace hvd::timeline::test;
using Seq = std::vector<std::string>;

namespace {

constexpr std::int64_t kN = 64;

std::shared_ptr<hvd::HostTensor> filled(std::int64_t n, float value) {
  auto t = hvd::HostTensor::allocate(hvd::DataType::Float32, {n});
  for (std::int64_t i = 0; i < n; ++i) t->data_as<float>()[i] = value * static_cast<float>(i);
  return t;
}

// sum over ranks r of (r + 1) * i
float expected_sum(std::int64_t i) {
  const int n = hvd::size();
  return static_cast<float>(n * (n + 1) / 2) * static_cast<float>(i);
}

bool is_ready(const std::string& e) { return e.compare(1, 7, " READY ") == 0; }

// A row's spans without its READY slices, and the ranks those name.
Seq spans_only(const Seq& row) {
  Seq out;
  for (const auto& e : row) {
    if (!is_ready(e)) out.push_back(e);
  }
  return out;
}
std::multiset<int> ready_ranks(const Seq& row) {
  std::multiset<int> out;
  for (const auto& e : row) {
    if (e[0] == 'B' && is_ready(e)) out.insert(std::stoi(e.substr(8)));
  }
  return out;
}
std::multiset<int> all_ranks() {
  std::multiset<int> out;
  for (int r = 0; r < hvd::size(); ++r) out.insert(r);
  return out;
}

// True when every READY slice lies inside the row's negotiation span.
bool instants_inside_negotiation(const Seq& row) {
  bool inside = false;
  for (const auto& e : row) {
    if (e.rfind("B NEGOTIATE_", 0) == 0) inside = true;
    if (e.rfind("E NEGOTIATE_", 0) == 0) inside = false;
    if (is_ready(e) && !inside) return false;
  }
  return true;
}

const char* timeline_path() {
  const char* path = std::getenv("HOROVOD_TIMELINE");
  REQUIRE(path != nullptr);
  return path;
}

// Rank 0's file, read once the recording stopped (by the test case that stops it).
std::optional<TraceFile>& recorded() {
  static std::optional<TraceFile> trace;
  return trace;
}
const TraceFile& trace_or_fail() {
  REQUIRE(recorded().has_value());
  return *recorded();
}

std::vector<std::string> rows_starting_with(const TraceFile& trace, const std::string& prefix) {
  std::vector<std::string> rows;
  for (const auto& e : trace.events) {
    if (string_field(e, "name") == "process_name" && arg_text(e, "name").rfind(prefix, 0) == 0) {
      rows.push_back(arg_text(e, "name"));
    }
  }
  return rows;
}

// Each span's (begin, end) timestamps on a row (the last of each name).
using SpanTimes = std::map<std::string, std::pair<double, double>>;
SpanTimes span_times(const TraceFile& trace, int pid) {
  SpanTimes out;
  std::vector<std::pair<std::string, double>> open;
  for (const auto& e : nested_events(trace.events)) {
    const std::string ph = string_field(e, "ph");
    if (e.find("pid")->as_number() != pid || (ph != "B" && ph != "E")) continue;
    const double ts = e.find("ts")->as_number();
    if (ph == "B") {
      open.emplace_back(string_field(e, "name"), ts);
    } else if (!open.empty()) {
      out[open.back().first] = {open.back().second, ts};
      open.pop_back();
    }
  }
  return out;
}

}  // namespace

TEST_CASE("collectives produce correct results while rank 0 records") {
  const float scale = static_cast<float>(hvd::rank() + 1);
  auto single = filled(kN, scale);
  hvd::allreduce_async(single, single, {hvd::ReduceOp::Sum, "tl.unfused"}).wait();
  for (std::int64_t i = 0; i < kN; ++i) REQUIRE(single->data_as<float>()[i] == expected_sum(i));

  std::vector<hvd::TensorPtr> group;
  for (int k = 0; k < 3; ++k) group.push_back(filled(kN, scale));
  hvd::grouped_allreduce_async(group, group, {hvd::ReduceOp::Sum, "tl.fused"}).wait();
  for (auto& t : group) {
    auto* data = static_cast<float*>(t->data());
    for (std::int64_t i = 0; i < kN; ++i) REQUIRE(data[i] == expected_sum(i));
  }

  // Rank r contributes r + 1 rows of value r.
  auto mine = hvd::HostTensor::allocate(hvd::DataType::Int32, {hvd::rank() + 1, 2});
  std::fill_n(mine->data_as<std::int32_t>(), 2 * (hvd::rank() + 1), hvd::rank());
  auto gather = hvd::allgather_async(mine, hvd::host_allocator(), {"tl.gather"});
  gather.wait();
  auto& out = gather.outputs().at(0);
  const int n = hvd::size();
  REQUIRE(out->shape() == hvd::TensorShape{n * (n + 1) / 2, 2});
  std::int64_t row = 0;
  for (int r = 0; r < n; ++r) {
    for (int k = 0; k <= r; ++k, ++row) {
      REQUIRE(static_cast<std::int32_t*>(out->data())[2 * row] == r);
    }
  }

  const int root = n - 1;
  auto b = filled(kN, hvd::rank() == root ? 7.0f : 0.0f);
  hvd::broadcast_async(b, b, {root, "tl.bcast"}).wait();
  for (std::int64_t i = 0; i < kN; ++i) REQUIRE(b->data_as<float>()[i] == 7.0f * i);
}

TEST_CASE("a mismatched allreduce fails on every rank") {
  auto bad = filled(hvd::rank() + 1, 1.0f);  // each rank a different shape
  CHECK_THROWS_WITH(hvd::allreduce_async(bad, bad, {hvd::ReduceOp::Sum, "tl.mismatch"}).wait(),
                    Catch::Contains("Mismatched shapes") && Catch::Contains("tl.mismatch"));
}

TEST_CASE("two responses of one cycle: the second waits in QUEUE while the first runs") {
  // One group, two dtypes: released together, fused into two responses of the same cycle.
  auto f = filled(kN, static_cast<float>(hvd::rank() + 1));
  auto i = hvd::HostTensor::allocate(hvd::DataType::Int32, {kN});
  std::fill_n(i->data_as<std::int32_t>(), kN, hvd::rank() + 1);
  hvd::grouped_allreduce_async({f, i}, {f, i}, {hvd::ReduceOp::Sum, "tl.cycle"}).wait();
  const int n = hvd::size();
  CHECK(f->data_as<float>()[3] == expected_sum(3));
  CHECK(i->data_as<std::int32_t>()[kN - 1] == n * (n + 1) / 2);
}

TEST_CASE("rank 0's timeline is complete and passes check") {
  hvd::barrier();
  hvd::stop_timeline();  // rank 0: closes and completes the file; others record nothing
  hvd::barrier();
  const std::string path = timeline_path();
  if (hvd::rank() != 0) {
    CHECK(::access(path.c_str(), F_OK) == 0);  // rank 0's, shared file system
    CHECK(::access((path + ".rank" + std::to_string(hvd::rank())).c_str(), F_OK) != 0);
    return;
  }
  recorded() = read_trace_file(path);
  const CheckResult check = check_trace(*recorded());
  INFO(check.message);
  REQUIRE(check.ok);
  CHECK(check.warnings.empty());
  CHECK(recorded()->complete);
  CHECK(recorded()->rank == 0);
  CHECK(recorded()->dropped_events == 0u);
}

TEST_CASE("unfused allreduce: negotiation, then the op with QUEUE and the collective") {
  if (hvd::rank() != 0) return;
  const TraceFile& trace = trace_or_fail();
  const Seq unfused = tensor_sequence(trace, "tl.unfused");
  CHECK(spans_only(unfused) == Seq{"B NEGOTIATE_ALLREDUCE", "E NEGOTIATE_ALLREDUCE",
                                   "B ALLREDUCE", "B QUEUE", "E QUEUE", "B MPI_ALLREDUCE",
                                   "E MPI_ALLREDUCE", "E ALLREDUCE"});
  CHECK(ready_ranks(unfused) == all_ranks());  // the coordinator hears from every rank once
  CHECK(instants_inside_negotiation(unfused));
  const int pid = row_pid(trace, "tl.unfused");
  CHECK(span_arg(trace, pid, "ALLREDUCE", "dtype") == "float32");
  CHECK(span_arg(trace, pid, "ALLREDUCE", "shape") == "[64]");
  CHECK(span_arg(trace, pid, "ALLREDUCE", "bytes") == std::to_string(kN * 4));
  CHECK(span_arg(trace, pid, "ALLREDUCE", "fused_with") == "<absent>");
}

TEST_CASE("fused allreduce: every member's row, with the fused response it rode in") {
  if (hvd::rank() != 0) return;
  const TraceFile& trace = trace_or_fail();
  const std::vector<std::string> fused_rows = rows_starting_with(trace, "tl.fused");
  REQUIRE(fused_rows.size() == 3);
  for (const auto& name : fused_rows) {
    INFO(name);
    const Seq row = tensor_sequence(trace, name);
    CHECK(spans_only(row) ==
          Seq{"B NEGOTIATE_ALLREDUCE", "E NEGOTIATE_ALLREDUCE", "B ALLREDUCE", "B QUEUE",
              "E QUEUE", "B MEMCPY_IN_FUSION_BUFFER", "E MEMCPY_IN_FUSION_BUFFER",
              "B MPI_ALLREDUCE", "E MPI_ALLREDUCE", "B MEMCPY_OUT_FUSION_BUFFER",
              "E MEMCPY_OUT_FUSION_BUFFER", "E ALLREDUCE"});
    CHECK(ready_ranks(row) == all_ranks());
    CHECK(instants_inside_negotiation(row));
    CHECK_THAT(span_arg(trace, row_pid(trace, name), "ALLREDUCE", "fused_with"),
               Catch::StartsWith("3 tensors, " + std::to_string(3 * kN * 4) + " bytes"));
  }
}

TEST_CASE("the cycle's second response shows its wait behind the first as QUEUE") {
  if (hvd::rank() != 0) return;
  const TraceFile& trace = trace_or_fail();
  const std::vector<std::string> rows = rows_starting_with(trace, "tl.cycle");
  REQUIRE(rows.size() == 2);
  // Both ops opened when the response list was known; the later one's QUEUE ends only after
  // the earlier one's collective ended.
  const SpanTimes a = span_times(trace, row_pid(trace, rows[0]));
  const SpanTimes b = span_times(trace, row_pid(trace, rows[1]));
  const SpanTimes& first = a.at("QUEUE").second <= b.at("QUEUE").second ? a : b;
  const SpanTimes& second = &first == &a ? b : a;
  CHECK(second.at("ALLREDUCE").first <= first.at("MPI_ALLREDUCE").first);
  CHECK(second.at("QUEUE").second >= first.at("MPI_ALLREDUCE").second);
}

TEST_CASE("allgather, broadcast and an error response") {
  if (hvd::rank() != 0) return;
  const TraceFile& trace = trace_or_fail();
  CHECK(spans_only(tensor_sequence(trace, "tl.gather")) ==
        Seq{"B NEGOTIATE_ALLGATHER", "E NEGOTIATE_ALLGATHER", "B ALLGATHER", "B QUEUE", "E QUEUE",
            "B MPI_ALLGATHER", "E MPI_ALLGATHER", "E ALLGATHER"});
  CHECK(span_arg(trace, row_pid(trace, "tl.gather"), "ALLGATHER", "shape") == "[1, 2]");  // rank 0's
  CHECK(spans_only(tensor_sequence(trace, "tl.bcast")) ==
        Seq{"B NEGOTIATE_BROADCAST", "E NEGOTIATE_BROADCAST", "B BROADCAST", "B QUEUE", "E QUEUE",
            "B MPI_BCAST", "E MPI_BCAST", "E BROADCAST"});
  const Seq mismatch = tensor_sequence(trace, "tl.mismatch");
  CHECK(spans_only(mismatch) ==
        Seq{"B NEGOTIATE_ALLREDUCE", "E NEGOTIATE_ALLREDUCE", "B ERROR", "E ERROR"});
  CHECK_THAT(span_arg(trace, row_pid(trace, "tl.mismatch"), "ERROR", "error"),
             Catch::Contains("Mismatched shapes"));
}

TEST_CASE("summary of rank 0's file") {
  if (hvd::rank() != 0) return;
  const TraceSummary s = summarize_trace(trace_or_fail());
  CHECK(s.errors == 1);
  CHECK(s.fused_responses == 1);
  CHECK(s.fused_ops == 3);
  // Every op but the error waited in QUEUE: the allreduces (1 + 3 + 2 in tl.cycle), the
  // allgather, the broadcast and the barrier before the recording stopped.
  std::size_t ops = 0;
  for (const char* op : {"ALLREDUCE", "ALLGATHER", "BROADCAST", "BARRIER"}) {
    ops += s.spans.count(op) ? s.spans.at(op).count : 0;
  }
  CHECK(ops == 9);
  CHECK(s.spans.at("QUEUE").count == ops);
  CHECK(s.cycles > 0);  // HOROVOD_TIMELINE_MARK_CYCLES=1
  CHECK_FALSE(s.last_ready.merged);  // one rank's file: "last ready" needs the merged trace
}

int main(int argc, char** argv) { return run_mpi_catch_session(argc, argv); }
