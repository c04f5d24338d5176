// controller_benchmark: what one negotiation cycle costs the coordinator for T tensors at N
// simulated ranks, on the cache-hit path (every tensor seen before: one bitwise AND) and on the
// slow path (cache off: every rank's request list gathered, checked and answered). Drives the
// real hvd::detail::Controller through a SimulatedChannel (simulated_channel.h explains what is
// synthesized). Single process; no MPI launch.
//
//   ./controller_benchmark [--tensors 200] [--tensor-bytes 4096] [--max-ranks 4096]
//       [--seconds 0.3] [--slow-cycle-limit 3]
//
// Per cycle, only compute_response_list is timed (building the request vector, which the
// user threads do, is not), by the wall clock and by this thread's CPU clock: the benchmark is
// one thread, so its CPU time is the coordinator's own work, while the wall clock also counts
// the time other processes of a shared machine hold the core. Every cycle's result is checked:
// all T tensors, fused into one response, and the cache-hit cycles must not fall back to the
// slow path.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_common.h"
#include "core/codec.h"
#include "core/controller.h"
#include "simulated_channel.h"

namespace {

using hvd::bench::fixed;
using hvd::detail::Controller;
using hvd::detail::ControllerOptions;
using hvd::detail::Request;
using hvd::detail::RequestList;

// Command-line settings, read once by main.
struct Config {
  int tensors = 200;
  std::int64_t tensor_bytes = 4096;
  int max_ranks = 4096;
  double seconds = 0.3;           // per (path, ranks) measurement
  double slow_cycle_limit = 3.0;  // skip slow-path sizes whose one cycle would exceed this
};

std::vector<Request> make_requests(const Config& config) {
  std::vector<Request> out;
  for (int i = 0; i < config.tensors; ++i) {
    Request r;
    r.type = hvd::detail::RequestType::Allreduce;
    r.name = "model.layer" + std::to_string(i / 2) + (i % 2 ? ".bias" : ".weight") + ".grad";
    r.dtype = hvd::DataType::Float32;
    r.shape = {config.tensor_bytes / 4};
    r.reduce_op = hvd::ReduceOp::Average;
    out.push_back(std::move(r));
  }
  return out;
}

// What simulated ranks 1..N-1 send when they gather the same requests.
std::vector<std::vector<std::uint8_t>> peer_lists(const std::vector<Request>& requests, int size) {
  std::vector<std::vector<std::uint8_t>> out;
  for (int rank = 1; rank < size; ++rank) {
    RequestList list;
    list.requests = requests;
    for (auto& r : list.requests) r.rank = rank;
    out.push_back(hvd::detail::encode(list));
  }
  return out;
}

void check_cycle(const hvd::detail::ResponseList& list, const Config& config, int size) {
  std::size_t names = 0;
  for (const auto& r : list.responses) names += r.names.size();
  if (names != static_cast<std::size_t>(config.tensors) || list.responses.size() != 1 || list.shutdown)
    throw std::runtime_error("at " + std::to_string(size) + " ranks a cycle returned " + std::to_string(names) +
                             " tensors in " + std::to_string(list.responses.size()) + " responses; expected " +
                             std::to_string(config.tensors) + " in 1 fused response");
}

struct PathResult {
  hvd::bench::Summary summary;  // seconds per cycle, wall clock
  hvd::bench::Summary cpu;      // seconds per cycle, this thread's CPU clock
  bool measured = false;
};

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Times cycles until `seconds` have passed (at least `min_cycles`).
PathResult time_cycles(Controller& controller, const std::vector<Request>& requests, const Config& config, int size,
                       int min_cycles) {
  std::vector<double> samples, cpu_samples;
  const double deadline = hvd::bench::now_seconds() + config.seconds;
  while (static_cast<int>(samples.size()) < min_cycles || hvd::bench::now_seconds() < deadline) {
    std::vector<Request> mine = requests;
    const double cpu_start = thread_cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    auto list = controller.compute_response_list(std::move(mine), false);
    samples.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    cpu_samples.push_back(thread_cpu_seconds() - cpu_start);
    check_cycle(list, config, size);
    if (samples.size() >= 5000) break;
  }
  return {hvd::bench::summarize(samples), hvd::bench::summarize(cpu_samples), true};
}

PathResult cache_hit_path(const Config& config, int size) {
  const auto requests = make_requests(config);
  hvd::bench::SimulatedChannel channel(size);
  Controller controller(channel, ControllerOptions{});
  channel.set_peer_lists(peer_lists(requests, size));
  check_cycle(controller.compute_response_list(requests, false), config, size);  // fills the cache
  channel.set_peer_lists({});  // a cache-hit cycle that gathered would now see empty lists and fail
  const auto slow_before = controller.stats().slow_path_cycles;
  PathResult result = time_cycles(controller, requests, config, size, 20);
  if (controller.stats().slow_path_cycles != slow_before)
    throw std::runtime_error("cache-hit cycles took the slow path at " + std::to_string(size) + " ranks");
  return result;
}

PathResult slow_path(const Config& config, int size) {
  const auto requests = make_requests(config);
  hvd::bench::SimulatedChannel channel(size);
  ControllerOptions options;
  options.cache_capacity = 0;  // HOROVOD_CACHE_CAPACITY=0: every cycle negotiates in full
  Controller controller(channel, options);
  channel.set_peer_lists(peer_lists(requests, size));
  return time_cycles(controller, requests, config, size, 5);
}

void run(const Config& config) {
  hvd::bench::Table table({"ranks", "cache hit: median (us)", "cache hit: mean ± 95% (us)", "slow path: median (ms)",
                           "slow path: mean ± 95% (ms)", "slow path: CPU median (ms)", "CPU x ranks doubled",
                           "slow path / cache hit"});
  double last_slow = 0, hit_at_1024 = -1, slow_cpu_at_1024 = -1, slow_cpu_at_256 = -1, slow_cpu_at_4096 = -1,
         last_cpu = 0;
  int last_ranks = 1;
  for (int size = 2; size <= config.max_ranks; size *= 2) {
    const PathResult hit = cache_hit_path(config, size);
    if (size == 1024) hit_at_1024 = hit.summary.median;
    // Skip a slow-path size whose cycle, grown quadratically from the last, would pass the limit.
    const double growth = static_cast<double>(size) / last_ranks;
    PathResult slow;
    std::string doubling;
    if (last_slow * growth * growth <= config.slow_cycle_limit) {
      slow = slow_path(config, size);
      if (last_ranks * 2 == size && last_cpu > 0) {
        doubling = fixed(slow.cpu.median / last_cpu, 2) + "x";
      }
      last_slow = slow.summary.median;
      last_cpu = slow.cpu.median;
      last_ranks = size;
      if (size == 256) slow_cpu_at_256 = slow.cpu.median;
      if (size == 1024) slow_cpu_at_1024 = slow.cpu.median;
      if (size == 4096) slow_cpu_at_4096 = slow.cpu.median;
    }
    auto us = [](double s) { return fixed(s * 1e6, 1); };
    auto ms = [](double s) { return fixed(s * 1e3, 2); };
    table.add({std::to_string(size), us(hit.summary.median), us(hit.summary.mean) + " ± " + us(hit.summary.ci95),
               slow.measured ? ms(slow.summary.median) : "skipped (> " + fixed(config.slow_cycle_limit, 0) + " s)",
               slow.measured ? ms(slow.summary.mean) + " ± " + ms(slow.summary.ci95) : "",
               slow.measured ? ms(slow.cpu.median) : "", doubling,
               slow.measured ? fixed(slow.summary.median / hit.summary.median, 1) + "x" : ""});
    std::printf("# %d ranks done\n", size);
    std::fflush(stdout);
  }
  std::printf("\n### negotiation cost per cycle on the coordinator, %d tensors of %s\n\n%s\n", config.tensors,
              hvd::bench::human_bytes(config.tensor_bytes).c_str(), table.str().c_str());
  if (config.tensors != 200) return;
  if (hit_at_1024 >= 0)
    hvd::bench::report_target("cache-hit negotiation, 200 tensors, 1024 simulated ranks (median per cycle)",
                              hit_at_1024 * 1e6, 100.0, false, " us");
  if (slow_cpu_at_1024 >= 0)
    hvd::bench::report_target("slow-path negotiation (cache off), 200 tensors, 1024 simulated ranks (CPU median per cycle)",
                              slow_cpu_at_1024 * 1e3, 50.0, false, " ms");
  // One doubling's ratio scatters by a third on a shared machine; four of them, taken together,
  // say whether the cost grows faster than the ranks.
  if (slow_cpu_at_256 > 0 && slow_cpu_at_4096 > 0)
    hvd::bench::report_target("slow path (cache off), 256 to 4096 simulated ranks: CPU per cycle, growth per doubling "
                              "of the ranks (geometric mean of four)",
                              std::pow(slow_cpu_at_4096 / slow_cpu_at_256, 0.25), 2.0, false, "x");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    hvd::bench::Args args(argc, argv);
    if (args.flag("--help")) {
      std::puts("usage: controller_benchmark [--tensors T] [--tensor-bytes B] [--max-ranks N] [--seconds S] "
                "[--slow-cycle-limit S]");
      return 0;
    }
    Config config;
    config.tensors = static_cast<int>(args.get_int("--tensors", config.tensors));
    config.tensor_bytes = args.get_int("--tensor-bytes", config.tensor_bytes);
    config.max_ranks = static_cast<int>(args.get_int("--max-ranks", config.max_ranks));
    config.seconds = args.get_double("--seconds", config.seconds);
    config.slow_cycle_limit = args.get_double("--slow-cycle-limit", config.slow_cycle_limit);
    args.reject_unknown();
    if (config.tensors < 1 || config.tensor_bytes < 4 || config.max_ranks < 2)
      throw std::invalid_argument("need --tensors >= 1, --tensor-bytes >= 4, --max-ranks >= 2");
    run(config);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "controller_benchmark: %s\n", e.what());
    return 1;
  }
  return 0;
}
