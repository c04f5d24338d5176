// Through the real runtime (HOROVOD_TIMELINE set by ctest, so rank 0 records): allreduce unfused
// and fused, allgather, broadcast and a mismatched allreduce (an error response). Every rank
// checks its results against the closed form; rank 0 then stops the recording and checks each
// tensor's event sequence in the file with the tool's parser, and `check` on the whole file.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
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

// A row's spans without its instants, and the ranks its instants name.
Seq spans_only(const Seq& row) {
  Seq out;
  for (const auto& e : row) {
    if (e[0] != 'i') out.push_back(e);
  }
  return out;
}
std::multiset<int> ready_ranks(const Seq& row) {
  std::multiset<int> out;
  for (const auto& e : row) {
    if (e[0] == 'i') out.insert(std::stoi(e.substr(2)));
  }
  return out;
}
std::multiset<int> all_ranks() {
  std::multiset<int> out;
  for (int r = 0; r < hvd::size(); ++r) out.insert(r);
  return out;
}

// True when every ready instant lies inside the row's negotiation span.
bool instants_inside_negotiation(const Seq& row) {
  bool inside = false;
  for (const auto& e : row) {
    if (e.rfind("B NEGOTIATE_", 0) == 0) inside = true;
    if (e.rfind("E NEGOTIATE_", 0) == 0) inside = false;
    if (e[0] == 'i' && !inside) return false;
  }
  return true;
}

const char* timeline_path() {
  const char* path = std::getenv("HOROVOD_TIMELINE");
  REQUIRE(path != nullptr);
  return path;
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

TEST_CASE("rank 0's timeline holds each tensor's negotiation and op") {
  hvd::barrier();
  hvd::stop_timeline();  // rank 0: closes and completes the file; others record nothing
  hvd::barrier();
  const std::string path = timeline_path();
  if (hvd::rank() != 0) {
    CHECK(::access(path.c_str(), F_OK) == 0);  // rank 0's, shared file system
    CHECK(::access((path + ".rank" + std::to_string(hvd::rank())).c_str(), F_OK) != 0);
    return;
  }
  const TraceFile trace = read_trace_file(path);
  const CheckResult check = check_trace(trace);
  INFO(check.message);
  REQUIRE(check.ok);
  CHECK(check.warnings.empty());
  CHECK(trace.complete);
  CHECK(trace.rank == 0);
  CHECK(trace.dropped_events == 0u);

  const Seq unfused = tensor_sequence(trace, "tl.unfused");
  CHECK(spans_only(unfused) == Seq{"B NEGOTIATE_ALLREDUCE", "E NEGOTIATE_ALLREDUCE",
                                   "B ALLREDUCE", "B MPI_ALLREDUCE", "E MPI_ALLREDUCE",
                                   "E ALLREDUCE"});
  CHECK(ready_ranks(unfused) == all_ranks());  // the coordinator hears from every rank once
  CHECK(instants_inside_negotiation(unfused));
  const JsonValue* op = find_begin(trace, row_pid(trace, "tl.unfused"), "ALLREDUCE");
  REQUIRE(op != nullptr);
  CHECK(arg_text(*op, "dtype") == "float32");
  CHECK(arg_text(*op, "shape") == "[64]");
  CHECK(arg_text(*op, "bytes") == std::to_string(kN * 4));
  CHECK(arg_text(*op, "fused_with") == "<absent>");

  // A grouped allreduce names its members; find them by their rows' names.
  std::vector<std::string> fused_rows;
  for (const auto& e : trace.events) {
    if (string_field(e, "name") == "process_name" &&
        arg_text(e, "name").rfind("tl.fused", 0) == 0) {
      fused_rows.push_back(arg_text(e, "name"));
    }
  }
  REQUIRE(fused_rows.size() == 3);
  for (const auto& name : fused_rows) {
    INFO(name);
    const Seq row = tensor_sequence(trace, name);
    CHECK(spans_only(row) ==
          Seq{"B NEGOTIATE_ALLREDUCE", "E NEGOTIATE_ALLREDUCE", "B ALLREDUCE",
              "B MEMCPY_IN_FUSION_BUFFER", "E MEMCPY_IN_FUSION_BUFFER", "B MPI_ALLREDUCE",
              "E MPI_ALLREDUCE", "B MEMCPY_OUT_FUSION_BUFFER", "E MEMCPY_OUT_FUSION_BUFFER",
              "E ALLREDUCE"});
    CHECK(ready_ranks(row) == all_ranks());
    CHECK(instants_inside_negotiation(row));
    const JsonValue* begin = find_begin(trace, row_pid(trace, name), "ALLREDUCE");
    REQUIRE(begin != nullptr);
    CHECK_THAT(arg_text(*begin, "fused_with"),
               Catch::StartsWith("3 tensors, " + std::to_string(3 * kN * 4) + " bytes"));
  }

  CHECK(spans_only(tensor_sequence(trace, "tl.gather")) ==
        Seq{"B NEGOTIATE_ALLGATHER", "E NEGOTIATE_ALLGATHER", "B ALLGATHER", "B MPI_ALLGATHER",
            "E MPI_ALLGATHER", "E ALLGATHER"});
  CHECK(spans_only(tensor_sequence(trace, "tl.bcast")) ==
        Seq{"B NEGOTIATE_BROADCAST", "E NEGOTIATE_BROADCAST", "B BROADCAST", "B MPI_BCAST",
            "E MPI_BCAST", "E BROADCAST"});

  const Seq mismatch = tensor_sequence(trace, "tl.mismatch");
  CHECK(spans_only(mismatch) ==
        Seq{"B NEGOTIATE_ALLREDUCE", "E NEGOTIATE_ALLREDUCE", "B ERROR", "E ERROR"});
  const JsonValue* error = find_begin(trace, row_pid(trace, "tl.mismatch"), "ERROR");
  REQUIRE(error != nullptr);
  CHECK_THAT(arg_text(*error, "error"), Catch::Contains("Mismatched shapes"));

  const TraceSummary s = summarize_trace(trace);
  CHECK(s.errors == 1);
  CHECK(s.fused_responses == 1);
  CHECK(s.fused_ops == 3);
  CHECK(s.cycles > 0);  // HOROVOD_TIMELINE_MARK_CYCLES=1
  std::size_t last = 0;
  for (const auto& entry : s.last_ready) last += entry.second;
  CHECK(last == s.ranked_negotiations);
  CHECK(s.ranked_negotiations >= 7);  // every slow-path negotiation above hears all ranks
}

int main(int argc, char** argv) { return run_mpi_catch_session(argc, argv); }
