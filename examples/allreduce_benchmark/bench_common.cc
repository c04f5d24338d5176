#include "bench_common.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <sys/prctl.h>

#include <horovodcpp/horovod.h>

namespace hvd::bench {

Session::Session(int* argc, char*** argv, bool start_runtime) {
  // The Open MPI setting the runtime chooses when it initializes MPI itself (mpi_world.cc), so
  // the raw-MPI peer and the runtime run under the same one.
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "MPI does not provide MPI_THREAD_MULTIPLE (got level %d); the raw-MPI peer "
                         "cannot run beside the runtime\n", provided);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  MPI_Comm node;
  MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  int node_size = 0;
  MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);
  all_on_one_node_ = node_size == size_;
  if (start_runtime) {
    hvd::init();
    runtime_started_ = true;
  }
}

Session::~Session() {
  if (runtime_started_) hvd::shutdown();
  MPI_Comm_free(&comm_);
  MPI_Finalize();
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Summary summarize(std::vector<double> samples) {
  Summary s;
  s.n = samples.size();
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.min = samples.front();
  s.max = samples.back();
  const std::size_t mid = samples.size() / 2;
  s.median = samples.size() % 2 ? samples[mid] : (samples[mid - 1] + samples[mid]) / 2;
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / samples.size();
  if (samples.size() > 1) {
    double squares = 0;
    for (double v : samples) squares += (v - s.mean) * (v - s.mean);
    s.stddev = std::sqrt(squares / (samples.size() - 1));
    s.ci95 = 1.96 * s.stddev / std::sqrt(static_cast<double>(samples.size()));
  }
  return s;
}

namespace {

void wait_quietly(MPI_Request* request) {
  int done = 0;
  MPI_Test(request, &done, MPI_STATUS_IGNORE);
  while (!done) {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    MPI_Test(request, &done, MPI_STATUS_IGNORE);
  }
}

}  // namespace

void quiet_barrier(MPI_Comm comm) {
  // Sleeps of a few microseconds need a small timer slack (the default 50 us would dominate).
  static const bool slack_set = prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) == 0;
  (void)slack_set;
  MPI_Request request;
  MPI_Ibarrier(comm, &request);
  wait_quietly(&request);
}

std::vector<double> max_over_ranks(std::vector<double> values, MPI_Comm comm) {
  MPI_Request request;
  MPI_Iallreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_MAX, comm, &request);
  wait_quietly(&request);
  return values;
}

double max_over_ranks(double value, MPI_Comm comm) {
  double out = 0;
  MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_MAX, comm);
  return out;
}

std::vector<double> gather_all(double value, MPI_Comm comm) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  std::vector<double> out(size);
  MPI_Allgather(&value, 1, MPI_DOUBLE, out.data(), 1, MPI_DOUBLE, comm);
  return out;
}

std::string human_bytes(std::int64_t bytes) {
  const char* units[] = {"B", "KB", "MB", "GB"};
  int unit = 0;
  double value = static_cast<double>(bytes);
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  std::ostringstream out;
  out << (value == std::floor(value) ? std::setprecision(0) : std::setprecision(1)) << std::fixed << value << " "
      << units[unit];
  return out.str();
}

std::string fixed(double value, int decimals) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(decimals) << value;
  return out.str();
}

std::string Table::str() const {
  std::vector<std::size_t> width(header_.size(), 3);
  for (std::size_t c = 0; c < header_.size(); ++c) width[c] = std::max(width[c], header_[c].size());
  for (const auto& row : rows_)
    for (std::size_t c = 0; c < row.size() && c < width.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::ostringstream out;
  auto line = [&](const std::vector<std::string>& cells) {
    out << "|";
    for (std::size_t c = 0; c < width.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      out << " " << std::setw(static_cast<int>(width[c])) << (c == 0 ? std::left : std::right) << cell << " |";
    }
    out << "\n";
  };
  line(header_);
  out << "|";
  for (std::size_t c = 0; c < width.size(); ++c) out << (c == 0 ? ":" : "-") << std::string(width[c], '-') << (c == 0 ? "-|" : ":|");
  out << "\n";
  for (const auto& row : rows_) line(row);
  return out.str();
}

void report_target(const std::string& what, double measured, double goal, bool at_least, const std::string& unit) {
  const bool pass = at_least ? measured >= goal : measured <= goal;
  std::printf("TARGET | %s | %s%s | %s %s%s | %s\n", what.c_str(), fixed(measured, 3).c_str(), unit.c_str(),
              at_least ? ">=" : "<=", fixed(goal, 3).c_str(), unit.c_str(), pass ? "PASS" : "FAIL");
  std::fflush(stdout);
}

Args::Args(int argc, char** argv) : args_(argv + 1, argv + argc) {}

bool Args::flag(const std::string& name) const {
  known_.push_back(name);
  return std::find(args_.begin(), args_.end(), name) != args_.end();
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  known_.push_back(name + "=");
  for (std::size_t i = 0; i + 1 < args_.size(); ++i)
    if (args_[i] == name) return args_[i + 1];
  if (!args_.empty() && args_.back() == name) throw std::invalid_argument("option " + name + " needs a value");
  return fallback;
}

long Args::get_int(const std::string& name, long fallback) const {
  const std::string v = get(name, "");
  if (v.empty()) return fallback;
  std::size_t used = 0;
  long out = std::stol(v, &used);
  if (used != v.size()) throw std::invalid_argument("option " + name + ": '" + v + "' is not an integer");
  return out;
}

double Args::get_double(const std::string& name, double fallback) const {
  const std::string v = get(name, "");
  if (v.empty()) return fallback;
  std::size_t used = 0;
  double out = std::stod(v, &used);
  if (used != v.size()) throw std::invalid_argument("option " + name + ": '" + v + "' is not a number");
  return out;
}

void Args::reject_unknown() const {
  for (std::size_t i = 0; i < args_.size(); ++i) {
    const std::string& a = args_[i];
    if (std::find(known_.begin(), known_.end(), a + "=") != known_.end()) {
      ++i;  // skip the value
    } else if (std::find(known_.begin(), known_.end(), a) == known_.end()) {
      throw std::invalid_argument("unknown option '" + a + "' (see --help)");
    }
  }
}

}  // namespace hvd::bench
