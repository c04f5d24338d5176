// The one object behind hvd::init(): owns the world, backends, op registry, controller, tensor
// queue, fusion buffer and timeline, and runs the background thread ("hvd-background") that
// makes every MPI call: each cycle it pops new requests, negotiates through each process set's
// Controller (the global set first, then the others this rank belongs to, by ascending id) and
// executes the agreed responses with the registry's ops. User threads only enqueue.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/background_placement.h"
#include "core/backend.h"
#include "core/controller.h"
#include "core/fusion_buffer.h"
#include "core/op_registry.h"
#include "core/parameter_manager.h"
#include "core/process_set_table.h"
#include "core/progress.h"
#include "core/settings.h"
#include "core/tensor_queue.h"
#include "core/watchdog.h"
#include "timeline/timeline.h"

namespace hvd::detail {

struct Topology {
  int rank = 0, size = 1, local_rank = 0, local_size = 1, cross_rank = 0, cross_size = 1;
};

class Runtime {
 public:
  // `process_sets`: the ranks of each set hvd::init() registers (ids 1, 2, ... in this order).
  explicit Runtime(Settings settings, std::vector<std::vector<int>> process_sets = {});
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

  // Queues the entries (with their requests) under one handle; throws hvd::Error when a name is
  // already in flight or the runtime has stopped.
  // In process set `process_set_id`: throws naming the op, the tensor and the set when the set is
  // not registered or this rank is not in it.
  std::shared_ptr<HandleState> enqueue(std::vector<TensorTableEntry> entries, std::vector<Request> requests,
                                       int process_set_id = 0);
  // hvd::SubmissionBatch on the calling thread (TensorQueue::begin_batch).
  void begin_batch() { queue_.begin_batch(); }
  void end_batch() { queue_.end_batch(); }
  // The global ranks of a registered set this rank belongs to; throws hvd::Error otherwise,
  // naming `op` and the set. Any thread.
  std::vector<int> process_set_ranks(int process_set_id, const std::string& op);
  // Whether the id names a registered set (any thread), and its ranks if so.
  bool find_process_set(int process_set_id, std::vector<int>* ranks);
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
  std::string generate_name(const std::string& prefix);

 private:
  void background_main();
  void initialize_on_background_thread();
  void set_up_on_world();  // everything after the world exists; throws on failure
  // Collective: "" when every rank set up, else the failing ranks and the first one's reason.
  std::string agree_on_init(const std::string& local_error);
  std::string backend_names() const;                        // "NCCL, MPI"
  std::string describe_setup() const;                       // the info line after init
  std::string describe_cycle(const ResponseList& list) const;  // the debug line per busy cycle
  void publish_stats();
  // Watchdog thread: the background thread is stuck; fail every operation and give up on it.
  void abandon(const std::string& reason);
  void track(const std::shared_ptr<HandleState>& state);
  void run_loop();
  bool wants_cycle(std::chrono::microseconds timeout);
  // While anything is in flight, a rank starts a cycle at least this often without news.
  static constexpr std::chrono::milliseconds kBusyHeartbeat{100};
  // One set's negotiation round and its responses; false when the runtime stopped.
  bool run_set_round(ProcessSetState& set, std::vector<Request> requests);
  bool busy_in_any_set();
  bool awaiting_others_in_any_set();
  // What this rank expects while it waits for the next cycle (ControlChannel::wait_for_cycle_start).
  CycleExpectation cycle_expectation();
  void execute(const Response& response, ProcessSetState& set);
  std::vector<TensorTableEntry> entries_for(const Response& response, ProcessSetState& set);
  // Process sets (runtime_process_sets.cc).
  std::unique_ptr<Controller> make_controller(const ProcessSetState& set);
  std::vector<int> check_member(int process_set_id, const std::string& op);  // under the table's lock
  std::string create_initial_process_sets();  // collective; "" or why the ranks disagree
  bool is_process_set_change(const Response& response) const;
  void change_process_sets(const Response& response, std::vector<TensorTableEntry>& entries);
  Status add_process_set(const Response& response, int* id);
  Status remove_process_set(const Response& response);
  void finish(std::vector<TensorTableEntry>& entries, const Status& status);
  enum class StopKind { Requested, PeerLeft, Failed };
  void shut_down_on_background_thread(StopKind kind, const std::string& reason);
  std::string describe_shutdown(const ResponseList& list) const;
  void release_world();
  // Autotune (runtime_autotune.cc): rank 0's tuner, fed after each global cycle's responses ran;
  // parameters that took effect this cycle set the queue's cycle time and reach the other sets.
  void set_up_autotune();
  void autotune_after_cycle(const ResponseList& list, std::chrono::steady_clock::time_point cycle_start);

  Settings settings_;
  Topology topology_;
  Timeline timeline_;
  TensorQueue queue_;
  BackgroundPlacement placement_;  // background thread only
  FusionBuffer fusion_buffer_;
  OpRegistry registry_;
  std::unique_ptr<World> world_;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::unique_ptr<OpContext> op_context_;
  ProcessSetTable process_sets_;
  std::vector<std::vector<int>> initial_process_sets_;
  Controller* controller_ = nullptr;  // the global set's (owned by process_sets_)
  std::string set_failure_;  // background thread: a set's negotiation failed; stop next cycle
  Progress progress_;
  std::unique_ptr<Watchdog> watchdog_;
  std::atomic<bool> abandoned_{false};  // the watchdog gave up on the background thread

  std::thread thread_;
  std::atomic<long> background_tid_{0};
  std::atomic<bool> running_{false};
  std::atomic<bool> failed_{false};
  mutable std::mutex stop_mutex_;
  std::string stop_reason_;  // under stop_mutex_
  std::atomic<bool> shutdown_requested_{false};
  std::chrono::steady_clock::time_point last_cycle_start_{};
  std::unique_ptr<ParameterManager> tuner_;  // rank 0 with HOROVOD_AUTOTUNE=1
  std::vector<std::size_t> autotune_keys_;    // the last cycle's name keys, for tuner_

  std::mutex init_mutex_;
  std::condition_variable init_cv_;
  bool init_done_ = false;
  bool loop_done_ = false;  // the background loop returned (under init_mutex_)
  std::string init_error_;

  std::mutex handles_mutex_;
  std::vector<std::weak_ptr<HandleState>> live_handles_;  // what abandon() fails
  std::size_t prune_handles_at_ = 64;

  mutable std::mutex stats_mutex_;
  ControllerStats stats_;  // published by the background thread once per cycle
  TunableParameters tuned_;  // published when parameters take effect
  bool autotune_decided_ = true;  // published by the background thread
  std::optional<TunableParameters> requested_;  // request_parameters(), until rank 0 proposes it
  std::atomic<bool> has_request_{false};        // lets each cycle skip the lock when none waits

  std::mutex names_mutex_;
  std::map<std::string, long long> name_counters_;
};

}  // namespace hvd::detail
