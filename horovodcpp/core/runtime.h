// The one object behind hvd::init(), and its lifecycle only: it starts the background thread
// ("hvd-background", which makes every MPI call but the watchdog's on its own communicator), sets up the world, backends and
// process sets there (every rank agrees that init worked), runs the loop, and stops it (asked,
// or because a peer left or something failed), or gives up on it when the watchdog says it is
// stuck. Each part has its own owner, made here once the world exists:
//
//   Runtime::run_loop      wait for a start, run the cycle, let autotune see it, stop if asked
//     CyclePacer           when to look for the next cycle and when to ask for one
//     Cycle                one round for every process set this rank is in, the global one first
//       Controller         negotiation per set (controller.h lists its steps)
//       Executor           entries for each response -> op->execute(entries, response, group) -> finish
//     Autotune             rank 0's tuner, and the parameters every rank applies
//
// User threads only enqueue (TensorQueue, LiveHandles, GeneratedNames) and read published
// snapshots (stats, tuned parameters, topology).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/autotune.h"
#include "core/backend.h"
#include "core/controller.h"
#include "core/cycle.h"
#include "core/cycle_pacer.h"
#include "core/executor.h"
#include "core/fusion_buffer.h"
#include "core/generated_names.h"
#include "core/live_handles.h"
#include "core/logging.h"
#include "core/op_registry.h"
#include "core/process_set_table.h"
#include "core/progress.h"
#include "core/settings.h"
#include "core/tensor_queue.h"
#include "core/watchdog.h"
#include "timeline/timeline.h"

