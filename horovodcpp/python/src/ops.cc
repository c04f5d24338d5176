// The async collectives on torch tensors and their handles. A call checks its tensors (bad
// input raises ValueError before anything is sent), submits through the core's public API and
// returns an integer handle (Horovod's convention); poll() asks, wait() blocks with the GIL
// released and returns the outputs. Names get the operation in front ("allreduce.<name>"), as
// in Horovod's timelines; an unnamed operation gets the core's generated name.
#include <time.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "python/src/extension.h"
#include "torch/tensor_adapter.h"

#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

namespace hvd::python {
namespace {

namespace td = hvd::torch::detail;

// Pending operations by the integer the Python side holds. User threads, under mutex_; a
// handle leaves the table when waited on (or released).
class HandleTable {
 public:
  long add(Handle handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    const long id = next_++;
    table_.emplace(id, std::move(handle));
    return id;
  }
  Handle get(long id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = table_.find(id);
    if (it == table_.end()) throw unknown(id);
    return it->second;
  }
  Handle take(long id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = table_.find(id);
    if (it == table_.end()) throw unknown(id);
    Handle handle = std::move(it->second);
    table_.erase(it);
    return handle;
  }

 private:
  static InvalidArgument unknown(long id) {
    return InvalidArgument("handle " + std::to_string(id) + " is unknown (never returned by an _async call, or "
                           "already synchronized)");
  }
  std::mutex mutex_;
  std::unordered_map<long, Handle> table_;
  long next_ = 1;
};

HandleTable& handles() {
  static auto* table = new HandleTable;  // never destroyed: Python may call it during exit
  return *table;
}

// Horovod's reduce-op values (horovod.torch.Average, Sum, ...).
ReduceOp reduce_op(int op) {
  switch (op) {
    case 0: return ReduceOp::Average;
    case 1: return ReduceOp::Sum;
    case 3: return ReduceOp::Min;
    case 4: return ReduceOp::Max;
    case 5: return ReduceOp::Product;
    case 2: return ReduceOp::Adasum;
  }
  throw InvalidArgument("unknown reduce op " + std::to_string(op) +
                        " (use hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max or hvd.Product)");
}

std::string op_name(const char* op, const std::string& name) {
  return name.empty() ? std::string() : std::string(op) + "." + name;
}

// Runs this front end's own checks of a named collective (tensors, op, outputs). When one
// fails, the name is withdrawn before the error reaches Python, so the peers' handles fail with
// its reason instead of waiting for this rank (Note [A collective one rank cannot run fails on
// every rank], core/api.cc); the core's own checks withdraw by themselves. An unnamed
// collective has no name yet to withdraw.
template <class Checks>
auto withdrawing(const std::string& full, int set_id, Checks&& checks) {
  try {
    return checks();
  } catch (const Error& e) {
    if (!full.empty()) {
      try {
        hvd::withdraw(full, e.what(), process_set_by_id(set_id));
      } catch (const Error&) {
        // The runtime stopped, or the set is unknown: nothing more to tell the peers.
      }
    }
    throw;
  }
}

TensorPtr checked(const at::Tensor& t, const char* op, const std::string& name) {
  td::check_tensor(t, op, name);
  return td::wrap(t);
}

// The tensors of a grouped call: checked, and on one device (the group is one negotiation).
void check_group(const std::vector<at::Tensor>& tensors, const char* op, const std::string& name,
                 std::vector<TensorPtr>* wrapped, std::vector<ReadyEventPtr>* ready) {
  if (tensors.empty()) throw InvalidArgument(std::string(op) + " of " + td::describe(name) + ": no tensors given");
  for (const auto& t : tensors) {
    wrapped->push_back(checked(t, op, name));
    if (t.device() != tensors.front().device())
      throw Error(std::string(op) + " of " + td::describe(name) + ": the tensors are on " +
                  tensors.front().device().str() + " and " + t.device().str() + "; a group runs on one device");
  }
  bool any_ready = false;
  for (const auto& t : tensors) {
    ready->push_back(td::ready_event(t));
    any_ready = any_ready || ready->back() != nullptr;
  }
  if (!any_ready) ready->clear();
}

// Submits the allreduce of `tensor` into `*output` (a new tensor like it when empty).
Handle submit_allreduce(const at::Tensor& tensor, std::optional<at::Tensor>* output, const std::string& name, int op,
                        double prescale, double postscale, int set_id) {
  const std::string full = op_name("allreduce", name);
  TensorPtr in, out;
  const ReduceOp reduce = withdrawing(full, set_id, [&] {
    in = checked(tensor, "allreduce", full);
    if (!*output) {
      *output = at::empty_like(tensor, at::MemoryFormat::Contiguous);
      out = td::wrap(**output);
    } else {
      out = (*output)->is_same(tensor) ? in : checked(**output, "allreduce", full);
    }
    return reduce_op(op);
  });
  AllreduceOptions options{reduce, full, prescale, postscale, process_set_by_id(set_id)};
  return hvd::allreduce_async(in, out, options, td::ready_event(tensor));
}

long allreduce_async(const at::Tensor& tensor, std::optional<at::Tensor> output, const std::string& name, int op,
                     double prescale, double postscale, int set_id) {
  return handles().add(submit_allreduce(tensor, &output, name, op, prescale, postscale, set_id));
}

// The synchronous allreduce (hvd.allreduce_, and hvd.allreduce without autograd): one call that
// submits and waits with the GIL released, with no handle to keep; returns the output.
at::Tensor allreduce(const at::Tensor& tensor, std::optional<at::Tensor> output, const std::string& name, int op,
                     double prescale, double postscale, int set_id) {
  Handle handle = submit_allreduce(tensor, &output, name, op, prescale, postscale, set_id);
  {
    py::gil_scoped_release release;
    handle.wait();
  }
  return *output;
}

long grouped_allreduce_async(const std::vector<at::Tensor>& tensors, std::optional<std::vector<at::Tensor>> outputs,
                             const std::string& name, int op, double prescale, double postscale, int set_id) {
  const std::string full = op_name("grouped_allreduce", name);
  std::vector<TensorPtr> ins, outs;
  std::vector<ReadyEventPtr> ready;
  check_group(tensors, "grouped_allreduce", full, &ins, &ready);
  if (outputs && outputs->size() != tensors.size())
    throw InvalidArgument("grouped_allreduce of " + td::describe(full) + ": " + std::to_string(tensors.size()) +
                          " tensors but " + std::to_string(outputs->size()) + " outputs");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (!outputs) {
      outs.push_back(td::wrap(at::empty_like(tensors[i])));
    } else if ((*outputs)[i].is_same(tensors[i])) {
      outs.push_back(ins[i]);
    } else {
      outs.push_back(checked((*outputs)[i], "grouped_allreduce", full));
    }
  }
  AllreduceOptions options{reduce_op(op), full, prescale, postscale, process_set_by_id(set_id)};
  return handles().add(hvd::grouped_allreduce_async(ins, outs, options, ready));
}

long allgather_async(const at::Tensor& tensor, const std::string& name, int set_id) {
  const std::string full = op_name("allgather", name);
  TensorPtr in = withdrawing(full, set_id, [&] { return checked(tensor, "allgather", full); });
  AllgatherOptions options{full, process_set_by_id(set_id)};
  return handles().add(hvd::allgather_async(in, td::torch_allocator(tensor), options, td::ready_event(tensor)));
}

long grouped_allgather_async(const std::vector<at::Tensor>& tensors, const std::string& name, int set_id) {
  const std::string full = op_name("grouped_allgather", name);
  std::vector<TensorPtr> ins;
  std::vector<ReadyEventPtr> ready;
  check_group(tensors, "grouped_allgather", full, &ins, &ready);
  AllgatherOptions options{full, process_set_by_id(set_id)};
  return handles().add(hvd::grouped_allgather_async(ins, td::torch_allocator(tensors.front()), options, ready));
}

long broadcast_async(const at::Tensor& tensor, std::optional<at::Tensor> output, int root, const std::string& name,
                     int set_id) {
  const std::string full = op_name("broadcast", name);
  TensorPtr in, out;
  withdrawing(full, set_id, [&] {
    in = checked(tensor, "broadcast", full);
    at::Tensor out_tensor = output ? *output : at::empty_like(tensor);
    out = output && output->is_same(tensor) ? in : checked(out_tensor, "broadcast", full);
  });
  BroadcastOptions options{root, full, process_set_by_id(set_id)};
  return handles().add(hvd::broadcast_async(in, out, options, td::ready_event(tensor)));
}

long alltoall_async(const at::Tensor& tensor, const std::vector<std::int64_t>& splits, const std::string& name,
                    int set_id) {
  const std::string full = op_name("alltoall", name);
  TensorPtr in = withdrawing(full, set_id, [&] { return checked(tensor, "alltoall", full); });
  AlltoallOptions options{splits, full, process_set_by_id(set_id)};
  return handles().add(hvd::alltoall_async(in, td::torch_allocator(tensor), options, td::ready_event(tensor)));
}

long reducescatter_async(const at::Tensor& tensor, const std::string& name, int op, double prescale,
                         double postscale, int set_id) {
  const std::string full = op_name("reducescatter", name);
  TensorPtr in;
  const ReduceOp reduce = withdrawing(full, set_id, [&] {
    in = checked(tensor, "reducescatter", full);
    return reduce_op(op);
  });
  ReducescatterOptions options{reduce, full, prescale, postscale, process_set_by_id(set_id)};
  return handles().add(hvd::reducescatter_async(in, td::torch_allocator(tensor), options, td::ready_event(tensor)));
}

long grouped_reducescatter_async(const std::vector<at::Tensor>& tensors, const std::string& name, int op,
                                 double prescale, double postscale, int set_id) {
  const std::string full = op_name("grouped_reducescatter", name);
  std::vector<TensorPtr> ins;
  std::vector<ReadyEventPtr> ready;
  check_group(tensors, "grouped_reducescatter", full, &ins, &ready);
  ReducescatterOptions options{reduce_op(op), full, prescale, postscale, process_set_by_id(set_id)};
  return handles().add(
      hvd::grouped_reducescatter_async(ins, td::torch_allocator(tensors.front()), options, ready));
}

bool poll(long id) { return handles().get(id).poll(); }

// Waits with the GIL released; raises when the operation failed. The handle is gone afterwards,
// whether the operation failed or not.
Handle wait_for(long id) {
  Handle handle = handles().take(id);
  py::gil_scoped_release release;
  handle.wait();
  return handle;
}

void wait(long id) { wait_for(id); }

// wait(), then the outputs the runtime allocated, in input order, and for alltoall the rows
// received from each rank.
std::pair<std::vector<at::Tensor>, std::vector<std::int64_t>> wait_outputs(long id) {
  Handle handle = wait_for(id);
  std::vector<at::Tensor> outputs;
  for (const auto& t : handle.outputs()) outputs.push_back(td::unwrap(t));
  return {std::move(outputs), handle.received_splits()};
}

// Drops a handle without waiting (the operation still completes in the runtime).
void release(long id) { handles().take(id); }

int join(int set_id) {
  const ProcessSet set = process_set_by_id(set_id);
  py::gil_scoped_release release;
  return hvd::join(set);
}

void barrier(int set_id) {
  const ProcessSet set = process_set_by_id(set_id);
  py::gil_scoped_release release;
  hvd::barrier(set);
}

// For examples/python/call_overhead.py: `iterations` synchronous Sum allreduces of a one-element
// float32 torch tensor through the C++ API, back to back with the GIL released, as a C++ program
// makes them (in place, or into a new output each time, as the LibTorch front end's allreduce);
// returns the seconds per operation on this rank, of the wall clock and of this thread's CPU.
std::pair<double, double> time_cpp_allreduce(int iterations, bool in_place) {
  py::gil_scoped_release release;
  const at::Tensor input = at::ones({1});
  TensorPtr t = td::wrap(input);
  const AllreduceOptions options{ReduceOp::Sum, in_place ? "call_overhead.cpp" : "call_overhead.cpp_out"};
  auto thread_cpu = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
  };
  hvd::barrier();
  const double cpu_start = thread_cpu();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) {
    TensorPtr out = in_place ? t : td::wrap(at::empty_like(input));
    hvd::allreduce_async(t, out, options).wait();
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {wall / iterations, (thread_cpu() - cpu_start) / iterations};
}

