#include "timeline/timeline.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/logging.h"
#include "timeline/timeline_writer.h"

namespace hvd {
namespace {

using detail::TimelineEvent;

enum class SpanKind { Negotiate, Op, Activity };

// An open B event on a tensor's row. `written` is false when the B was dropped (queue full):
// its E is then dropped too, so every row in the file stays properly nested.
struct Span {
  SpanKind kind;
  bool written;
};

struct Row {
  int pid = 0;
  std::vector<Span> open;
};

const char* or_unknown(const char* text) { return text != nullptr ? text : "UNKNOWN"; }

}  // namespace

// The recording state shared by the event callers (background and GPU finalizer threads, under
// mu), start/stop (any thread, serialised by control_mu) and the writer thread.
struct Timeline::Impl {
  explicit Impl(TimelineOptions o) : options(o) {}

  const TimelineOptions options;
  std::mutex control_mu;
  std::atomic<bool> enabled{false};
  std::atomic<std::uint64_t> dropped{0};

  std::mutex mu;
  std::condition_variable wake_writer;
  std::condition_variable flushed;
  std::vector<TimelineEvent> pending;
  std::unordered_map<std::string, Row> rows;
  int next_pid = 1;
  bool mark_cycles = false;
  bool stopping = false;
  bool writer_running = false;
  std::uint64_t flush_requested = 0;
  std::uint64_t flush_done = 0;
  std::chrono::steady_clock::time_point start_time;
  std::unique_ptr<detail::TimelineWriter> writer;
  std::thread thread;

  bool recording_locked() const { return writer != nullptr && !stopping; }
  std::int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                start_time)
        .count();
  }

  // Droppable events (B, instants) respect the queue bound; E events of written spans and
  // metadata always go in, which the number of open spans and rows bounds.
  bool push_locked(TimelineEvent&& event, bool must_keep) {
    if (!must_keep && pending.size() >= options.queue_capacity) {
      dropped.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    pending.push_back(std::move(event));
    if (options.wake_when_half_full && pending.size() == options.queue_capacity / 2) {
      wake_writer.notify_one();
    }
    return true;
  }

  Row& row_locked(const std::string& tensor) {
    auto it = rows.find(tensor);
    if (it != rows.end()) return it->second;
    Row& row = rows[tensor];
    row.pid = next_pid++;
    push_locked({'M', 0, row.pid, 0, "process_name", {{"name", tensor}}}, true);
    push_locked(
        {'M', 0, row.pid, 0, "process_sort_index", {{"sort_index", std::to_string(row.pid)}}},
        true);
    return row;
  }

  void begin_locked(Row& row, SpanKind kind, std::string name, TimelineArgs args) {
    bool written =
        push_locked({'B', 0, row.pid, now_ns(), std::move(name), std::move(args)}, false);
    row.open.push_back({kind, written});
  }

  void end_top_locked(Row& row, TimelineArgs args) {
    Span span = row.open.back();
    row.open.pop_back();
    if (span.written) {
      push_locked({'E', 0, row.pid, now_ns(), "", std::move(args)}, true);
    } else {
      dropped.fetch_add(1, std::memory_order_relaxed);
    }
  }

  void close_all_locked(Row& row) {
    while (!row.open.empty()) end_top_locked(row, {});
  }

  void writer_loop();
};

void Timeline::Impl::writer_loop() {
  std::vector<TimelineEvent> batch;
  batch.reserve(options.queue_capacity);
  std::uint64_t reported_dropped = 0;
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    wake_writer.wait_for(lock, options.flush_interval, [&] {
      return stopping || flush_requested > flush_done ||
             (options.wake_when_half_full && pending.size() >= options.queue_capacity / 2);
    });
    batch.swap(pending);
    const bool last = stopping;
    const std::uint64_t request = flush_requested;
    lock.unlock();
    const std::uint64_t lost = dropped.load(std::memory_order_relaxed);
    if (lost != reported_dropped || last) {
      // The counter travels as metadata, so even a crashed run's file says what it lost.
      batch.push_back({'M', 0, 0, 0, "hvd_dropped_events", {{"count", std::to_string(lost)}}});
      reported_dropped = lost;
    }
    if (!batch.empty()) writer->write(batch);
    batch.clear();
    lock.lock();
    flush_done = request;
    flushed.notify_all();
    if (last && pending.empty()) break;
  }
  writer_running = false;
  flushed.notify_all();
}

Timeline::Timeline() : Timeline(TimelineOptions{}) {}
Timeline::Timeline(TimelineOptions options) : impl_(std::make_unique<Impl>(options)) {}
Timeline::~Timeline() { stop(); }

