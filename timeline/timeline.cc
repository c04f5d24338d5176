#include "timeline/timeline.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <cstdio>

#include "timeline/span_folder.h"
#include "timeline/timeline_rows.h"
#include "timeline/timeline_writer.h"

namespace hvd {
namespace {

using detail::kRuntimeRow;
using detail::Span;
using detail::SpanKind;
using detail::TimelineEvent;
using detail::TimelineRow;

const char* or_unknown(const char* text) { return text != nullptr ? text : "UNKNOWN"; }

constexpr std::size_t kRowMetadataEvents = 4;  // process and thread name and sort index

TimelineWarning warning_sink(const TimelineOptions& options) {
  if (options.warn) return options.warn;
  return [](const std::string& message) { std::fprintf(stderr, "%s\n", message.c_str()); };
}

}  // namespace

// The recording state shared by the event callers (background and GPU threads, under mu),
// start/stop (any thread, serialised by control_mu) and the writer thread.
struct Timeline::Impl {
  explicit Impl(TimelineOptions o)
      : options(o), warn(warning_sink(o)), rows(o.row_capacity), folder(o.queue_capacity) {}

  const TimelineOptions options;
  const TimelineWarning warn;
  std::mutex control_mu;
  std::atomic<bool> enabled{false};
  std::atomic<std::uint64_t> dropped{0};

  std::mutex mu;
  std::condition_variable wake_writer;
  std::condition_variable flushed;
  std::vector<TimelineEvent> pending;
  std::size_t owed_ends = 0;  // written B events (and the open CYCLE) whose end is not queued yet
  detail::TimelineRows rows;
  detail::SpanFolder folder;  // the writer thread's alone
  bool mark_cycles = false;
  std::int64_t cycle_start_ns = -1;  // the open CYCLE slice's start; -1 when none
  std::int64_t cycle_last_ns = -1;   // the runtime row's latest time written
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

  // The queue never holds more than queue_capacity events: a droppable event (B, instant, and
  // a new row's metadata with it) goes in only if room remains for every E still owed, so an
  // E always fits.
  bool has_room_locked(std::size_t events) const {
    return pending.size() + owed_ends + events <= options.queue_capacity;
  }
  void append_locked(TimelineEvent&& event) {
    pending.push_back(std::move(event));
    if (options.wake_when_half_full && pending.size() == options.queue_capacity / 2) {
      wake_writer.notify_one();
    }
  }