// hvd::SubmissionBatch as a context manager: the operations this thread submits inside it reach
// the runtime together when it ends (one wake-up, and their cycle starts at once).
class Batch {
 public:
  Batch& enter() {
    if (!batch_) batch_.emplace();
    return *this;
  }
  void exit(const py::args&) { batch_.reset(); }

 private:
  std::optional<SubmissionBatch> batch_;
};

}  // namespace

void bind_ops(py::module_& m) {
  py::class_<Batch>(m, "SubmissionBatch")
      .def(py::init<>())
      .def("__enter__", &Batch::enter, py::return_value_policy::reference_internal)
      .def("__exit__", &Batch::exit);
  using py::arg;
  m.def("allreduce_async", &allreduce_async, arg("tensor"), arg("output"), arg("name"), arg("op"),
        arg("prescale_factor"), arg("postscale_factor"), arg("process_set_id"));
  m.def("allreduce", &allreduce, arg("tensor"), arg("output"), arg("name"), arg("op"), arg("prescale_factor"),
        arg("postscale_factor"), arg("process_set_id"));
  m.def("grouped_allreduce_async", &grouped_allreduce_async, arg("tensors"), arg("outputs"), arg("name"), arg("op"),
        arg("prescale_factor"), arg("postscale_factor"), arg("process_set_id"));
  m.def("allgather_async", &allgather_async, arg("tensor"), arg("name"), arg("process_set_id"));
  m.def("grouped_allgather_async", &grouped_allgather_async, arg("tensors"), arg("name"), arg("process_set_id"));
  m.def("broadcast_async", &broadcast_async, arg("tensor"), arg("output"), arg("root_rank"), arg("name"),
        arg("process_set_id"));
  m.def("alltoall_async", &alltoall_async, arg("tensor"), arg("splits"), arg("name"), arg("process_set_id"));
  m.def("reducescatter_async", &reducescatter_async, arg("tensor"), arg("name"), arg("op"), arg("prescale_factor"),
        arg("postscale_factor"), arg("process_set_id"));
  m.def("grouped_reducescatter_async", &grouped_reducescatter_async, arg("tensors"), arg("name"), arg("op"),
        arg("prescale_factor"), arg("postscale_factor"), arg("process_set_id"));
  m.def("poll", &poll, arg("handle"));
  m.def("wait", &wait, arg("handle"));
  m.def("wait_outputs", &wait_outputs, arg("handle"));
  m.def("release", &release, arg("handle"));
  m.def("join", &join, arg("process_set_id"));
  m.def("barrier", &barrier, arg("process_set_id"));
  // For the Python layer's own checks: tells the peers this rank will not run `name`.
  m.def("withdraw", [](const std::string& name, const std::string& reason, int set_id) {
    if (name.empty()) return;
    try {
      hvd::withdraw(name, reason, process_set_by_id(set_id));
    } catch (const Error&) {
      // The runtime stopped, or the set is unknown: nothing more to tell the peers.
    }
  }, arg("name"), arg("reason"), arg("process_set_id"));
  m.def("_time_cpp_allreduce", &time_cpp_allreduce, arg("iterations"), arg("in_place"));
}

}  // namespace hvd::python
