// Removed process sets leave nothing behind: CYCLES add/remove cycles of the set {0, 1} (at np=3,
// so one rank is outside it), with the heap measured on every rank: the bytes malloc has handed
// out and not taken back (glibc's mallinfo2().uordblks, exact to the byte, unlike the resident
// set; one malloc arena for every thread, so the background thread's allocations count too), read every EVERY cycles after a warm-up of WARMUP cycles (the response cache fills, MPI's
// free lists grow to what the job needs). Open MPI grows its free lists in steps of tens of kB
// now and then, so the test is the trend, not the difference of two readings: the median of the
// slopes between every pair of readings (Theil-Sen), which steps barely move and a leak sets.
// It must stay under LIMIT bytes per cycle on every rank but 0; a record kept per removed set
// (about 50 bytes each, on every rank) grew by that much per cycle for good. Rank 0 coordinates
// every negotiation, and there Open MPI keeps growing its free lists in steps of tens of kB over
// the first tens of thousands of cycles (docs/process_sets.md has a 100,000-cycle run): in a run
// this short its trend is shown, not judged. Prints each rank's readings' summary and VmRSS for the record. glibc's per-thread
// caches hold freed chunks that mallinfo2 counts as in use: run with
// GLIBC_TUNABLES=glibc.malloc.tcache_count=0 (ctest does).
//   process_set_memory CYCLES [WARMUP [EVERY [LIMIT]]]   (HOROVOD_DYNAMIC_PROCESS_SETS=1)
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <horovodcpp/horovod.h>

namespace {

long long heap_in_use() {
  malloc_trim(0);
  return static_cast<long long>(mallinfo2().uordblks);
}

long long rss_kb() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  return -1;
}

void cycles(long n) {
  for (long i = 0; i < n; ++i) {
    hvd::ProcessSet set = hvd::add_process_set({0, 1});
    hvd::remove_process_set(set);
  }
}

// The median of the slopes between every pair of (cycle, bytes) readings.
double theil_sen(const std::vector<std::pair<long, long long>>& readings) {
  std::vector<double> slopes;
  for (std::size_t i = 0; i < readings.size(); ++i)
    for (std::size_t j = i + 1; j < readings.size(); ++j)
      slopes.push_back(static_cast<double>(readings[j].second - readings[i].second) /
                       static_cast<double>(readings[j].first - readings[i].first));
  if (slopes.empty()) return 0;
  std::nth_element(slopes.begin(), slopes.begin() + slopes.size() / 2, slopes.end());
  return slopes[slopes.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const long total = argc > 1 ? std::atol(argv[1]) : 3000;
  const long warmup = argc > 2 ? std::atol(argv[2]) : 1000;
  const long every = argc > 3 ? std::max(1L, std::atol(argv[3])) : 100;
  const double limit = argc > 4 ? std::atof(argv[4]) : 4.0;
  mallopt(M_ARENA_MAX, 1);  // mallinfo2 reports the main arena only: let every thread use it
  hvd::init();
  const auto start = std::chrono::steady_clock::now();
  cycles(warmup);
  std::vector<std::pair<long, long long>> readings{{warmup, heap_in_use()}};
  const long long rss0 = rss_kb();
  for (long done = warmup; done < total;) {
    const long n = std::min(every, total - done);
    cycles(n);
    done += n;
    readings.emplace_back(done, heap_in_use());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double slope = theil_sen(readings);
  long long low = readings.front().second, high = low;
  for (const auto& r : readings) low = std::min(low, r.second), high = std::max(high, r.second);
  std::printf("rank %d: %ld add/remove cycles in %.1f s; heap in use from cycle %ld to %ld: first %lld B, last %lld B, "
              "range %lld..%lld B, trend %+.3f B per cycle (%zu readings); VmRSS %lld kB -> %lld kB\n",
              hvd::rank(), total, seconds, warmup, total, readings.front().second, readings.back().second, low, high,
              slope, readings.size(), rss0, rss_kb());
  std::fflush(stdout);
  const bool flat = hvd::rank() == 0 || slope < limit;
  if (!flat) std::printf("FAIL rank %d: the heap grows %.2f B per cycle (limit %.2f)\n", hvd::rank(), slope, limit);
  hvd::barrier();
  hvd::shutdown();
  return flat ? 0 : 1;
}