namespace hvd::detail {

// The timeline's warnings (dropped events, a failed write) go to the runtime's log.
inline TimelineOptions logged_timeline_options() {
  TimelineOptions options;
  options.warn = [](const std::string& message) { log_warn(message); };
  return options;
}

struct Topology {
  int rank = 0, size = 1, local_rank = 0, local_size = 1, cross_rank = 0, cross_size = 1;
};

// How the runtime reaches the other ranks: the world and the backends over it. The build's
// (backends/compiled_backends.cc) unless a test brings its own (tests/unit/fake_world.h).
struct Transport {
  std::function<std::unique_ptr<World>(const Settings&)> create_world = detail::create_world;
  std::function<std::vector<std::unique_ptr<Backend>>(World&)> create_backends = detail::create_backends;
};

class Runtime {
 public:
  // `process_sets`: the ranks of each set hvd::init() registers (ids 1, 2, ... in this order).
  explicit Runtime(Settings settings, std::vector<std::vector<int>> process_sets = {}, Transport transport = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Starts the background thread and waits until the world is up; throws hvd::Error on failure.
  void start();
  // Asks every rank to stop, waits for the background thread; pending operations fail.
  // Returns false when the watchdog gave up on a stuck background thread: it was left running
  // (it may never return from MPI), so this object must outlive it (the caller leaks it).
  // With a `limit`, gives up waiting after it (exit paths: a frozen peer must not hang exit).
  bool stop(std::optional<std::chrono::milliseconds> limit = std::nullopt);
  // Collectives can run: false once the runtime stopped, for whatever reason.
  bool running() const { return running_.load(); }
  // The runtime stopped because something went wrong (a stall, a lost peer, a failed
  // negotiation), not because this rank or a peer called hvd::shutdown().
  bool failed() const { return failed_.load(); }
  // Why collectives are no longer possible (empty while running). Any thread.
  std::string stop_reason() const;

  const Topology& topology() const { return topology_; }
  const Settings& settings() const { return settings_; }
  Timeline& timeline() { return timeline_; }
  void start_timeline(const std::string& path, bool mark_cycles);

  // Queues the entries (with their requests) under one handle; throws hvd::InvalidArgument when a
  // name is already in flight, hvd::Error when the runtime has stopped.
  // In process set `process_set_id`: throws naming the op, the tensor and the set when the set is
  // not registered or this rank is not in it.
  std::shared_ptr<HandleState> enqueue(std::vector<TensorTableEntry> entries, std::vector<Request> requests,
                                       int process_set_id = 0);
  // hvd::SubmissionBatch on the calling thread (TensorQueue::begin_batch).
  void begin_batch() { queue_.begin_batch(); }
  void end_batch() { queue_.end_batch(); }
  // Throws hvd::Error naming `op()` and the set unless it is registered and this rank is in it;
  // `ranks`, when not null, gets its global ranks (copied only then). Any thread.
  void check_process_set(int process_set_id, const std::function<std::string()>& op, std::vector<int>* ranks);
  bool dynamic_process_sets() const { return settings_.dynamic_process_sets; }
  // The controller's counters as of the last cycle (any thread; tests and benchmarks).
  ControllerStats controller_stats() const;
  // The tuned parameters in effect (the settings' until autotune changes them). Any thread.
  TunableParameters tuned_parameters() const;
  // False while this rank's autotuner is still deciding (rank 0 with HOROVOD_AUTOTUNE=1 only;
  // its final decision takes effect on every rank in a later cycle). Any thread.
  bool autotune_decided() const;
  // The background thread's Linux thread id (0 before it started). Any thread.
  long background_thread_id() const { return background_tid_.load(); }
  // Benchmarks and tests: on rank 0, asks every rank to switch to `p` in a later global cycle,
  // carried and applied like an autotune decision (the same cycle everywhere); on other ranks it
  // changes nothing. Throws hvd::Error while this rank's autotuner is still deciding, or naming a
  // value out of range. Any thread.
  void request_parameters(const TunableParameters& p);
  // Name for an operation the user did not name: "<prefix>.noname.<n>", n counting per prefix.
  std::string generate_name(const std::string& prefix) { return names_.next(prefix); }

 private:
  void background_main();
  void initialize_on_background_thread();
  void set_up_on_world();  // everything after the world exists; throws on failure
  // Collective: "" when every rank set up, else the failing ranks and the first one's reason.
  std::string agree_on_init(const std::string& local_error);
  std::string backend_names() const;  // "NCCL, MPI"
  std::string describe_setup() const;  // the info line after init
  void run_loop();
  // Watchdog thread: the background thread is stuck; fail every operation and give up on it.
  void abandon(const std::string& reason);
  void shut_down_on_background_thread(StopKind kind, const std::string& reason);
  // Backends first (they may still use the world), then the sets' groups, the timeline, the world
  // (finalized, or given up where peers may never finalize: see world.h).
  void release_world(WorldEnd end = WorldEnd::Finalize);
  // Process sets (runtime_process_sets.cc).
  std::unique_ptr<Controller> make_controller(const ProcessSetState& set);
  // Under the table's lock; `op()` runs only to write an error.
  const std::vector<int>& check_member(int process_set_id, const std::function<std::string()>& op);
  std::string create_initial_process_sets();  // collective; "" or why the ranks disagree

  Settings settings_;
  std::vector<std::vector<int>> initial_process_sets_;
  Transport transport_;
  Topology topology_;
  Timeline timeline_{logged_timeline_options()};
  TensorQueue queue_;
  FusionBuffer fusion_buffer_;
  OpRegistry registry_;
  LiveHandles live_handles_;  // what abandon() fails
  GeneratedNames names_;
  Progress progress_;

  // The parts over the world, made on the background thread once it exists (before start()
  // returns), and released before it (release_world, then in reverse order here).
  std::unique_ptr<World> world_;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::unique_ptr<OpContext> op_context_;
  ProcessSetTable process_sets_;  // after the world: its groups go first (release_world clears it)
  std::unique_ptr<Autotune> autotune_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<Cycle> cycle_;
  std::unique_ptr<CyclePacer> pacer_;
  std::unique_ptr<Watchdog> watchdog_;

  // The lifecycle.
  std::thread thread_;
  std::atomic<long> background_tid_{0};
  std::atomic<bool> running_{false};
  std::atomic<bool> failed_{false};
  std::atomic<bool> shutdown_requested_{false};
  std::atomic<bool> abandoned_{false};  // the watchdog gave up on the background thread
  std::mutex init_mutex_;
  std::condition_variable init_cv_;
  bool init_done_ = false;  // under init_mutex_
  bool loop_done_ = false;  // the background loop returned (under init_mutex_)
  std::string init_error_;
  mutable std::mutex stop_mutex_;
  std::string stop_reason_;  // under stop_mutex_
};

}  // namespace hvd::detail
