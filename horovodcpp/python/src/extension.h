// The pybind11 extension `horovod._horovodcpp`: the core's collectives on torch tensors for the
// Python package (horovodcpp/python/horovod). One function per part binds it into the module.
// Errors: hvd::InvalidArgument becomes ValueError, every other hvd::Error the package's
// HorovodInternalError (a RuntimeError), as Horovod raises them (translated in module.cc).
#pragma once

#include <pybind11/pybind11.h>

#include "horovodcpp/horovod.h"

namespace hvd::python {

namespace py = pybind11;

void bind_basics(py::module_& m);     // lifecycle, topology, build, timeline (basics.cc)
void bind_process_sets(py::module_& m);  // process sets by id (process_sets.cc)
void bind_ops(py::module_& m);        // the async collectives and their handles (ops.cc)
void bind_elastic(py::module_& m);    // the commit store behind horovod.torch.elastic (elastic.cc)

// The registered set behind a Python ProcessSet's id (0: the global set); ValueError when no
// set has that id (never registered, or removed). User threads, with the GIL held.
ProcessSet process_set_by_id(int id);
// The sets hvd::init() registered (process_sets.cc keeps them by id); dropped at shutdown.
void remember_process_set(const ProcessSet& set);
void forget_process_sets();

}  // namespace hvd::python
