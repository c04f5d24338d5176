// What device Adasum sends across the nodes: with several ranks per node each rank carries its
// chunk only (Note [Adasum of a node's chunk]), about 1/local_size of what the whole vector
// would be. The bytes are counted here, below the library: this program defines MPI_Sendrecv
// (the call Adasum's tree exchanges with), which the dynamic linker binds the library's calls to
// ahead of libmpi's, counts, and forwards to PMPI_Sendrecv.
#include <catch2/catch.hpp>
#include <mpi.h>

#include <atomic>
#include <cstdint>

#include "tests/common/adasum_reference.h"
#include "tests/gpu/gpu_test_util.h"

namespace {
std::atomic<std::int64_t> g_sendrecv_bytes{0};
}  // namespace

extern "C" int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                            void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                            MPI_Comm comm, MPI_Status* status) {
  int type_size = 0;
  PMPI_Type_size(sendtype, &type_size);
  g_sendrecv_bytes += static_cast<std::int64_t>(sendcount) * type_size;
  return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                       comm, status);
}

using namespace hvd;

// With a local size that is not a power of two the whole vector crosses, once per node: local
// rank 0 sends it, the others nothing.
TEST_CASE("device Adasum sends each rank's chunk across the nodes, not the whole vector", "[adasum][traffic]") {
  const int nodes = cross_size(), local = local_size();
  const char* operations = std::getenv("HOROVOD_GPU_OPERATIONS");
  const bool gpu_mpi = operations != nullptr && std::string(operations) == "mpi";
  if (gpu_mpi || nodes < 2 || local < 2 || !test::power_of_two(nodes)) {
    SUCCEED("no NCCL Adasum across nodes on this job");
    return;
  }
  const bool chunked = test::power_of_two(local);
  // A multiple of 16 float32 (the fusion buffer's alignment) and of the local size: no padding.
  const std::int64_t n = std::int64_t{1} << 16;
  std::vector<double> v(n);
  for (std::int64_t i = 0; i < n; ++i) v[i] = (rank() + 1) * ((i % 5) + 1.0);
  auto t = test::DeviceTensor::allocate(DataType::Float32, {n});
  t->upload(v);
  allreduce_async(t, t, {ReduceOp::Adasum, "adasum.traffic.warmup"}).wait();  // communicators exist
  const std::int64_t before = g_sendrecv_bytes.load();
  allreduce_async(t, t, {ReduceOp::Adasum, "adasum.traffic"}).wait();
  const std::int64_t sent = g_sendrecv_bytes.load() - before;
  // Halving over log2(nodes) levels sends chunk * (1 - 1/nodes), gathering as much again; the
  // dot products add 24 bytes per exchange.
  const double whole = 2 * 4.0 * n * (1.0 - 1.0 / nodes);
  const double want = chunked ? whole / local : local_rank() == 0 ? whole : 0.0;
  INFO("rank " << rank() << " (local rank " << local_rank() << ") sent " << sent
               << " bytes through MPI_Sendrecv; expected " << want << ", the whole vector's share " << whole);
  REQUIRE(sent >= 0.95 * want);
  REQUIRE(sent <= 1.05 * want + 4096);
}