  // Queues a B or an instant on the tensor's row, preceded by the row's metadata the first time.
  bool push_on_row_locked(const std::string& tensor, TimelineRow& row, TimelineEvent&& event) {
    const bool begin = event.phase == 'B';
    if (!has_room_locked((row.named ? 0 : kRowMetadataEvents) + 1 + (begin ? 1 : 0))) {
      dropped.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (!row.named) {
      // Process and thread both named and sorted: every viewer labels and orders the row.
      const std::string sort_index = std::to_string(row.pid);
      append_locked({'M', 0, row.pid, 0, "process_name", {{"name", tensor}}});
      append_locked({'M', 0, row.pid, 0, "process_sort_index", {{"sort_index", sort_index}}});
      append_locked({'M', 0, row.pid, 0, "thread_name", {{"name", tensor}}});
      append_locked({'M', 0, row.pid, 0, "thread_sort_index", {{"sort_index", sort_index}}});
      row.named = true;
    }
    append_locked(std::move(event));
    if (begin) ++owed_ends;
    return true;
  }

  // A row's events get strictly increasing times, at least 1 ns apart: viewers compute span
  // ends in floating point, and a boundary two spans share exactly (one ends as the next
  // begins, or a span of no length) may come out in the wrong order there.
  std::int64_t next_ts(std::int64_t& last, std::int64_t ts = -1) const {
    last = std::max(ts < 0 ? now_ns() : ts, last + 1);
    return last;
  }

  // `ts`: when the span begins (ends); now when negative.
  void begin_locked(const std::string& tensor, TimelineRow& row, SpanKind kind, std::string name,
                    TimelineArgs args, std::int64_t ts = -1) {
    const bool written = push_on_row_locked(
        tensor, row, {'B', 0, row.pid, next_ts(row.last_ns, ts), std::move(name), std::move(args)});
    row.open.push_back({kind, written});
  }

  void end_top_locked(TimelineRow& row, TimelineArgs args, std::int64_t ts = -1) {
    Span span = row.open.back();
    row.open.pop_back();
    if (span.written) {
      append_locked({'E', 0, row.pid, next_ts(row.last_ns, ts), "", std::move(args)});
      --owed_ends;
    } else {
      dropped.fetch_add(1, std::memory_order_relaxed);
    }
  }

  void close_all_locked(TimelineRow& row) {
    while (!row.open.empty()) end_top_locked(row, {});
  }

  // The open CYCLE slice ends at `now` (written as one complete event; its room was kept).
  void end_cycle_locked(std::int64_t now) {
    if (cycle_start_ns < 0) return;
    now = next_ts(cycle_last_ns, now);  // the next cycle starts 1 ns later (see next_ts)
    append_locked({'X', 0, kRuntimeRow, cycle_start_ns, "CYCLE", {}, now - cycle_start_ns});
    cycle_start_ns = -1;
    --owed_ends;
  }

  bool top_is(const TimelineRow& row, SpanKind kind) const {
    return !row.open.empty() && row.open.back().kind == kind;
  }

  void writer_loop();
};

void Timeline::Impl::writer_loop() {
  std::vector<TimelineEvent> batch;
  std::vector<TimelineEvent> written;  // batch, folded into what the file gets
  std::vector<TimelineEvent> open;     // the spans still open, for the write's trailer
  batch.reserve(options.queue_capacity);
  written.reserve(options.queue_capacity);
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
    const bool changed = !batch.empty();  // events, or spans opened (held: nothing written)
    folder.fold(batch, written);
    open.clear();
    folder.open_spans(open);  // the trailer: what a crash now would leave open
    const std::uint64_t lost = dropped.load(std::memory_order_relaxed);
    if (lost != reported_dropped || last) {
      // The counter travels as metadata, so even a crashed run's file says what it lost.
      written.push_back({'M', 0, kRuntimeRow, 0, "hvd_dropped_events", {{"count", std::to_string(lost)}}});
      reported_dropped = lost;
    }
    if (changed || !written.empty()) writer->write(written, open);
    written.clear();
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
  auto writer = std::make_unique<detail::TimelineWriter>(path, rank, wall_us, impl_->warn);  // may throw
  std::lock_guard<std::mutex> lock(impl_->mu);
  Impl& s = *impl_;
  s.start_time = std::chrono::steady_clock::now();
  s.writer = std::move(writer);
  s.pending.clear();
  s.pending.reserve(s.options.queue_capacity);
  s.rows.reset(kRuntimeRow + 1);
  s.folder.reset();
  s.owed_ends = 0;
  s.cycle_start_ns = s.cycle_last_ns = -1;
  s.mark_cycles = mark_cycles;
  s.stopping = false;
  s.writer_running = true;
  s.flush_requested = s.flush_done = 0;
  s.dropped.store(0);
  s.thread = std::thread([&s] { s.writer_loop(); });
  pthread_setname_np(s.thread.native_handle(), "hvd-timeline");  // named before start() returns
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
    s.rows.for_each([&s](TimelineRow& row) { s.close_all_locked(row); });
    s.end_cycle_locked(s.now_ns());
    s.stopping = true;
    s.wake_writer.notify_one();
    thread = std::move(s.thread);
  }
  thread.join();
  std::lock_guard<std::mutex> lock(s.mu);
  const std::string path = s.writer->path();
  s.writer.reset();
  s.rows.reset(kRuntimeRow + 1);
  if (const auto lost = s.dropped.load()) {
    s.warn("timeline: " + std::to_string(lost) + " events were dropped from '" + path +
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

std::size_t Timeline::remembered_rows() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->rows.size();
}

void Timeline::negotiate_start(const std::string& tensor, const char* op) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->recording_locked()) return;
  TimelineRow& row = impl_->rows.get(tensor);
  // The coordinator starts a negotiation when the first rank reports, and again when its own
  // request leaves the queue: the first call opens the span, later ones leave it be.
  if (!row.open.empty() && row.open.front().kind == SpanKind::Negotiate) return;
  impl_->close_all_locked(row);
  impl_->begin_locked(tensor, row, SpanKind::Negotiate,
                      std::string("NEGOTIATE_") + or_unknown(op), {});
}

void Timeline::negotiate_rank_ready(const std::string& tensor, int rank) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->recording_locked()) return;
  TimelineRow* row = impl_->rows.find(tensor);
  if (row == nullptr || row->open.empty() || row->open.front().kind != SpanKind::Negotiate) {
    return;  // no negotiation open (recording started mid-way)
  }
  // A slice rather than an instant: neither speedscope nor DevTools draws instants.
  const std::int64_t now = impl_->now_ns();
  if (impl_->top_is(*row, SpanKind::Ready)) impl_->end_top_locked(*row, {}, now);
  impl_->begin_locked(tensor, *row, SpanKind::Ready, "READY " + std::to_string(rank),
                      {{"rank", std::to_string(rank)}}, now);
}

