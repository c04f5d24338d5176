// Process sets by id, as Horovod's Python package names them: the extension keeps the core's
// ProcessSet value of each set it registered, so a Python ProcessSet carries only its id and
// ranks. Adding and removing are collectives over every rank: they release the GIL.
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "python/src/extension.h"

#include <pybind11/stl.h>

namespace hvd::python {
namespace {

std::mutex g_mutex;
std::map<int, ProcessSet> g_sets;  // registered sets but the global one, by id (under g_mutex)

int add_process_set(const std::vector<int>& ranks) {
  ProcessSet set(ranks);
  try {
    py::gil_scoped_release release;
    hvd::add_process_set(set);
  } catch (const Error& e) {
    throw py::value_error(e.what());  // Horovod raises ValueError for a set it cannot add
  }
  remember_process_set(set);
  return set.id();
}

void remove_process_set(int id) {
  if (id == 0) throw py::value_error("hvd.remove_process_set: the global process set cannot be removed");
  const ProcessSet set = process_set_by_id(id);
  try {
    py::gil_scoped_release release;
    hvd::remove_process_set(set);
  } catch (const Error& e) {
    throw py::value_error(e.what());
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  g_sets.erase(id);
}

std::vector<int> process_set_ranks(int id) {
  try {
    return process_set_by_id(id).ranks();
  } catch (const Error& e) {
    throw py::value_error(e.what());
  }
}

}  // namespace

ProcessSet process_set_by_id(int id) {
  if (id == 0) return ProcessSet();
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_sets.find(id);
  if (it == g_sets.end())
    throw InvalidArgument("process set " + std::to_string(id) +
                          " is not registered (add it with hvd.add_process_set() or hvd.init(process_sets=...); "
                          "a removed set cannot be used)");
  return it->second;
}

void remember_process_set(const ProcessSet& set) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_sets[set.id()] = set;
}

void forget_process_sets() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_sets.clear();
}

void bind_process_sets(py::module_& m) {
  m.def("add_process_set", &add_process_set, py::arg("ranks"));
  m.def("remove_process_set", &remove_process_set, py::arg("process_set_id"));
  m.def("process_set_ranks", &process_set_ranks, py::arg("process_set_id"));
}

}  // namespace hvd::python
