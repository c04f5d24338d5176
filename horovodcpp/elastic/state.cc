// hvd::elastic::State and run(): commits to this host's store, the restore agreement (newest
// commit any rank holds, broadcast from the lowest rank holding it), and the clean stop when
// hvdrun announces a change of hosts. Collectives go through the public host-tensor API.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>

#include "core/logging.h"
#include "core/settings.h"
#include "elastic/commit_store.h"
#include "elastic/host_notice.h"
#include "horovodcpp/elastic.h"

namespace hvd::elastic {
namespace {

using hvd::detail::CommitStore;
using hvd::detail::log_warn;
using hvd::detail::StoredCommit;

std::vector<std::int64_t> allreduce_ints(std::vector<std::int64_t> values, ReduceOp op,
                                         const std::string& name) {
  auto t = HostTensor::allocate(DataType::Int64, {static_cast<std::int64_t>(values.size())});
  std::memcpy(t->data(), values.data(), values.size() * sizeof(std::int64_t));
  AllreduceOptions options;
  options.op = op;
  options.name = name;
  allreduce_async(t, t, options).wait();
  std::memcpy(values.data(), t->data(), values.size() * sizeof(std::int64_t));
  return values;
}

std::int64_t allreduce_int(std::int64_t value, ReduceOp op, const std::string& name) {
  return allreduce_ints({value}, op, name)[0];
}

// Root's bytes on every rank (length first, then the bytes).
std::string broadcast_string(const std::string& bytes, int root, const std::string& name) {
  auto length = HostTensor::allocate(DataType::Int64, {1});
  *length->data_as<std::int64_t>() = static_cast<std::int64_t>(bytes.size());
  broadcast_async(length, length, {root, name + ".length"}).wait();
  const std::int64_t n = *length->data_as<std::int64_t>();
  if (n == 0) return {};
  auto data = HostTensor::allocate(DataType::UInt8, {n});
  if (rank() == root) std::memcpy(data->data(), bytes.data(), bytes.size());
  broadcast_async(data, data, {root, name}).wait();
  return std::string(static_cast<const char*>(data->data()), static_cast<std::size_t>(n));
}

// HOROVOD_ELASTIC_JOB (hvdrun sets it, the same for every relaunch), else a name unique to this
// run, so a plain mpirun never resumes from an unrelated earlier job's commits.
std::string job_name() {
  const std::string job = hvd::detail::read_settings_from_environment().elastic_job;
  if (!job.empty()) return job;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  const std::string mine = std::string("run-") + host + "-" + std::to_string(getpid());
  return broadcast_string(mine, 0, "hvd.elastic.job");
}

bool user_chose_dir() { return !hvd::detail::read_settings_from_environment().elastic_dir.empty(); }

// One write per line: mpirun tags each write of a rank separately, and hvdrun reads these lines.
void say(const std::string& message) {
  if (rank() != 0) return;
  const std::string line = "horovodcpp elastic: " + message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

// Runs step on this rank, then every rank learns whether it failed on any: a step that fails on
// some ranks only (a state that cannot be read back on one of them) would otherwise leave the
// others waiting alone in the next collective. A rank that failed rethrows its own exception (a
// Python one stays itself); the others throw an Error naming the highest rank that failed.
void agree_on(const std::function<void()>& step, const std::string& what, const std::string& name) {
  std::exception_ptr error;
  try {
    step();
  } catch (...) {
    error = std::current_exception();
  }
  const std::int64_t failed = allreduce_int(error ? rank() : -1, ReduceOp::Max, name);
  if (error) std::rethrow_exception(error);
  if (failed >= 0) throw Error(what + " failed on rank " + std::to_string(failed) + " (see its error)");
}

// agree_on for a failure already caught (an error with the store: a directory that is not this
// user's alone, a failed write), which names this rank in its message.
void throw_if_any_failed(const std::string& failure, const std::string& what, const std::string& name) {
  agree_on(
      [&] {
        if (!failure.empty()) throw Error(what + " failed on rank " + std::to_string(rank()) + ": " + failure);
      },
      what, name);
}

}  // namespace

State::State() { hvd::detail::install_host_notice_handler(); }
State::~State() = default;

void State::on_reset(std::function<void()> callback) {
  reset_callbacks_.push_back(std::move(callback));
}

const std::string& State::store_dir() {
  if (store_dir_.empty()) store_dir_ = hvd::detail::elastic_dir(job_name());
  return store_dir_;
}

void State::commit() {
  const std::int64_t id = commit_id_ + 1;
  std::int64_t failed_rank = -1;
  std::string failure;
  std::exception_ptr unserializable;  // rethrown as itself after the agreement below
  std::string bytes;
  try {
    bytes = serialize();
  } catch (...) {
    unserializable = std::current_exception();
    failed_rank = rank();
  }
  if (local_rank() == 0 && !unserializable) {
    try {
      CommitStore(store_dir()).write({id, size(), bytes});
    } catch (const std::exception& e) {
      failed_rank = rank();
      failure = e.what();
    }
  } else {
    store_dir();
  }
  // Also the point where every host has its copy: no rank stops before all have written.
  const auto agreed = allreduce_ints({hvd::detail::host_notice_pending() ? 1 : 0, failed_rank},
                                     ReduceOp::Max, "hvd.elastic.commit");
  if (unserializable) std::rethrow_exception(unserializable);
  if (agreed[1] >= 0)
    throw Error("elastic commit " + std::to_string(id) + " failed on rank " +
                std::to_string(agreed[1]) +
                (failure.empty() ? std::string(" (see its error)") : ": " + failure));
  commit_id_ = id;
  if (agreed[0] != 0)
    throw HostsChanged("hvdrun announced a change of hosts: stopping after commit " +
                       std::to_string(id) + " so the job is relaunched at the new size");
}

void State::sync() {
  std::string bytes;
  agree_on([&] { if (rank() == 0) bytes = serialize(); }, "elastic sync (saving rank 0's state)",
           "hvd.elastic.sync.saved");
  bytes = broadcast_string(bytes, 0, "hvd.elastic.sync");
  agree_on([&] { if (rank() != 0) deserialize(bytes); }, "elastic sync (loading rank 0's state)",
           "hvd.elastic.sync.loaded");
}

void State::restore() {
  const CommitStore store(store_dir());
  std::int64_t mine = 0;
  std::string failure;
  try {
    mine = store.newest_id();  // warns about every damaged or foreign file it skips
  } catch (const std::exception& e) {
    failure = e.what();
  }
  throw_if_any_failed(failure, "elastic restore", "hvd.elastic.store");
  const std::int64_t newest = allreduce_int(mine, ReduceOp::Max, "hvd.elastic.newest");
  if (newest == 0) {
    say("no commit in " + store.dir() + ": starting from rank 0's state at size " +
        std::to_string(size()));
    sync();
    return;
  }
  const int holder = static_cast<int>(
      allreduce_int(mine == newest ? rank() : size(), ReduceOp::Min, "hvd.elastic.holder"));
  std::string payload;
  std::int64_t taken_at = 0;
  if (rank() == holder) {
    std::string problem;
    std::optional<StoredCommit> commit;
    try {
      commit = store.read(newest, &problem);
    } catch (const std::exception& e) {
      problem = e.what();
    }
    if (commit) {
      payload = std::move(commit->payload);
      taken_at = commit->world_size;
    } else {
      log_warn("elastic restore: " + problem);
    }
  }
  taken_at = allreduce_int(taken_at, ReduceOp::Max, "hvd.elastic.taken_at");
  payload = broadcast_string(payload, holder, "hvd.elastic.restore");
  if (taken_at == 0) throw Error("elastic restore: rank " + std::to_string(holder) +
                                 " could no longer read commit " + std::to_string(newest));
  agree_on([&] { deserialize(payload); }, "elastic restore (loading commit " + std::to_string(newest) + ")",
           "hvd.elastic.loaded");
  failure.clear();
  if (local_rank() == 0 && mine != newest) {
    try {
      CommitStore(store_dir()).write({newest, static_cast<int>(taken_at), payload});
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  throw_if_any_failed(failure, "elastic restore (storing this host's copy of commit " + std::to_string(newest) + ")",
                      "hvd.elastic.copied");
  commit_id_ = newest;
  restored_world_size_ = static_cast<int>(taken_at);
  say("resumed from commit " + std::to_string(newest) + " (taken at size " +
      std::to_string(taken_at) + ", copy of rank " + std::to_string(holder) + ") at size " +
      std::to_string(size()));
  if (taken_at != size())
    for (auto& callback : reset_callbacks_) callback();
}

namespace detail {

void run_elastic(State& state, const std::function<void()>& train) {
  hvd::detail::install_host_notice_handler();
  if (!is_initialized()) init();
  state.restore();
  try {
    train();
  } catch (const HostsChanged& e) {
    say(e.what());
    shutdown();
    std::exit(kHostsChangedExitCode);
  }
  // Every rank finished: a job-named store (not one the user chose) has served its purpose.
  barrier();
  if (local_rank() == 0 && !user_chose_dir()) {
    try {
      CommitStore(state.store_dir()).remove_all();
    } catch (const std::exception& e) {
      log_warn(std::string("elastic: the job's commits were left in place: ") + e.what());
    }
  }
}

}  // namespace detail
}  // namespace hvd::elastic
