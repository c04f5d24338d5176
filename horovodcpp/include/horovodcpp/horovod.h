// horovodcpp core API: process topology, asynchronous collectives on any tensor type that
// implements hvd::Tensor, and a raw host-buffer tensor (hvd::HostTensor) so the runtime is
// usable without LibTorch. Every function here may be called from any user thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace hvd {

// The one exception type users see. Messages name the tensor, the ranks and what differed.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The kind of Error thrown on the caller's thread for input the caller can fix, before anything
// was sent (a name already in flight, splits that do not add up, a bad root, an unsupported
// dtype): nothing changed, the runtime goes on. Front ends map it to their "bad argument" error
// (Python's ValueError); every other Error is a failed operation (Python's RuntimeError).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// Int16 came last so that the older types keep their wire codes.
enum class DataType : std::uint8_t { UInt8, Int8, Int32, Int64, Float16, BFloat16, Float32, Float64, Int16 };
const char* dtype_name(DataType dtype);
std::int64_t dtype_size(DataType dtype);

// Adasum (allreduce of floating-point tensors only, on a power-of-two number of ranks): Horovod's
// adaptive summation, which adds orthogonal vectors and averages parallel ones (README, "Adasum").
enum class ReduceOp : std::uint8_t { Average, Sum, Min, Max, Product, Adasum };
const char* reduce_op_name(ReduceOp op);

// Gradient compression used by the front ends before communication.
enum class Compression : std::uint8_t { None, FP16 };

constexpr int kCpuDevice = -1;

using TensorShape = std::vector<std::int64_t>;
std::int64_t num_elements(const TensorShape& shape);
std::string shape_string(const TensorShape& shape);  // "[4, 3]"

// Signals that the producer has finished writing a tensor (a CUDA event recorded on the
// producer's stream). Host tensors pass none.
class ReadyEvent {
 public:
  virtual ~ReadyEvent() = default;
  virtual bool ready() const = 0;
  // The cudaEvent_t behind this event, or nullptr; lets the NCCL backend wait on the GPU.
  virtual void* cuda_event() const { return nullptr; }
};
using ReadyEventPtr = std::shared_ptr<ReadyEvent>;

// What the runtime sees of a tensor: one dense, contiguous buffer. Front ends adapt their own
// tensor types to this; the runtime never includes a framework header.
class Tensor {
 public:
  virtual ~Tensor() = default;
  virtual DataType dtype() const = 0;
  virtual const TensorShape& shape() const = 0;
  virtual void* data() = 0;
  virtual int device() const = 0;  // kCpuDevice or a CUDA ordinal
  // For a device tensor that an OutputAllocator took from a stream-ordered allocator (PyTorch's
  // caching allocator, cudaMallocAsync): an event recorded on the allocating stream after the
  // allocation. Until it completes, work already enqueued on that stream may still use the
  // memory; the NCCL backend makes its stream wait for it before writing. Null otherwise.
  virtual ReadyEventPtr allocation_event() const { return nullptr; }
  std::int64_t num_elements() const { return hvd::num_elements(shape()); }
  std::int64_t size_bytes() const { return num_elements() * dtype_size(dtype()); }
};
using TensorPtr = std::shared_ptr<Tensor>;

// Allocates an output once its shape is known (allgather, alltoall, reducescatter). Called on
// the background thread, with the input's dtype. An empty allocator means host memory.
using OutputAllocator = std::function<TensorPtr(DataType dtype, const TensorShape& shape)>;

// A host tensor that owns its bytes (allocate) or borrows a caller's buffer (wrap).
class HostTensor final : public Tensor {
 public:
  static std::shared_ptr<HostTensor> allocate(DataType dtype, TensorShape shape);
  static std::shared_ptr<HostTensor> wrap(void* data, DataType dtype, TensorShape shape);

  DataType dtype() const override { return dtype_; }
  const TensorShape& shape() const override { return shape_; }
  void* data() override { return data_; }
  int device() const override { return kCpuDevice; }
  template <class T>
  T* data_as() { return static_cast<T*>(data_); }

 private:
  HostTensor(DataType dtype, TensorShape shape) : dtype_(dtype), shape_(std::move(shape)) {}
  DataType dtype_;
  TensorShape shape_;
  std::vector<unsigned char> owned_;
  void* data_ = nullptr;
};
OutputAllocator host_allocator();

