// The MPI world: initializes MPI (MPI_THREAD_MULTIPLE, unless the application already did),
// duplicates MPI_COMM_WORLD so our traffic never matches the application's, and derives the
// topology: local = MPI_Comm_split_type(SHARED), cross = ranks with the same local rank.
// The test-only variable HVD_TEST_FAKE_LOCAL_SIZE=k instead groups consecutive blocks of k
// ranks into one "node", so hierarchical code paths are testable on one machine;
// HVD_TEST_FAKE_PLACEMENT=round_robin deals the ranks to the nodes in turn instead (as
// `mpirun --map-by node`), so that world order is not node-major.
// Process sets get communicators split from the global one (create_communicator).
// Created and used on the background thread only; owned by the Runtime.
#pragma once

#include <mpi.h>

#include <memory>

#include "backends/mpi/mpi_control_channel.h"
#include "backends/mpi/mpi_liveness_channel.h"
#include "backends/mpi/mpi_types.h"
#include "core/communicator.h"
#include "core/world.h"

namespace hvd::detail {

// A group's MPI side (backend "MPI" of a Communicator): the data communicator the MPI ops use
// and the dedicated control communicator its ControlChannel runs over. Frees both when `owned`
// (process sets); the world's own are freed by MpiWorld::finalize.
class MpiGroupComm final : public BackendComm {
 public:
  MpiGroupComm(MPI_Comm data, MPI_Comm control, bool owned);
  ~MpiGroupComm() override;
  MPI_Comm data() const { return data_; }
  MpiControlChannel& control() { return *control_; }

 private:
  MPI_Comm data_;
  MPI_Comm control_comm_;
  bool owned_;
  std::unique_ptr<MpiControlChannel> control_;
};

// The MPI data communicator of a group; throws when the group has none.
MPI_Comm mpi_comm(const Communicator& group);

class MpiWorld final : public World {
 public:
  // Waits at most `start_timeout_seconds` (0: no limit) for every rank before MPI_Init.
  explicit MpiWorld(double start_timeout_seconds = 0);
  ~MpiWorld() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  int cross_rank() const override { return cross_rank_; }
  int cross_size() const override { return cross_size_; }
  bool homogeneous() const override { return homogeneous_; }
  ControlChannel& control() override { return *control_; }
  Communicator& global() override { return *global_group_; }
  Communicator& local() override { return *local_group_; }
  Communicator& cross() override { return *cross_group_; }
  Communicator* node_major() override { return homogeneous_ ? node_major_group_.get() : nullptr; }
  std::unique_ptr<Communicator> create_communicator(int id, const std::vector<int>& global_ranks) override;
  LivenessChannel& liveness() override { return *liveness_; }
  Status host_allreduce(void* buffer, std::int64_t count, DataType dtype, ReduceOp op,
                        CommScope scope) override;
  void finalize() override;
  void abandon() override { finalized_ = true; }

  // Communicators for the MPI and NCCL backends (all duplicates owned by this world).
  MPI_Comm local_comm() const { return local_; }
  MPI_Comm comm(CommScope scope) const;
  const MpiTypes& types() const { return types_; }
  // In-place sum/min/max/product (no averaging) over `comm`, issued in pieces of at most
  // kAllreducePieceBytes: Open MPI 4.1's allreduce slows down several-fold on single calls of
  // tens of MB on shared memory (docs/benchmarks.md measures it), while pieces run at full speed.
  Status allreduce_in_pieces(void* buffer, std::int64_t count, DataType dtype, ReduceOp op, MPI_Comm comm) const;
  static constexpr std::int64_t kAllreducePieceBytes = std::int64_t{4} << 20;
  // In-place Average of an integer dtype over `comm`, exact: the values are summed as int64
  // words in `wide` (grown on demand; the caller keeps it between calls). See Note [Integer
  // averages are exact] (core/integer_average.h).
  Status allreduce_integer_average(void* buffer, std::int64_t count, DataType dtype, MPI_Comm comm,
                                   std::vector<std::int64_t>& wide) const;

 private:
  bool initialized_mpi_ = false;
  bool finalized_ = false;
  MPI_Comm global_ = MPI_COMM_NULL;   // data traffic
  MPI_Comm control_comm_ = MPI_COMM_NULL;  // negotiation traffic
  MPI_Comm liveness_comm_ = MPI_COMM_NULL;  // watchdog reports
  MPI_Comm local_ = MPI_COMM_NULL;
  MPI_Comm cross_ = MPI_COMM_NULL;
  MPI_Comm node_major_ = MPI_COMM_NULL;
  MPI_Comm local_control_ = MPI_COMM_NULL;  // the local and cross groups' control channels
  MPI_Comm cross_control_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, cross_rank_ = 0, cross_size_ = 1;
  bool homogeneous_ = true;
  std::unique_ptr<MpiControlChannel> control_;
  std::unique_ptr<MpiLivenessChannel> liveness_;
  MpiTypes types_;
  std::unique_ptr<Communicator> global_group_, local_group_, cross_group_, node_major_group_;
};

}  // namespace hvd::detail
