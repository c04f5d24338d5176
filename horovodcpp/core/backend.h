// What a backend provides to the core. The list of backends compiled into this build lives
// outside the core (backends/compiled_backends.cc), so the core never includes a backend header.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/collective_op.h"
#include "core/settings.h"
#include "core/world.h"

namespace hvd::detail {

class OpRegistry;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // Called once on the background thread after the world exists; adds this backend's ops.
  virtual void register_ops(OpRegistry& registry, OpContext& context) = 0;
  // Called on the background thread before the world is finalized (or abandoned: this rank
  // stopped alone, its peers may wait inside a collective it never joins, so nothing here may wait
  // for them).
  virtual void shutdown(WorldEnd /*end*/) {}
  // Another rank aborted its side of this backend's collectives (OpContext::report_abort): end
  // this rank's, whose peer may never come. The watchdog's thread.
  virtual void peer_aborted(const std::string& /*notice*/) {}
  // A process set's group is going away (remove_process_set): drop what was made for it.
  virtual void forget(const Communicator& /*group*/) {}
};

struct BuildFeatures {
  bool mpi = false;
  bool nccl = false;
  bool cuda = false;
  int nccl_version = 0;  // NCCL_VERSION_CODE of the headers built against
};

// Defined in backends/compiled_backends.cc.
BuildFeatures compiled_features();
// Initializes the transport, waiting at most settings.start_timeout_seconds for every rank to
// arrive (where the launcher lets it tell); background thread only.
std::unique_ptr<World> create_world(const Settings& settings);
// Ordered by preference: device backends first, so NCCL wins over MPI for GPU tensors.
std::vector<std::unique_ptr<Backend>> create_backends(World& world);

}  // namespace hvd::detail
