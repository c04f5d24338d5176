// The one Runtime behind hvd::init(): its lifecycle (init, shutdown, the exit handlers), the
// local queries that answer until this rank's own hvd::shutdown(), the snapshots, and the
// timeline switches. The process-wide state of the public API lives here and only here; the
// collectives (api.cc) reach the runtime through detail::running_runtime().
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>

#include "core/backend.h"
#include "core/introspection.h"
#include "core/logging.h"
#include "core/process_set_access.h"
#include "core/runtime.h"
#include "core/stopped.h"
#include "horovodcpp/horovod.h"

namespace hvd {
namespace {

std::mutex g_mutex;
std::unique_ptr<detail::Runtime> g_runtime;  // the one pointer behind hvd::init; set under g_mutex
std::atomic<detail::Runtime*> g_published{nullptr};  // the same, for readers on any thread
std::atomic<bool> g_shut_down{false};  // this rank called hvd::shutdown()
detail::Runtime* g_abandoned = nullptr;  // a runtime left to a stuck background thread; never freed

// Keeps the runtime alive for its stuck background thread (destroying it under that thread
// would be a use-after-free), reachable so leak checkers do not count it.
void abandon_runtime() { g_abandoned = g_runtime.release(); }

// Lifecycle rules (README "Lifecycle"): local queries answer from hvd::init() until this rank's
// own hvd::shutdown(), whatever happened to its peers; collectives need a running runtime.
detail::Runtime& initialized_runtime(const std::string& caller) {
  detail::Runtime* rt = g_published.load(std::memory_order_acquire);
  if (rt == nullptr) throw Error(caller + ": horovodcpp is not initialized; call hvd::init() first");
  if (g_shut_down.load())
    throw Error(caller + ": horovodcpp has been shut down (call it between hvd::init() and hvd::shutdown())");
  return *rt;
}

// A program that leaves without hvd::shutdown() (return from main, exit(), an uncaught
// exception) shuts down here, so its peers learn which rank left instead of hanging, and the
// background thread is gone before the statics it uses (the logger) are destroyed. Bounded:
// a frozen peer must not hang the exit.
constexpr std::chrono::seconds kExitShutdownLimit{10};

void shut_down_at_exit() {
  std::unique_lock<std::mutex> lock(g_mutex, std::try_to_lock);
  if (!lock.owns_lock() || !g_runtime || g_shut_down.load()) return;
  g_shut_down = true;
  if (!g_runtime->stop(kExitShutdownLimit)) abandon_runtime();
}

std::terminate_handler g_previous_terminate = nullptr;

[[noreturn]] void shut_down_on_terminate() {
  shut_down_at_exit();
  if (g_previous_terminate != nullptr) g_previous_terminate();
  std::abort();
}

void install_exit_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Registered after the logger exists, so it runs before the logger is destroyed.
    detail::log_enabled(detail::LogLevel::Debug);
    std::atexit(shut_down_at_exit);
    g_previous_terminate = std::set_terminate(shut_down_on_terminate);
  });
}

detail::Runtime& runtime(const std::string& caller) {
  detail::Runtime& rt = initialized_runtime(caller);
  if (!rt.running()) throw Error(caller + ": " + detail::stopped_message(rt.stop_reason()));
  return rt;
}

}  // namespace

namespace detail {
Runtime& running_runtime(const std::string& caller) { return runtime(caller); }
Runtime& initialized_runtime_for(const std::string& caller) { return initialized_runtime(caller); }
}  // namespace detail

void init() { init(std::vector<ProcessSet>{}); }