namespace detail {
struct HandleState;
struct ProcessSetIdentity;
struct ProcessSetAccess;
}

// A group of ranks that runs its own collectives (Horovod's process set): its own negotiation,
// response cache and coordinator (the set's first rank), fusing only within itself; sets run
// concurrently. A cheap value: copies share one identity, so a set made from ranks and passed to
// init() or add_process_set() has its id from then on. Default-constructed = the global set.
// Usable from any user thread.
class ProcessSet {
 public:
  ProcessSet() = default;                      // the global set (every rank)
  explicit ProcessSet(std::vector<int> ranks);  // unregistered until init() / add_process_set()
  // 0 for the global set; -1 while not registered (or after remove_process_set()).
  int id() const;
  // Global ranks in the set, ascending. For the global set: 0..size()-1 (needs init()).
  std::vector<int> ranks() const;
  int size() const;
  // This rank's index within the set; throws hvd::Error naming the set when not included().
  int rank() const;
  bool included() const;
  bool is_global() const { return identity_ == nullptr; }
  // "process set 2 (ranks [0, 1])", for messages.
  std::string describe() const;
  friend bool operator==(const ProcessSet& a, const ProcessSet& b);
  friend bool operator!=(const ProcessSet& a, const ProcessSet& b) { return !(a == b); }

 private:
  friend struct detail::ProcessSetAccess;  // the runtime registers and looks up sets
  std::shared_ptr<detail::ProcessSetIdentity> identity_;  // null: the global set
};

// A pending operation. Completed exactly once by the runtime; wait() rethrows a failure as
// hvd::Error. Copies share the same operation.
class Handle {
 public:
  Handle() = default;
  explicit Handle(std::shared_ptr<detail::HandleState> state) : state_(std::move(state)) {}
  bool valid() const { return state_ != nullptr; }
  bool poll() const;  // true once complete (successfully or not)
  void wait() const;  // blocks; throws hvd::Error if the operation failed
  // After wait(): outputs the runtime allocated (allgather, alltoall, reducescatter), one per
  // input in order, and for alltoall the number of first-dimension rows received from each rank.
  const std::vector<TensorPtr>& outputs() const;
  const std::vector<std::int64_t>& received_splits() const;

 private:
  std::shared_ptr<detail::HandleState> state_;
};

struct AllreduceOptions {
  ReduceOp op = ReduceOp::Average;
  std::string name;  // empty: generated; must then be called in the same order on every rank
  double prescale_factor = 1.0;
  double postscale_factor = 1.0;
  ProcessSet process_set{};  // default: the global set
};
struct AllgatherOptions {
  std::string name;
  ProcessSet process_set{};  // default: the global set
};
struct BroadcastOptions {
  int root = 0;
  std::string name;
  ProcessSet process_set{};  // default: the global set
};
struct AlltoallOptions {
  std::vector<std::int64_t> splits;  // rows of the first dimension sent to each rank; empty: even
  std::string name;
  ProcessSet process_set{};  // default: the global set
};
struct ReducescatterOptions {
  ReduceOp op = ReduceOp::Average;
  std::string name;
  double prescale_factor = 1.0;
  double postscale_factor = 1.0;
  ProcessSet process_set{};  // default: the global set
};

// Lifecycle and topology. init() reads the HOROVOD_* environment (a bad value throws naming the
// variable) and starts the background thread. local = ranks sharing a node (MPI shared-memory
// split); cross = ranks with the same local rank.
void init();
// Also registers these sets (in this order; the same on every rank), as add_process_set() would,
// whether or not HOROVOD_DYNAMIC_PROCESS_SETS is set.
void init(std::vector<ProcessSet> process_sets);
void shutdown();
bool is_initialized();
int rank();
int size();
int local_rank();
int local_size();
int cross_rank();
int cross_size();

// What this build contains, for hvdrun --check-build.
bool mpi_built();
bool nccl_built();
bool cuda_built();
int nccl_version();  // NCCL_VERSION_CODE built against (e.g. 22703); 0 without NCCL

