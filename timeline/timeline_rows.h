// The tensor rows of one recording: each tensor name's row id (its pid in the file) and the
// spans open on it. Bounded: a row with nothing open is only remembered so that a recurring
// name keeps its row, and only the `capacity` most recently used names are remembered. A name
// that comes back after it was forgotten gets a fresh row id (with its own process_name
// metadata): the file stays valid and well nested, and summary and merge key rows by name, so
// their figures are unchanged; a viewer shows that tensor on two rows. Rows with open spans are
// never forgotten. Used under the Timeline's lock; owned by Timeline::Impl.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

namespace hvd::detail {

enum class SpanKind { Negotiate, Ready, Op, Queue, Activity };

// An open B event on a row. `written` is false when the B was dropped (queue full): its E is
// then dropped too, so every row in the file stays properly nested.
struct Span {
  SpanKind kind;
  bool written;
};

struct TimelineRow {
  int pid = 0;
  bool named = false;  // its process_name metadata has been queued
  std::vector<Span> open;
  std::int64_t last_ns = -1;  // the latest time given to an event on it
};

class TimelineRows {
 public:
  explicit TimelineRows(std::size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  // Forgets every row; new rows are numbered from `first_pid`.
  void reset(int first_pid);
  // The tensor's row, made most recently used; a forgotten or new name gets the next id.
  TimelineRow& get(const std::string& tensor);
  // The tensor's row if it is remembered, else nullptr (does not change the order).
  TimelineRow* find(const std::string& tensor);
  // Calls f(row) for every remembered row.
  template <class F>
  void for_each(F f) {
    for (auto& entry : rows_) f(entry.second.row);
  }
  std::size_t size() const { return rows_.size(); }

 private:
  struct Entry {
    TimelineRow row;
    std::list<const std::string*>::iterator recent;  // its place in recent_
  };
  void forget_least_recent();

  std::size_t capacity_;
  int next_pid_ = 1;
  std::unordered_map<std::string, Entry> rows_;
  std::list<const std::string*> recent_;  // keys of rows_, most recently used first
};

}  // namespace hvd::detail
