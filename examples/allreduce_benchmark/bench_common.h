// Shared pieces of the benchmark programs: an MPI + horovodcpp session that lets the user
// thread call MPI beside the runtime, timing statistics, Markdown tables, and the machine-
// readable "TARGET |" lines that scripts/bench.sh collects into docs/benchmarks.md.
// Used by each benchmark's main thread only.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hvd::bench {

class GlooGroup;  // gloo_group.h; only in builds with LibTorch
using GlooGroupPtr = std::shared_ptr<GlooGroup>;

// MPI_Init_thread(MPI_THREAD_MULTIPLE) before hvd::init() (the runtime adopts the initialized
// MPI and talks on its own duplicated communicator), so the benchmark's own MPI calls (the raw
// peer) may run beside the background thread. The destructor shuts horovodcpp down, then MPI.
// `start_runtime` false: MPI only (the no-communication baselines still need ranks).
class Session {
 public:
  Session(int* argc, char*** argv, bool start_runtime = true);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // A duplicate of MPI_COMM_WORLD for the benchmark's raw-MPI peer and its bookkeeping.
  MPI_Comm comm() const { return comm_; }
  bool all_on_one_node() const { return all_on_one_node_; }

 private:
  int rank_ = 0, size_ = 1;
  MPI_Comm comm_ = MPI_COMM_NULL;
  bool all_on_one_node_ = true;
  bool runtime_started_ = false;
};

double now_seconds();  // steady clock

struct Summary {
  double mean = 0, median = 0, min = 0, max = 0;
  double ci95 = 0;  // half-width of the 95% interval of the mean (1.96 standard errors)
  double stddev = 0;
  std::size_t n = 0;
};
Summary summarize(std::vector<double> samples);

// A barrier that waits without spinning (MPI_Ibarrier, then tests with short sleeps), so a rank
// that arrives first does not take a core from the ranks it waits for: on a 2-core machine
// Open MPI's busy-polling MPI_Barrier would slow the very thing being timed.
void quiet_barrier(MPI_Comm comm);
// Element-wise maximum over the ranks, waited for without spinning (a collective).
std::vector<double> max_over_ranks(std::vector<double> values, MPI_Comm comm);

// The largest value over the ranks of `comm` (a collective).
double max_over_ranks(double value, MPI_Comm comm);
// Every rank's value, on every rank (a collective).
std::vector<double> gather_all(double value, MPI_Comm comm);

std::string human_bytes(std::int64_t bytes);  // "4 KB", "64 MB"
std::string fixed(double value, int decimals);

// A Markdown table with columns padded so it also reads well in a terminal.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string str() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// Prints "TARGET | what | measured | goal | PASS or FAIL" (rank 0 calls it). `at_least`: the
// measured value must be >= goal, else <= goal.
void report_target(const std::string& what, double measured, double goal, bool at_least, const std::string& unit);

// "--name value" / "--flag" parsing shared by the benchmark mains.
class Args {
 public:
  Args(int argc, char** argv);
  bool flag(const std::string& name) const;
  std::string get(const std::string& name, const std::string& fallback) const;
  long get_int(const std::string& name, long fallback) const;
  double get_double(const std::string& name, double fallback) const;
  // Throws naming any option that no get/flag call asked about (a typo must not pass silently).
  void reject_unknown() const;

 private:
  std::vector<std::string> args_;
  mutable std::vector<std::string> known_;
};

}  // namespace hvd::bench
