#include "backends/mpi/mpi_start_check.h"

#include <stdexcept>
#include <string>

#ifdef HVD_WITH_PMIX
#include <pmix.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <algorithm>
#include <mutex>
#include <thread>
#include <vector>
#endif

namespace hvd::detail {

#ifndef HVD_WITH_PMIX
void wait_for_every_rank(double) {}
void finish_start_check() {}
#else
namespace {

bool g_holds_pmix = false;  // background thread only

constexpr const char* kArrivedKey = "horovodcpp.arrived";

// The answers to the nonblocking lookups, filled by PMIx's progress thread.
struct Arrivals {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<int> status;  // per rank: 1 pending, 0 arrived, -1 not arrived (timeout or error)
  int pending = 0;
};

struct Lookup {
  Arrivals* arrivals;
  int rank;
};

// One round of lookups: what PMIx may still read or call back into until every answer came.
struct LookupRound {
  Arrivals arrivals;
  std::vector<Lookup> lookups;
  pmix_info_t timeout;  // PMIx keeps a pointer to it until it has handled each request
  explicit LookupRound(int size) : lookups(size) {
    arrivals.status.assign(size, 0);
    PMIX_INFO_CONSTRUCT(&timeout);
  }
  ~LookupRound() { PMIX_INFO_DESTRUCT(&timeout); }
};

void on_lookup(pmix_status_t status, pmix_value_t*, void* data) {
  auto* lookup = static_cast<Lookup*>(data);
  Arrivals& a = *lookup->arrivals;
  // Notified under the lock: once the waiter sees no answer pending it frees `a`, so nothing here
  // may touch it after the unlock. (A notify after the unlock broadcast on freed memory, now and
  // then reused by then: PMIx's progress thread hung in it, and with it every rank's MPI_Init.)
  std::lock_guard<std::mutex> lock(a.mutex);
  a.status[lookup->rank] = status == PMIX_SUCCESS ? 0 : -1;
  --a.pending;
  a.cv.notify_all();
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size() && i < 16; ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 16) out += ", ... (" + std::to_string(ranks.size()) + " ranks)";
  return out;
}

}  // namespace

void finish_start_check() {
  if (!g_holds_pmix) return;
  g_holds_pmix = false;
  PMIx_Finalize(nullptr, 0);
}

void wait_for_every_rank(double timeout_seconds) {
  // Only under a PMIx launcher (mpirun, srun --mpi=pmix); elsewhere PMIx_Init would fail or,
  // worse, start a singleton.
  if (timeout_seconds <= 0 || std::getenv("PMIX_NAMESPACE") == nullptr || std::getenv("PMIX_RANK") == nullptr) return;
  pmix_proc_t me;
  if (PMIx_Init(&me, nullptr, 0) != PMIX_SUCCESS) return;
  g_holds_pmix = true;
  // PMIx_Finalize before MPI_Init breaks Open MPI's own PMIx client ("getting local rank
  // failed"): finalize only when this rank gives up; otherwise the reference stays until exit.
  struct FinalizeOnFailure {
    bool failed = false;
    ~FinalizeOnFailure() {
      if (failed) finish_start_check();
    }
  } finalize;
  pmix_value_t value;
  PMIX_VALUE_CONSTRUCT(&value);
  value.type = PMIX_INT;
  value.data.integer = 1;
  if (PMIx_Put(PMIX_GLOBAL, kArrivedKey, &value) != PMIX_SUCCESS || PMIx_Commit() != PMIX_SUCCESS) return;

  pmix_proc_t job;
  PMIX_PROC_CONSTRUCT(&job);
  PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
  pmix_value_t* size_value = nullptr;
  if (PMIx_Get(&job, PMIX_JOB_SIZE, nullptr, 0, &size_value) != PMIX_SUCCESS || size_value == nullptr) return;
  const int size = static_cast<int>(size_value->data.uint32);
  PMIX_VALUE_RELEASE(size_value);

  // PMIx's own timeout may fire early (whole seconds, counted by the server): ask again for the
  // ranks still missing until our own deadline has passed.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  std::vector<int> missing;
  for (int r = 0; r < size; ++r)
    if (r != static_cast<int>(me.rank)) missing.push_back(r);
  while (!missing.empty()) {
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    // The round outlives this function if PMIx never answers: it is leaked on purpose then.
    auto* round = new LookupRound(size);
    Arrivals* arrivals = &round->arrivals;
    const int seconds = std::max(1, static_cast<int>(left + 0.999));
    PMIX_INFO_LOAD(&round->timeout, PMIX_TIMEOUT, &seconds, PMIX_INT);
    for (int r : missing) {
      round->lookups[r] = {arrivals, r};
      pmix_proc_t peer;
      PMIX_PROC_CONSTRUCT(&peer);
      PMIX_LOAD_PROCID(&peer, me.nspace, static_cast<pmix_rank_t>(r));
      std::lock_guard<std::mutex> lock(arrivals->mutex);
      arrivals->status[r] = 1;
      ++arrivals->pending;
      if (PMIx_Get_nb(&peer, kArrivedKey, &round->timeout, 1, on_lookup, &round->lookups[r]) != PMIX_SUCCESS) {
        --arrivals->pending;
        arrivals->status[r] = 0;  // cannot ask: let MPI_Init decide
      }
    }
    std::unique_lock<std::mutex> lock(arrivals->mutex);
    const bool answered = arrivals->cv.wait_for(lock, std::chrono::duration<double>(seconds + 2.0),
                                                [&] { return arrivals->pending == 0; });
    std::vector<int> still;
    for (int r : missing)
      if (arrivals->status[r] != 0) still.push_back(r);
    missing = std::move(still);
    if (!answered) return;  // PMIx did not answer in time: leave the decision to MPI_Init
    lock.unlock();
    delete round;
    if (!missing.empty() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (missing.empty()) return;
  finalize.failed = true;
  throw std::runtime_error("rank" + std::string(missing.size() > 1 ? "s " : " ") + rank_list(missing) +
                           " did not reach hvd::init() within HOROVOD_START_TIMEOUT=" +
                           std::to_string(static_cast<long long>(timeout_seconds)) + " s (rank " +
                           std::to_string(me.rank) + " of " + std::to_string(size) +
                           " waited; a rank that starts late, or not at all, blocks every other rank's init)");
}
#endif

}  // namespace hvd::detail
