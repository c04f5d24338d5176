#include "backends/mpi/mpi_world.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "backends/mpi/mpi_start_check.h"
#include "core/background_placement.h"
#include "core/host_scale.h"
#include "core/integer_average.h"

namespace hvd::detail {
namespace {

void check(int code, const char* call) {
  if (code != MPI_SUCCESS) throw std::runtime_error(mpi_error_message(call, code));
}

constexpr const char* kYieldVariable = "OMPI_MCA_mpi_yield_when_idle";

int fake_local_size(int size) {
  const char* raw = std::getenv("HVD_TEST_FAKE_LOCAL_SIZE");
  if (raw == nullptr || *raw == '\0') return 0;
  char* end = nullptr;
  long k = std::strtol(raw, &end, 10);
  if (*end != '\0' || k <= 0 || size % k != 0)
    throw std::runtime_error("HVD_TEST_FAKE_LOCAL_SIZE='" + std::string(raw) + "' must be a positive divisor of the " +
                             std::to_string(size) + " ranks");
  return static_cast<int>(k);
}

// HVD_TEST_FAKE_PLACEMENT: how the fake nodes take their ranks. "block" (the default, as
// `mpirun --map-by slot`): node n holds ranks n*k .. n*k+k-1; "round_robin" (as `--map-by node`):
// node n holds ranks n, n + nodes, ..., so that world order is not node-major.
bool fake_round_robin(int local_size) {
  const char* raw = std::getenv("HVD_TEST_FAKE_PLACEMENT");
  if (raw == nullptr || *raw == '\0' || std::string(raw) == "block") return false;
  if (std::string(raw) != "round_robin")
    throw std::runtime_error("HVD_TEST_FAKE_PLACEMENT='" + std::string(raw) + "' must be block or round_robin");
  if (local_size == 0)
    throw std::runtime_error("HVD_TEST_FAKE_PLACEMENT='" + std::string(raw) +
                             "' needs HVD_TEST_FAKE_LOCAL_SIZE (the ranks per fake node)");
  return true;
}

// The global ranks of `comm`'s members, in `comm`'s rank order.
std::vector<int> members_of(MPI_Comm comm, int global_rank) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  std::vector<int> ranks(size);
  check(MPI_Allgather(&global_rank, 1, MPI_INT, ranks.data(), 1, MPI_INT, comm), "MPI_Allgather");
  return ranks;
}

}  // namespace

MpiGroupComm::MpiGroupComm(MPI_Comm data, MPI_Comm control, bool owned)
    : data_(data), control_comm_(control), owned_(owned) {
  if (control != MPI_COMM_NULL) control_ = std::make_unique<MpiControlChannel>(control);
}