void Timeline::negotiate_end(const std::string& tensor) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->recording_locked()) return;
  TimelineRow* row = impl_->rows.find(tensor);
  if (row == nullptr || row->open.empty() || row->open.front().kind != SpanKind::Negotiate) {
    return;  // no negotiation open (recording started mid-way): nothing to close
  }
  impl_->close_all_locked(*row);
}

void Timeline::start_op(const std::string& tensor, const char* op, const TimelineArgs& args) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->recording_locked()) return;
  TimelineRow& row = impl_->rows.get(tensor);
  impl_->close_all_locked(row);  // a negotiation the caller did not end
  impl_->begin_locked(tensor, row, SpanKind::Op, or_unknown(op), args);
}

void Timeline::queue_start(const std::string& tensor) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->recording_locked()) return;
  TimelineRow* row = impl_->rows.find(tensor);
  if (row == nullptr || !impl_->top_is(*row, SpanKind::Op)) return;  // only directly in an op
  impl_->begin_locked(tensor, *row, SpanKind::Queue, "QUEUE", {});
}

void Timeline::queue_end(const std::string& tensor) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->recording_locked()) return;
  TimelineRow* row = impl_->rows.find(tensor);
  if (row != nullptr && impl_->top_is(*row, SpanKind::Queue)) impl_->end_top_locked(*row, {});
}

void Timeline::activity_start(const std::string& tensor, const char* activity) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->recording_locked()) return;
  TimelineRow& row = impl_->rows.get(tensor);
  if (impl_->top_is(row, SpanKind::Queue)) impl_->end_top_locked(row, {});  // the wait is over
  impl_->begin_locked(tensor, row, SpanKind::Activity, or_unknown(activity), {});
}

void Timeline::activity_end(const std::string& tensor) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->recording_locked()) return;
  TimelineRow* row = impl_->rows.find(tensor);
  if (row != nullptr && impl_->top_is(*row, SpanKind::Activity)) impl_->end_top_locked(*row, {});
}

void Timeline::switch_activity(const std::string& tensor, const char* next) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->recording_locked()) return;
  TimelineRow* row = impl_->rows.find(tensor);
  if (row == nullptr || !impl_->top_is(*row, SpanKind::Activity)) return;
  const std::int64_t now = impl_->now_ns();
  impl_->end_top_locked(*row, {}, now);
  impl_->begin_locked(tensor, *row, SpanKind::Activity, or_unknown(next), {}, now);
}

void Timeline::end_op(const std::string& tensor, const TimelineArgs& args) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->recording_locked()) return;
  TimelineRow* row = impl_->rows.find(tensor);
  if (row == nullptr) return;
  // Close what the op left open (its QUEUE, or activities after a failure), then the op itself.
  while (impl_->top_is(*row, SpanKind::Activity) || impl_->top_is(*row, SpanKind::Queue)) {
    impl_->end_top_locked(*row, {});
  }
  if (impl_->top_is(*row, SpanKind::Op)) impl_->end_top_locked(*row, args);
}

void Timeline::mark_cycle_start() {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  Impl& s = *impl_;
  if (!s.recording_locked() || !s.mark_cycles) return;
  const std::int64_t now = s.now_ns();
  s.end_cycle_locked(now);
  // Horovod's CYCLE_START instant at the slice's start: what its users' scripts and the
  // Chrome-trace viewers that draw instants look for (the slice shows the cycle's length). The
  // slice is written when it ends: room for it is kept as for an owed end.
  if (!s.has_room_locked(2)) {
    s.dropped.fetch_add(2, std::memory_order_relaxed);
    return;
  }
  s.cycle_start_ns = s.next_ts(s.cycle_last_ns, now);
  s.append_locked({'i', 'g', kRuntimeRow, s.cycle_start_ns, "CYCLE_START", {}});
  ++s.owed_ends;
}

}  // namespace hvd
