// The process world as a backend sees it at init: topology, the control channel, the global,
// node-local and cross-node groups as Communicators (with host collectives over them, used by
// hierarchical allreduce), and new groups for process sets. Created and used only on the background thread; owned by the Runtime.
#pragma once

#include <cstdint>

#include <memory>
#include <vector>

#include "core/communicator.h"
#include "core/control_channel.h"
#include "core/liveness_channel.h"
#include "core/status.h"
#include "horovodcpp/horovod.h"

namespace hvd::detail {

enum class CommScope { Global, Local, Cross };

// How a rank leaves the world: with the others (finalized), or alone while they may stay inside a
// collective for good (abandoned: see World::abandon).
enum class WorldEnd { Finalize, Abandon };

class World {
 public:
  virtual ~World() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  virtual int cross_rank() const = 0;
  virtual int cross_size() const = 0;
  // True when every node has the same number of local ranks (hierarchical ops need it).
  virtual bool homogeneous() const = 0;
  virtual ControlChannel& control() = 0;  // the global group's
  virtual Communicator& global() = 0;
  virtual Communicator& local() = 0;
  virtual Communicator& cross() = 0;
  // Every rank, node by node and by local rank within each node (world ranks need not be in that
  // order), for Adasum of a node's chunks (Note [Adasum of a node's chunk]); null where the world
  // has none or the job is not homogeneous.
  virtual Communicator* node_major() { return nullptr; }
  // Collective over every rank of the world (each calls it at the same point, with the same
  // arguments): a new group of `global_ranks` (distinct, in the order that gives their ranks in
  // the group) with its own control channel; null on ranks not in it.
  virtual std::unique_ptr<Communicator> create_communicator(int id, const std::vector<int>& global_ranks) = 0;
  // The watchdog's transport (see core/watchdog.h), used from the watchdog thread.
  virtual LivenessChannel& liveness() = 0;
  // In-place host allreduce of `count` elements over one group.
  virtual Status host_allreduce(void* buffer, std::int64_t count, DataType dtype, ReduceOp op,
                                CommScope scope) = 0;
  // Releases the transport (MPI_Finalize when the runtime initialized MPI).
  virtual void finalize() = 0;
  // Gives the transport up without finalizing it, now and at destruction: for a rank whose peers
  // may stay inside a collective for good (MPI_Finalize would wait for them).
  virtual void abandon() = 0;
};

}  // namespace hvd::detail
