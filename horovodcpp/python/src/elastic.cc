// The commit store behind horovod.torch.elastic: a Python state object becomes an
// hvd::elastic::State whose bytes come from its _core_bytes() and go back through
// _load_bytes(), so commits, the restore agreement and the stop for a change of hosts are the
// core's (docs/elastic.md). Every method is a collective and runs with the GIL released; the
// callbacks into Python take it back.
#include <exception>
#include <functional>
#include <string>

#include "core/logging.h"
#include "core/settings.h"
#include "elastic/commit_store.h"
#include "horovodcpp/elastic.h"
#include "python/src/extension.h"

namespace hvd::python {
namespace {

// Owned by the Python state object (its _core attribute), which it calls back through a
// borrowed reference: the owner outlives it.
class PythonState final : public elastic::State {
 public:
  explicit PythonState(py::handle owner) : owner_(owner) {}

 protected:
  std::string serialize() const override {
    py::gil_scoped_acquire gil;
    return owner_.attr("_core_bytes")().cast<std::string>();
  }
  void deserialize(const std::string& bytes) override {
    py::gil_scoped_acquire gil;
    owner_.attr("_load_bytes")(py::bytes(bytes));
  }

 private:
  py::handle owner_;
};

// hvdrun's notice reaches Python as HostsUpdatedInterrupt (horovod.common.exceptions).
void commit(PythonState& state) {
  try {
    py::gil_scoped_release release;
    state.commit();
  } catch (const elastic::HostsChanged& e) {
    py::object interrupt = py::module_::import("horovod.common.exceptions").attr("HostsUpdatedInterrupt");
    PyErr_SetObject(interrupt.ptr(), interrupt(false).ptr());
    throw py::error_already_set();
  }
}

template <void (elastic::State::*Method)()>
void collective(PythonState& state) {
  py::gil_scoped_release release;
  (state.*Method)();
}

// After the training function returned on every rank: a job-named commit store (not one the
// user chose with HOROVOD_ELASTIC_DIR) has served its purpose, as in hvd::elastic::run. A store
// that cannot be removed (not this user's alone) is left with a warning: training succeeded.
void finish(PythonState& state) {
  py::gil_scoped_release release;
  hvd::barrier();
  if (hvd::local_rank() != 0 || !hvd::detail::read_settings_from_environment().elastic_dir.empty()) return;
  try {
    hvd::detail::CommitStore(state.store_dir()).remove_all();
  } catch (const std::exception& e) {
    hvd::detail::log_warn(std::string("elastic: the job's commits were left in place: ") + e.what());
  }
}

}  // namespace

void bind_elastic(py::module_& m) {
  py::class_<PythonState>(m, "ElasticState")
      .def(py::init([](py::handle owner) { return new PythonState(owner); }), py::arg("owner"))
      .def("commit", &commit)
      .def("restore", &collective<&elastic::State::restore>)
      .def("sync", &collective<&elastic::State::sync>)
      .def("finish", &finish)
      .def("store_dir", [](PythonState& s) {
        py::gil_scoped_release release;
        return s.store_dir();
      })
      .def_property_readonly("commit_id", &PythonState::commit_id)
      .def_property_readonly("restored_world_size", &PythonState::restored_world_size);
  m.attr("HOSTS_CHANGED_EXIT_CODE") = elastic::kHostsChangedExitCode;
}

}  // namespace hvd::python
