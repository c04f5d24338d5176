// Lifecycle, topology, what this build contains, and the timeline (horovod.common.basics).
// Everything that waits for other ranks releases the GIL first, so the process's other Python
// threads run meanwhile.
#include <string>
#include <vector>

#include "python/src/extension.h"

#include <pybind11/stl.h>

namespace hvd::python {
namespace {

// Local queries before hvd.init() or after hvd.shutdown() raise ValueError, as in Horovod.
template <int (*Query)()>
int local() {
  try {
    return Query();
  } catch (const Error& e) {
    throw py::value_error(e.what());
  }
}

// Registers `sets` (lists of global ranks) with the runtime as it starts; returns their ids.
std::vector<int> init(const std::vector<std::vector<int>>& sets) {
  std::vector<ProcessSet> process_sets;
  for (const auto& ranks : sets) process_sets.emplace_back(ranks);
  {
    py::gil_scoped_release release;
    hvd::init(process_sets);
  }
  std::vector<int> ids;
  for (const auto& set : process_sets) {
    remember_process_set(set);
    ids.push_back(set.id());
  }
  return ids;
}

void shutdown() {
  {
    py::gil_scoped_release release;
    hvd::shutdown();
  }
  forget_process_sets();
}

bool mpi_threads_supported() {
  local<&hvd::size>();
  return true;  // the runtime runs only under MPI_THREAD_MULTIPLE (mpi_world.cc)
}

void start_timeline(const std::string& path, bool mark_cycles) {
  try {
    hvd::start_timeline(path, mark_cycles);
  } catch (const InvalidArgument&) {
    throw;
  } catch (const Error& e) {
    throw py::value_error(e.what());
  }
}

void stop_timeline() {
  try {
    hvd::stop_timeline();
  } catch (const Error& e) {
    throw py::value_error(e.what());
  }
}

}  // namespace

void bind_basics(py::module_& m) {
  m.def("init", &init, py::arg("process_sets"));
  m.def("shutdown", &shutdown);
  m.def("is_initialized", &hvd::is_initialized);
  m.def("rank", [] { return local<&hvd::rank>(); });
  m.def("size", [] { return local<&hvd::size>(); });
  m.def("local_rank", [] { return local<&hvd::local_rank>(); });
  m.def("local_size", [] { return local<&hvd::local_size>(); });
  m.def("cross_rank", [] { return local<&hvd::cross_rank>(); });
  m.def("cross_size", [] { return local<&hvd::cross_size>(); });
  m.def("mpi_threads_supported", &mpi_threads_supported);
  m.def("mpi_built", &hvd::mpi_built);
  m.def("nccl_version", &hvd::nccl_version);
  m.def("cuda_built", &hvd::cuda_built);
  m.def("start_timeline", &start_timeline, py::arg("path"), py::arg("mark_cycles"));
  m.def("stop_timeline", &stop_timeline);
}

}  // namespace hvd::python
