// HOROVOD_AUTOTUNE=1, the runtime's side: rank 0's ParameterManager measures each cycle's global
// round and decides; the global set's Controller carries a decision to every rank and applies it
// in one cycle (controller.h, step 2b); here the cycle time (the settle window's longest hold)
// and the other process sets follow. A benchmark may also ask for parameters of its own
// (request), which travel the same way once the tuner is done. after_cycle() runs on the
// background thread, the rest on any thread. Owned by the Runtime.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/message.h"
#include "core/parameter_manager.h"
#include "core/process_set_table.h"
#include "core/settings.h"
#include "core/tensor_queue.h"
#include "core/tunable_parameters.h"

namespace hvd::detail {

class Autotune {
 public:
  // Sets the queue's cycle time from the settings; on rank 0 with HOROVOD_AUTOTUNE=1 starts the
  // tuner. The queue and the table outlive this.
  Autotune(const Settings& settings, int rank, TensorQueue& queue, ProcessSetTable& sets);

  // After each cycle (every rank at the same point): parameters that took effect in its global
  // round set the queue's cycle time and reach the other sets; rank 0 measures the round and may
  // propose new parameters, or the ones request() was given.
  void after_cycle(const ResponseList& global, std::chrono::steady_clock::time_point cycle_start);

  // The parameters in effect (the settings' until a change took effect). Any thread.
  TunableParameters tuned() const;
  // False while rank 0's tuner is still deciding. Any thread.
  bool decided() const;
  // See Runtime::request_parameters. Any thread.
  void request(const TunableParameters& p);

 private:
  int rank_;
  TensorQueue& queue_;
  ProcessSetTable& sets_;
  std::unique_ptr<ParameterManager> tuner_;  // rank 0 with HOROVOD_AUTOTUNE=1
  std::vector<std::size_t> keys_;            // the last cycle's name keys, for tuner_

  mutable std::mutex mutex_;
  TunableParameters tuned_;                     // published when parameters take effect
  bool decided_ = true;                         // published by the background thread
  std::optional<TunableParameters> requested_;  // request(), until rank 0 proposes it
  std::atomic<bool> has_request_{false};        // lets each cycle skip the lock when none waits
};

}  // namespace hvd::detail