MpiGroupComm::~MpiGroupComm() {
  if (control_) control_->close();
  control_.reset();
  if (!owned_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (data_ != MPI_COMM_NULL) MPI_Comm_free(&data_);
  if (control_comm_ != MPI_COMM_NULL) MPI_Comm_free(&control_comm_);
}

MPI_Comm mpi_comm(const Communicator& group) {
  auto* mpi = dynamic_cast<MpiGroupComm*>(group.data("MPI"));
  if (mpi == nullptr) throw std::runtime_error("internal: group " + std::to_string(group.id()) + " has no MPI communicator");
  return mpi->data();
}

MpiWorld::MpiWorld(double start_timeout_seconds) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  if (!initialized) {
    // Open MPI busy-polls inside blocking calls. The background thread shares the cores with
    // training, and a rank spinning in a collective starves the threads its peers need: on 2
    // cores training ran ~40% slower (docs/benchmarks.md). Yield while waiting, unless the user
    // chose otherwise.
    setenv(kYieldVariable, "1", /*overwrite=*/0);
    wait_for_every_rank(start_timeout_seconds);  // MPI_Init itself would wait without limit
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    finish_start_check();
    initialized_mpi_ = true;
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_MULTIPLE)
    throw std::runtime_error("MPI provides thread level " + std::to_string(provided) +
                             " but horovodcpp needs MPI_THREAD_MULTIPLE (its background thread makes MPI calls); "
                             "initialize MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...)");
  check(MPI_Comm_dup(MPI_COMM_WORLD, &global_), "MPI_Comm_dup");
  check(MPI_Comm_dup(MPI_COMM_WORLD, &control_comm_), "MPI_Comm_dup");
  check(MPI_Comm_dup(MPI_COMM_WORLD, &liveness_comm_), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(liveness_comm_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(global_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(control_comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(global_, &rank_);
  MPI_Comm_size(global_, &size_);

  const int fake_k = fake_local_size(size_);
  const bool round_robin = fake_round_robin(fake_k);
  if (fake_k > 0)
    check(MPI_Comm_split(global_, round_robin ? rank_ % (size_ / fake_k) : rank_ / fake_k, rank_, &local_),
          "MPI_Comm_split");
  else
    check(MPI_Comm_split_type(global_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local_), "MPI_Comm_split_type");
  MPI_Comm_rank(local_, &local_rank_);
  MPI_Comm_size(local_, &local_size_);
  check(MPI_Comm_split(global_, local_rank_, rank_, &cross_), "MPI_Comm_split");
  MPI_Comm_rank(cross_, &cross_rank_);
  MPI_Comm_size(cross_, &cross_size_);
  MPI_Comm_set_errhandler(local_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(cross_, MPI_ERRORS_RETURN);

  int sizes[2] = {local_size_, -local_size_};
  check(MPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_INT, MPI_MAX, global_), "MPI_Allreduce");
  homogeneous_ = sizes[0] == -sizes[1];
  // World::node_major(). A rank's cross rank is its rank among the ranks of its local rank, so
  // the ranks of one node may have different ones (round-robin placement); local rank 0's names
  // the node for all of them. On a homogeneous job rank n * local_size + l is local rank l of
  // node n.
  int node = cross_rank_;
  check(MPI_Bcast(&node, 1, MPI_INT, 0, local_), "MPI_Bcast");
  check(MPI_Comm_split(global_, 0, node * local_size_ + local_rank_, &node_major_), "MPI_Comm_split");
  MPI_Comm_set_errhandler(node_major_, MPI_ERRORS_RETURN);

  types_.create();
  MpiControlChannel::set_oversubscribed(ranks_outnumber_cores(local_size_));
  control_ = std::make_unique<MpiControlChannel>(control_comm_);
  liveness_ = std::make_unique<MpiLivenessChannel>(liveness_comm_);

  std::vector<int> everyone(size_);
  for (int r = 0; r < size_; ++r) everyone[r] = r;
  global_group_ = std::make_unique<Communicator>(0, everyone, rank_, *control_);
  global_group_->set_data("MPI", std::make_unique<MpiGroupComm>(global_, MPI_COMM_NULL, false));
  // The local and cross groups have control channels of their own (NCCL bootstraps a group's
  // communicator through its channel).
  check(MPI_Comm_dup(local_, &local_control_), "MPI_Comm_dup");
  check(MPI_Comm_dup(cross_, &cross_control_), "MPI_Comm_dup");
  auto local_mpi = std::make_unique<MpiGroupComm>(local_, local_control_, false);
  local_group_ = std::make_unique<Communicator>(Communicator::kLocalId, members_of(local_, rank_), local_rank_,
                                                local_mpi->control());
  local_group_->set_data("MPI", std::move(local_mpi));
  auto cross_mpi = std::make_unique<MpiGroupComm>(cross_, cross_control_, false);
  cross_group_ = std::make_unique<Communicator>(Communicator::kCrossId, members_of(cross_, rank_), cross_rank_,
                                                cross_mpi->control());
  cross_group_->set_data("MPI", std::move(cross_mpi));
  // Never negotiated on: the global control channel stands in.
  int node_major_rank = 0;
  MPI_Comm_rank(node_major_, &node_major_rank);
  node_major_group_ = std::make_unique<Communicator>(Communicator::kNodeMajorId, members_of(node_major_, rank_),
                                                     node_major_rank, *control_);
  node_major_group_->set_data("MPI", std::make_unique<MpiGroupComm>(node_major_, MPI_COMM_NULL, false));
}

std::unique_ptr<Communicator> MpiWorld::create_communicator(int id, const std::vector<int>& global_ranks) {
  const auto at = std::find(global_ranks.begin(), global_ranks.end(), rank_);
  const bool member = at != global_ranks.end();
  const int color = member ? 0 : MPI_UNDEFINED;
  const int key = member ? static_cast<int>(at - global_ranks.begin()) : 0;
  MPI_Comm data = MPI_COMM_NULL, control = MPI_COMM_NULL;
  check(MPI_Comm_split(global_, color, key, &data), "MPI_Comm_split (process set data)");
  check(MPI_Comm_split(global_, color, key, &control), "MPI_Comm_split (process set control)");
  if (!member) return nullptr;
  MPI_Comm_set_errhandler(data, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN);
  auto mpi = std::make_unique<MpiGroupComm>(data, control, true);
  auto group = std::make_unique<Communicator>(id, global_ranks, key, mpi->control());
  group->set_data("MPI", std::move(mpi));
  return group;
}

MpiWorld::~MpiWorld() { finalize(); }

MPI_Comm MpiWorld::comm(CommScope scope) const {
  switch (scope) {
    case CommScope::Global: return global_;
    case CommScope::Local: return local_;
    case CommScope::Cross: return cross_;
  }
  return global_;
}

Status MpiWorld::allreduce_in_pieces(void* buffer, std::int64_t count, DataType dtype, ReduceOp op,
                                     MPI_Comm comm) const {
  const std::int64_t element = dtype_size(dtype);
  const std::int64_t piece = std::max<std::int64_t>(1, kAllreducePieceBytes / element);
  auto* bytes = static_cast<unsigned char*>(buffer);
  for (std::int64_t offset = 0; offset < count; offset += piece) {
    const int n = static_cast<int>(std::min(piece, count - offset));
    int code = MPI_Allreduce(MPI_IN_PLACE, bytes + offset * element, n, types_.datatype(dtype),
                             types_.reduce_op(dtype, op), comm);
    if (code != MPI_SUCCESS) return Status::error(mpi_error_message("MPI_Allreduce", code));
  }
  return Status::ok();
}

Status MpiWorld::allreduce_integer_average(void* buffer, std::int64_t count, DataType dtype, MPI_Comm comm,
                                           std::vector<std::int64_t>& wide) const {
  const std::int64_t words = count * average_words(dtype);
  if (static_cast<std::int64_t>(wide.size()) < words) wide.resize(static_cast<std::size_t>(words));
  widen_for_average(buffer, count, dtype, wide.data());
  if (Status s = allreduce_in_pieces(wide.data(), words, DataType::Int64, ReduceOp::Sum, comm); !s.is_ok()) return s;
  int n = 1;
  MPI_Comm_size(comm, &n);
  finish_average(wide.data(), count, dtype, n, buffer);
  return Status::ok();
}

Status MpiWorld::host_allreduce(void* buffer, std::int64_t count, DataType dtype, ReduceOp op, CommScope scope) {
  MPI_Comm c = comm(scope);
  if (op == ReduceOp::Average && is_integer(dtype)) {
    std::vector<std::int64_t> wide;
    return allreduce_integer_average(buffer, count, dtype, c, wide);
  }
  if (Status s = allreduce_in_pieces(buffer, count, dtype, op, c); !s.is_ok()) return s;
  if (op == ReduceOp::Average) {
    int n = 1;
    MPI_Comm_size(c, &n);
    scale_host_buffer(buffer, count, dtype, 1.0 / n);
  }
  return Status::ok();
}

void MpiWorld::finalize() {
  if (finalized_) return;
  finalized_ = true;
  // The groups' MPI sides close their channels; the world's communicators are freed below.
  global_group_.reset();
  local_group_.reset();
  cross_group_.reset();
  node_major_group_.reset();
  if (control_) control_->close();
  if (liveness_) liveness_->close();
  types_.destroy();
  for (MPI_Comm* c : {&global_, &control_comm_, &liveness_comm_, &local_, &cross_, &node_major_, &local_control_,
                     &cross_control_})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  if (initialized_mpi_) MPI_Finalize();
}

}  // namespace hvd::detail