void Timeline::start(const std::string& path, int rank, bool mark_cycles) {
  std::lock_guard<std::mutex> control(impl_->control_mu);
  stop_locked_by_caller();
  const auto wall_us = std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  auto writer = std::make_unique<detail::TimelineWriter>(path, rank, wall_us);  // may throw
  std::lock_guard<std::mutex> lock(impl_->mu);
  Impl& s = *impl_;
  s.start_time = std::chrono::steady_clock::now();
  s.writer = std::move(writer);
  s.pending.clear();
  s.pending.reserve(s.options.queue_capacity);
  s.rows.clear();
  s.next_pid = 1;
  s.mark_cycles = mark_cycles;
  s.stopping = false;
  s.writer_running = true;
  s.flush_requested = s.flush_done = 0;
  s.dropped.store(0);
  s.thread = std::thread([&s] { s.writer_loop(); });
  s.enabled.store(true, std::memory_order_release);
}

void Timeline::stop() {
  std::lock_guard<std::mutex> control(impl_->control_mu);
  stop_locked_by_caller();
}

void Timeline::stop_locked_by_caller() {
  Impl& s = *impl_;
  std::thread thread;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.thread.joinable()) return;
    s.enabled.store(false, std::memory_order_release);
    for (auto& entry : s.rows) s.close_all_locked(entry.second);
    s.stopping = true;
    s.wake_writer.notify_one();
    thread = std::move(s.thread);
  }
  thread.join();
  std::lock_guard<std::mutex> lock(s.mu);
  const std::string path = s.writer->path();
  s.writer.reset();
  s.rows.clear();
  if (const auto lost = s.dropped.load()) {
    detail::log_warn("timeline: " + std::to_string(lost) + " events were dropped from '" + path +
                     "' because the writer's queue was full");
  }
}

bool Timeline::enabled() const { return impl_->enabled.load(std::memory_order_relaxed); }

std::uint64_t Timeline::dropped_events() const { return impl_->dropped.load(); }

void Timeline::flush() {
  Impl& s = *impl_;
  std::unique_lock<std::mutex> lock(s.mu);
  if (!s.writer_running) return;
  const std::uint64_t target = ++s.flush_requested;
  s.wake_writer.notify_one();
  s.flushed.wait(lock, [&] { return s.flush_done >= target || !s.writer_running; });
}

void Timeline::negotiate_start(const std::string& tensor, const char* op) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->recording_locked()) return;
  Row& row = impl_->row_locked(tensor);
  // The coordinator starts a negotiation when the first rank reports, and again when its own
  // request leaves the queue: the first call opens the span, later ones leave it be.
  if (!row.open.empty() && row.open.front().kind == SpanKind::Negotiate) return;
  impl_->close_all_locked(row);
  impl_->begin_locked(row, SpanKind::Negotiate, std::string("NEGOTIATE_") + or_unknown(op), {});
}

void Timeline::negotiate_rank_ready(const std::string& tensor, int rank) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->recording_locked()) return;
  Row& row = impl_->row_locked(tensor);
  // Named by the rank, as Horovod does, so Chrome shows which rank reported when.
  impl_->push_locked(
      {'i', 't', row.pid, impl_->now_ns(), std::to_string(rank), {{"rank", std::to_string(rank)}}},
      false);
}

void Timeline::negotiate_end(const std::string& tensor) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->recording_locked()) return;
  auto it = impl_->rows.find(tensor);
  if (it == impl_->rows.end() || it->second.open.empty() ||
      it->second.open.front().kind != SpanKind::Negotiate) {
    return;  // no negotiation open (recording started mid-way): nothing to close
  }
  impl_->close_all_locked(it->second);
}

void Timeline::start_op(const std::string& tensor, const char* op, const TimelineArgs& args) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->recording_locked()) return;
  Row& row = impl_->row_locked(tensor);
  impl_->close_all_locked(row);  // a negotiation the caller did not end
  impl_->begin_locked(row, SpanKind::Op, or_unknown(op), args);
}

void Timeline::activity_start(const std::string& tensor, const char* activity) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->recording_locked()) return;
  Row& row = impl_->row_locked(tensor);
  impl_->begin_locked(row, SpanKind::Activity, or_unknown(activity), {});
}

void Timeline::activity_end(const std::string& tensor) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->recording_locked()) return;
  auto it = impl_->rows.find(tensor);
  if (it == impl_->rows.end() || it->second.open.empty() ||
      it->second.open.back().kind != SpanKind::Activity) {
    return;
  }
  impl_->end_top_locked(it->second, {});
}

void Timeline::end_op(const std::string& tensor, const TimelineArgs& args) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->recording_locked()) return;
  auto it = impl_->rows.find(tensor);
  if (it == impl_->rows.end()) return;
  Row& row = it->second;
  // Close activities the op left open (a failure mid-collective), then the op itself.
  while (!row.open.empty() && row.open.back().kind == SpanKind::Activity) {
    impl_->end_top_locked(row, {});
  }
  if (!row.open.empty() && row.open.back().kind == SpanKind::Op) impl_->end_top_locked(row, args);
}

void Timeline::mark_cycle_start() {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->recording_locked() || !impl_->mark_cycles) return;
  impl_->push_locked({'i', 'g', 0, impl_->now_ns(), "CYCLE_START", {}}, false);
}

}  // namespace hvd