void init(std::vector<ProcessSet> process_sets) {
  std::vector<std::vector<int>> ranks;
  for (const auto& set : process_sets) {
    auto identity = detail::ProcessSetAccess::identity(set);
    if (!identity) throw Error("hvd::init(process_sets): the global process set is always there; do not pass it");
    if (identity->id.load() >= 0) throw Error("hvd::init(process_sets): " + set.describe() + " is already registered");
    ranks.push_back(identity->ranks);
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_shut_down.load())
    throw Error("hvd::init() after hvd::shutdown() is not supported: MPI cannot be initialized twice in one process, "
                "so a process runs hvd::init() ... hvd::shutdown() once");
  if (g_runtime) {
    if (g_runtime->running() && !process_sets.empty())
      throw Error("hvd::init(process_sets): horovodcpp is already initialized; add sets with hvd::add_process_set()");
    if (g_runtime->running()) return;  // a second hvd::init() is harmless, as in Horovod
    throw Error("hvd::init(): the runtime has already stopped (" + g_runtime->stop_reason() +
                ") and cannot be restarted in this process; call hvd::shutdown()");
  }
  auto rt = std::make_unique<detail::Runtime>(detail::read_settings_from_environment(), ranks);
  install_exit_handlers();
  rt->start();
  // The runtime registered them in this order after the global set (id 0).
  for (std::size_t i = 0; i < process_sets.size(); ++i)
    detail::ProcessSetAccess::identity(process_sets[i])->id = static_cast<int>(i + 1);
  g_runtime = std::move(rt);
  g_published.store(g_runtime.get(), std::memory_order_release);
}

void shutdown() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_runtime) return;
  g_shut_down = true;
  if (!g_runtime->stop()) abandon_runtime();  // its background thread is stuck in MPI
}

// True from a successful hvd::init() until this rank's hvd::shutdown(), except after the runtime
// failed (stall shutdown, lost peer): a peer's orderly shutdown is the normal end of a job and
// leaves it true, so `if (hvd::is_initialized() && hvd::rank() == 0) save(...)` works.
bool is_initialized() {
  detail::Runtime* rt = g_published.load(std::memory_order_acquire);
  return rt != nullptr && !g_shut_down.load() && !rt->failed();
}

int rank() { return initialized_runtime("hvd::rank()").topology().rank; }
int size() { return initialized_runtime("hvd::size()").topology().size; }
int local_rank() { return initialized_runtime("hvd::local_rank()").topology().local_rank; }
int local_size() { return initialized_runtime("hvd::local_size()").topology().local_size; }
int cross_rank() { return initialized_runtime("hvd::cross_rank()").topology().cross_rank; }
int cross_size() { return initialized_runtime("hvd::cross_size()").topology().cross_size; }

namespace detail {
// Local snapshots, like rank(): they answer after a peer's shutdown stopped the runtime too (a
// rank that reads them just after the last collective may find its peers gone already).
ControllerStats controller_stats() {
  return initialized_runtime("hvd::detail::controller_stats()").controller_stats();
}
TunableParameters tuned_parameters() {
  return initialized_runtime("hvd::detail::tuned_parameters()").tuned_parameters();
}
bool autotune_decided() {
  return initialized_runtime("hvd::detail::autotune_decided()").autotune_decided();
}
void request_parameters(const TunableParameters& p) {
  initialized_runtime("hvd::detail::request_parameters()").request_parameters(p);
}
long background_thread_id() {
  return initialized_runtime("hvd::detail::background_thread_id()").background_thread_id();
}
}  // namespace detail

bool mpi_built() { return detail::compiled_features().mpi; }
bool nccl_built() { return detail::compiled_features().nccl; }
bool cuda_built() { return detail::compiled_features().cuda; }
int nccl_version() { return detail::compiled_features().nccl_version; }

SubmissionBatch::SubmissionBatch() { runtime("hvd::SubmissionBatch").begin_batch(); }

// The runtime is never freed after init (only stopped), so the one that began the batch is here.
SubmissionBatch::~SubmissionBatch() {
  if (detail::Runtime* rt = g_published.load(std::memory_order_acquire)) rt->end_batch();
}

void start_timeline(const std::string& path, bool mark_cycles) {
  if (path.empty()) throw InvalidArgument("hvd::start_timeline: the path is empty");
  try {
    runtime("hvd::start_timeline").start_timeline(path, mark_cycles);
  } catch (const TimelineError& e) {
    throw Error(e.what());  // the one exception type users catch
  }
}

// Local, like the snapshots: a signal handler or the end of a program completes its file even
// when a peer's shutdown has already stopped the collectives.
void stop_timeline() { initialized_runtime("hvd::stop_timeline").timeline().stop(); }

}  // namespace hvd