// Asynchronous collectives. Inputs must stay alive and unmodified until the handle completes;
// input == output is allowed (in place). `ready` is the producer's event for device tensors.
Handle allreduce_async(TensorPtr input, TensorPtr output, const AllreduceOptions& options = {},
                       ReadyEventPtr ready = nullptr);
// All tensors are enqueued atomically and negotiated as one group.
Handle grouped_allreduce_async(std::vector<TensorPtr> inputs, std::vector<TensorPtr> outputs,
                               const AllreduceOptions& options = {},
                               std::vector<ReadyEventPtr> ready = {});
Handle allgather_async(TensorPtr input, OutputAllocator allocate_output,
                       const AllgatherOptions& options = {}, ReadyEventPtr ready = nullptr);
Handle broadcast_async(TensorPtr input, TensorPtr output, const BroadcastOptions& options = {},
                       ReadyEventPtr ready = nullptr);
Handle alltoall_async(TensorPtr input, OutputAllocator allocate_output,
                      const AlltoallOptions& options = {}, ReadyEventPtr ready = nullptr);
Handle reducescatter_async(TensorPtr input, OutputAllocator allocate_output,
                           const ReducescatterOptions& options = {}, ReadyEventPtr ready = nullptr);
// Grouped allgather / reducescatter: every tensor enqueued atomically under one handle and
// negotiated as one group (options.name names the group; member i is "NAME.i"); the group's
// tensors fuse into one backend call up to HOROVOD_FUSION_THRESHOLD. Outputs come from
// allocate_output, in the order of the inputs (Handle::outputs()).
Handle grouped_allgather_async(std::vector<TensorPtr> inputs, OutputAllocator allocate_output,
                               const AllgatherOptions& options = {}, std::vector<ReadyEventPtr> ready = {});
Handle grouped_reducescatter_async(std::vector<TensorPtr> inputs, OutputAllocator allocate_output,
                                   const ReducescatterOptions& options = {},
                                   std::vector<ReadyEventPtr> ready = {});

// Tells the ranks of `process_set` that this rank will not submit the collective `name` this
// time (of whatever kind it is). Once every rank has submitted it or withdrawn it, each rank's
// handle for it fails with an error naming this rank and `reason`, instead of waiting for this
// rank for good. For a front end that finds, when some ranks may already have submitted a
// collective, that this rank cannot take part (DistributedOptimizer does, when the ranks'
// models differ). The collectives above withdraw by themselves when their arguments fail a
// check on this rank. The handle completes, with that same error, at the same time.
Handle withdraw(const std::string& name, const std::string& reason, const ProcessSet& process_set = {});

// Operations submitted on this thread while a SubmissionBatch lives reach the background thread
// together when the outermost one ends: one wake-up instead of one per operation, and they
// start a negotiation cycle at once instead of after the gap that lets a burst of separate
// submissions settle. For a thread that submits a known set in a row (DistributedOptimizer does,
// for the gradients it holds to the end of backward). An operation of an open batch waits for
// its end, or at most HOROVOD_CYCLE_TIME: wait on its handle after the batch. Throws hvd::Error
// when horovodcpp is not running.
class SubmissionBatch {
 public:
  SubmissionBatch();
  ~SubmissionBatch();
  SubmissionBatch(const SubmissionBatch&) = delete;
  SubmissionBatch& operator=(const SubmissionBatch&) = delete;
};

// Blocks until every rank of the set has called barrier().
void barrier(const ProcessSet& process_set = {});
// Called by a rank that has run out of data: it keeps serving allreduces in the set with zeros
// until every rank of the set has joined. Returns the (global) rank that joined last.
int join(const ProcessSet& process_set = {});

// Process sets at run time (needs HOROVOD_DYNAMIC_PROCESS_SETS=1): collectives over the global
// set, called by every rank in the same order. add: ranks are global, distinct, in [0, size());
// a set with the same ranks as a registered one is an error. remove: refused while the set has
// operations in flight; the global set cannot be removed.
ProcessSet global_process_set();
ProcessSet add_process_set(std::vector<int> ranks);
ProcessSet add_process_set(const ProcessSet& process_set);  // registers this (unregistered) set
void remove_process_set(const ProcessSet& process_set);

// Timeline recording at run time (HOROVOD_TIMELINE turns it on at init).
void start_timeline(const std::string& path, bool mark_cycles = false);
void stop_timeline();

}  // namespace hvd
