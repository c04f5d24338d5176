// autotune_benchmark: throughput of ResNet-50's gradient exchange (bytes reduced per second) at
// np=N under one launch's settings, and the report that compares launches. Settings are read
// at hvd::init, so each hand-set fusion threshold is its own launch (autotune_benchmark.sh runs
// them all). Every launch first runs the same settle phase, a fixed number of steps each followed
// by a poll of whether rank 0's tuner has decided: with HOROVOD_AUTOTUNE=1 the tuner searches and
// confirms in it, and must have decided at least one step before its end (that step applies the
// decision on every rank). Then each launch measures the same way.
//
// Why every launch settles, not only the tuned one: on the 2-core machine these benchmarks run on,
// a launch measured after a long settle phase is slower whatever its settings. So measuring the
// hand-set launches at once and the tuned one after its search compared process ages, not
// settings: a tuned launch that kept a hand-set row's own settings scored well below that row
// (docs/benchmarks.md, "Figures behind design choices").
//
// The comparison that decides the target runs inside the autotune launch (--compare): once the
// tuner has decided, the launch switches every rank between the tuned parameters and each hand-set
// threshold (hvd::detail::request_parameters, carried like a tuner decision), in rounds of a fresh
// order, and measures each for a few steps. Separate launches cannot decide a 10% margin here: the
// same settings measured in two launches minutes apart differed far more than that on this 2-core VM
// (the machine has slow stretches of seconds), and the best of several noisy medians is biased
// upwards. Side by side in one process, a slow stretch hits the configurations of one round alike;
// the target is the median over rounds of tuned / hand-set, against the hand-set threshold it
// fares worst against. The separate launches are still measured and shown, without a target.
//
//   mpirun -np 2 ./autotune_benchmark --label L [--steps 20] [--warmup 3] [--settle-steps 200]
//       [--results FILE]            one launch: prints and appends "label,bytes/s,threshold,cycle ms,cache,tune steps"
//       [--compare T1,T2,... --compare-results FILE [--compare-rounds 5] [--compare-steps 5]]
//                                   then the in-launch comparison: appends
//                                   "launch,round,label,bytes/s,threshold,cycle ms,cache" per measurement
//       [--set resnet50|small]      the gradients: ResNet-50's, or 200 x 4 KB
//   ./autotune_benchmark [--report FILE] [--compare-report FILE [--set S]]    the tables and TARGET line (no MPI)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include <horovodcpp/horovod.h>

#include "bench_common.h"
#include "core/introspection.h"
#include "gradient_sets.h"

namespace {

using hvd::bench::fixed;

struct Launch {
  std::string label;
  double bytes_per_second = 0;
  std::string threshold, cycle_ms, cache;
  long tune_steps = 0;
};

struct Gradients {
  std::vector<std::shared_ptr<hvd::HostTensor>> tensors;  // backward order
  std::vector<std::string> names;
  std::int64_t total_bytes = 0;
};

// ResNet-50's gradients, or ("small") 200 x 4 KB.
Gradients gradient_set(const std::string& which) {
  Gradients g;
  if (which != "resnet50" && which != "small") throw std::runtime_error("--set: '" + which + "' is not resnet50 or small");
  const auto specs = which == "small" ? hvd::bench::small_gradients(200, 4096) : hvd::bench::resnet50_gradients();
  for (auto it = specs.rbegin(); it != specs.rend(); ++it) {
    g.tensors.push_back(hvd::HostTensor::allocate(hvd::DataType::Float32, it->shape));
    g.total_bytes += g.tensors.back()->size_bytes();
    g.names.push_back("autotune_benchmark." + it->name);
  }
  return g;
}

void step(Gradients& g) {
  std::vector<hvd::Handle> handles;
  handles.reserve(g.tensors.size());
  for (std::size_t i = 0; i < g.tensors.size(); ++i)
    handles.push_back(hvd::allreduce_async(g.tensors[i], g.tensors[i], {hvd::ReduceOp::Sum, g.names[i]}));
  for (auto& h : handles) h.wait();
}

// One step with every value rank + 1: the sum must be n(n+1)/2 everywhere, on every rank.
void check(Gradients& g, const hvd::bench::Session& s) {
  for (auto& t : g.tensors) std::fill_n(t->data_as<float>(), t->num_elements(), static_cast<float>(s.rank() + 1));
  step(g);
  const float expected = static_cast<float>(s.size() * (s.size() + 1) / 2);
  double wrong = 0;
  for (auto& t : g.tensors)
    wrong += static_cast<double>(std::count_if(t->data_as<float>(), t->data_as<float>() + t->num_elements(),
                                               [expected](float v) { return v != expected; }));
  if (hvd::bench::max_over_ranks(wrong, s.comm()) > 0) throw std::runtime_error("wrong sums on some rank");
  for (auto& t : g.tensors) std::fill_n(t->data_as<float>(), t->num_elements(), 0.0f);
}

// The settle phase every launch runs: `steps` steps, each followed by a poll (over the ranks) of
// whether rank 0's tuner has decided. Returns the steps it took until the poll said so (0 without
// autotune); throws if the tuner had not decided one step before the end.
long settle(Gradients& g, const hvd::bench::Session& s, long steps, bool autotune) {
  long decided_after = 0;
  for (long i = 1; i <= steps; ++i) {
    step(g);
    const double deciding = hvd::detail::autotune_decided() ? 0 : 1;
    if (hvd::bench::max_over_ranks(deciding, s.comm()) == 0 && decided_after == 0) decided_after = i;
  }
  if (autotune && (decided_after == 0 || decided_after >= steps))
    throw std::runtime_error("autotune had not decided one step before the end of the " + std::to_string(steps) +
                             "-step settle phase: raise --settle-steps");
  return autotune ? decided_after : 0;
}

// Throughput of `steps` steps after one warmup step (slowest rank).
double measure(Gradients& g, const hvd::bench::Session& s, long steps) {
  step(g);
  hvd::bench::quiet_barrier(s.comm());
  const double start = hvd::bench::now_seconds();
  for (long i = 0; i < steps; ++i) step(g);
  const double seconds = hvd::bench::max_over_ranks(hvd::bench::now_seconds() - start, s.comm());
  return static_cast<double>(g.total_bytes) * steps / seconds;
}

// Rank 0 asks for `p`; every rank steps until every rank runs under it (a step's cycles carry it).
void switch_to(const hvd::detail::TunableParameters& p, Gradients& g, const hvd::bench::Session& s) {
  if (s.rank() == 0) hvd::detail::request_parameters(p);
  for (int i = 0; i < 20; ++i) {
    step(g);
    if (hvd::bench::max_over_ranks(hvd::detail::tuned_parameters() == p ? 0 : 1, s.comm()) == 0) return;
  }
  throw std::runtime_error("parameters not applied on every rank after 20 steps: " + hvd::detail::describe(p));
}

// "threshold,cycle ms,on|off": how both result files record parameters.
std::string csv(const hvd::detail::TunableParameters& p) {
  std::ostringstream out;
  out << p.fusion_threshold_bytes << ',' << p.cycle_time_ms << ',' << (p.cache_enabled ? "on" : "off");
  return out.str();
}

std::string kilobytes(std::int64_t bytes) { return std::to_string(bytes / 1024) + " KB"; }

// The in-launch comparison: the tuned parameters and each hand-set threshold (with the launch's
// initial cycle time and cache), one measurement each per round, in an order shuffled per round
// (the same seed on every rank). Appends one line per measurement (rank 0).
void compare_in_launch(Gradients& g, const hvd::bench::Session& s, const hvd::detail::TunableParameters& initial,
                       const std::vector<std::int64_t>& thresholds, long rounds, long steps, const std::string& path) {
  const hvd::detail::TunableParameters tuned = hvd::detail::tuned_parameters();
  std::vector<std::pair<std::string, hvd::detail::TunableParameters>> configs{{"tuned", tuned}};
  for (std::int64_t t : thresholds)
    configs.push_back({"hand-set " + kilobytes(t), {t, initial.cycle_time_ms, initial.cache_enabled}});
  std::vector<std::size_t> order(configs.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  const long launch = static_cast<long>(getpid());  // pairs this launch's rounds in the report
  std::ofstream out;
  if (s.rank() == 0) out.open(path, std::ios::app);
  for (long round = 0; round < rounds; ++round) {
    std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(round)));
    for (std::size_t k : order) {
      switch_to(configs[k].second, g, s);
      const double rate = measure(g, s, steps);
      if (s.rank() == 0)
        out << launch << ',' << round << ',' << configs[k].first << ',' << fixed(rate, 0) << ','
            << csv(configs[k].second) << '\n';
    }
  }
  check(g, s);  // every switch left the sums exact
}

std::vector<std::int64_t> parse_thresholds(const std::string& list) {
  std::vector<std::int64_t> out;
  std::stringstream in(list);
  for (std::string x; std::getline(in, x, ',');) {
    std::size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(x, &used);
    } catch (const std::exception&) {
    }
    if (used != x.size() || v < 0) throw std::runtime_error("--compare: '" + x + "' is not a threshold in bytes");
    out.push_back(v);
  }
  if (out.empty()) throw std::runtime_error("--compare: no thresholds");
  return out;
}

int run_launch(const hvd::bench::Args& args, int* argc, char*** argv) {
  const std::string label = args.get("--label", "launch");
  const long steps = args.get_int("--steps", 20), warmup = args.get_int("--warmup", 3);
  const long settle_steps = args.get_int("--settle-steps", 200);
  const std::string results = args.get("--results", "");
  const std::string set = args.get("--set", "resnet50");
  const std::string compare = args.get("--compare", "");
  const std::string compare_results = args.get("--compare-results", "");
  const long compare_rounds = args.get_int("--compare-rounds", 5), compare_steps = args.get_int("--compare-steps", 5);
  args.reject_unknown();
  const std::vector<std::int64_t> thresholds = compare.empty() ? std::vector<std::int64_t>{} : parse_thresholds(compare);
  if (!compare.empty() && compare_results.empty()) throw std::runtime_error("--compare needs --compare-results FILE");
  hvd::bench::Session session(argc, argv);
  Gradients g = gradient_set(set);
  const hvd::detail::TunableParameters initial = hvd::detail::tuned_parameters();  // the launch's settings
  check(g, session);
  const char* autotune = std::getenv("HOROVOD_AUTOTUNE");
  const long tune_steps = settle(g, session, settle_steps, autotune != nullptr && std::string(autotune) == "1");
  for (long i = 1; i < warmup; ++i) step(g);  // measure() takes the last warmup step
  const double rate = measure(g, session, steps);
  check(g, session);  // the tuned parameters still sum correctly
  const auto p = hvd::detail::tuned_parameters();
  if (session.rank() == 0) {
    std::ostringstream line;
    line << label << ',' << fixed(rate, 0) << ',' << csv(p) << ',' << tune_steps;
    std::printf("%s\n", line.str().c_str());
    if (!results.empty()) std::ofstream(results, std::ios::app) << line.str() << '\n';
  }
  if (!thresholds.empty())
    compare_in_launch(g, session, initial, thresholds, compare_rounds, compare_steps, compare_results);
  return 0;
}

std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> f;
  std::stringstream s(line);
  for (std::string x; std::getline(s, x, ',');) f.push_back(x);
  return f;
}

// The separate launches (no target): one row per configuration, its median launch.
void report_launches(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<Launch> launches;
  for (std::string line; std::getline(in, line);) {
    const auto f = csv_fields(line);
    if (f.size() != 6) throw std::runtime_error(path + ": bad line '" + line + "'");
    launches.push_back({f[0], std::stod(f[1]), f[2], f[3], f[4], std::stol(f[5])});
  }
  // Launches with the same label are rounds of one configuration (the script alternates them).
  std::vector<std::vector<const Launch*>> rounds;
  for (const auto& l : launches) {
    auto same = std::find_if(rounds.begin(), rounds.end(), [&](const auto& r) { return r.front()->label == l.label; });
    if (same == rounds.end()) rounds.push_back({&l});
    else same->push_back(&l);
  }
  auto by_throughput = [](const Launch* a, const Launch* b) { return a->bytes_per_second < b->bytes_per_second; };
  std::vector<const Launch*> median;
  for (auto r : rounds) {
    std::sort(r.begin(), r.end(), by_throughput);
    median.push_back(r[r.size() / 2]);
  }
  std::size_t tuned_row = rounds.size(), best_row = rounds.size();
  for (std::size_t k = 0; k < median.size(); ++k) {
    if (median[k]->label.rfind("autotune", 0) == 0) tuned_row = k;
    else if (best_row == rounds.size() || median[k]->bytes_per_second > median[best_row]->bytes_per_second) best_row = k;
  }
  if (tuned_row == rounds.size() || best_row == rounds.size())
    throw std::runtime_error(path + ": needs hand-set launches and an autotune one");
  const double best_hand = median[best_row]->bytes_per_second;
  std::vector<double> round_ratios;  // round k's autotune launch / round k's launch of the best row
  for (std::size_t k = 0; k < std::min(rounds[tuned_row].size(), rounds[best_row].size()); ++k)
    round_ratios.push_back(rounds[tuned_row][k]->bytes_per_second / rounds[best_row][k]->bytes_per_second);
  hvd::bench::Table table({"launch", "rounds in order: GB/s reduced", "median GB/s", "fastest / slowest launch",
                           "vs best hand-set", "fusion threshold (B)", "cycle (ms)", "cache", "steps to settle"});
  for (std::size_t k = 0; k < rounds.size(); ++k) {
    const Launch& l = *median[k];
    std::string all;  // in round order
    double lo = rounds[k].front()->bytes_per_second, hi = lo;
    for (const Launch* r : rounds[k]) {
      all += (all.empty() ? "" : " ") + fixed(r->bytes_per_second / 1e9, 2);
      lo = std::min(lo, r->bytes_per_second);
      hi = std::max(hi, r->bytes_per_second);
    }
    table.add({l.label, all, fixed(l.bytes_per_second / 1e9, 3), fixed(hi / lo, 2) + "x",
               fixed(l.bytes_per_second / best_hand, 2) + "x", l.threshold, l.cycle_ms, l.cache,
               l.tune_steps ? std::to_string(l.tune_steps) : "-"});
  }
  std::printf("Separate launches, one configuration each (no target: launches of the same settings differ by the "
              "fastest / slowest column):\n\n%s\n",
              table.str().c_str());
  std::printf("separate launches: autotune / best hand-set, ratio of medians: %sx; median of per-round ratios: %sx "
              "(no target)\n\n",
              fixed(median[tuned_row]->bytes_per_second / best_hand, 3).c_str(),
              fixed(hvd::bench::summarize(round_ratios).median, 3).c_str());
}

// The in-launch comparison (the target): per configuration, its median throughput and the median
// over rounds of tuned / this configuration, each ratio from one round of one launch.
void report_in_launch(const std::string& path, const std::string& set) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  struct Measurement {
    std::string label;
    double rate;
    std::string threshold, cycle, cache;
  };
  std::vector<std::pair<std::string, std::vector<Measurement>>> by_round;  // key "launch/round"
  std::vector<std::string> labels;
  for (std::string line; std::getline(in, line);) {
    const auto f = csv_fields(line);
    if (f.size() != 7) throw std::runtime_error(path + ": bad line '" + line + "'");
    const std::string key = f[0] + "/" + f[1];
    auto it = std::find_if(by_round.begin(), by_round.end(), [&](const auto& r) { return r.first == key; });
    if (it == by_round.end()) it = by_round.insert(by_round.end(), {key, {}});
    it->second.push_back({f[2], std::stod(f[3]), f[4], f[5], f[6]});
    if (std::find(labels.begin(), labels.end(), f[2]) == labels.end()) labels.push_back(f[2]);
  }
  if (std::find(labels.begin(), labels.end(), "tuned") == labels.end() || labels.size() < 2)
    throw std::runtime_error(path + ": needs tuned and hand-set measurements");
  auto threshold_of = [&](const std::string& label) {  // of its first measurement
    for (const auto& [key, ms] : by_round)
      for (const auto& m : ms)
        if (m.label == label) return std::stoll(m.threshold);
    return 0LL;
  };
  std::sort(labels.begin(), labels.end(), [&](const std::string& a, const std::string& b) {
    return std::make_pair(a != "tuned", threshold_of(a)) < std::make_pair(b != "tuned", threshold_of(b));
  });
  hvd::bench::Table table({"configuration", "fusion threshold (B)", "cycle (ms)", "cache", "rounds",
                           "median GB/s", "tuned / this: median of paired rounds", "min .. max"});
  double worst = 0;
  std::string worst_label;
  for (const auto& label : labels) {
    std::vector<double> rates, ratios;
    std::string threshold, cycle, cache;  // "per launch" where launches tuned differently
    auto note = [](std::string& shown, const std::string& value) {
      shown = shown.empty() || shown == value ? value : "per launch";
    };
    for (const auto& [key, ms] : by_round) {
      const Measurement *tuned = nullptr, *mine = nullptr;
      for (const auto& m : ms) {
        if (m.label == "tuned") tuned = &m;
        if (m.label == label) mine = &m;
      }
      if (mine == nullptr) continue;
      note(threshold, mine->threshold);
      note(cycle, mine->cycle);
      note(cache, mine->cache);
      rates.push_back(mine->rate);
      if (tuned != nullptr) ratios.push_back(tuned->rate / mine->rate);
    }
    const auto r = hvd::bench::summarize(ratios);
    table.add({label, threshold, cycle, cache, std::to_string(rates.size()),
               fixed(hvd::bench::summarize(rates).median / 1e9, 3), fixed(r.median, 3) + "x",
               fixed(r.min, 2) + " .. " + fixed(r.max, 2)});
    if (label != "tuned" && (worst_label.empty() || r.median < worst)) {
      worst = r.median;
      worst_label = label;
    }
  }
  std::printf("Inside each autotune launch, once it decided: the tuned parameters against every hand-set threshold, "
              "switched on every rank, a fresh order per round (the target; 'tuned' against itself is the pairing's noise):\n\n%s\n",
              table.str().c_str());
  std::printf("The hand-set threshold tuned fares worst against: %s.\n\n", worst_label.c_str());
  const std::string what = set == "small" ? "small(200 x 4 KB) gradients" : "ResNet-50 gradients";
  hvd::bench::report_target(what + ", np=2: autotune from 64 KB: tuned / best hand-set, paired rounds in one launch",
                            worst, 0.9, true, "x");
}

int report(const std::string& path, const std::string& compare_path, const std::string& set) {
  if (!path.empty()) report_launches(path);
  if (!compare_path.empty()) report_in_launch(compare_path, set);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  hvd::bench::Args args(argc, argv);
  try {
    const std::string report_path = args.get("--report", ""), compare_report = args.get("--compare-report", "");
    if (!report_path.empty() || !compare_report.empty())
      return report(report_path, compare_report, args.get("--set", "resnet50"));
    return run_launch(args, &argc, &argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "autotune_benchmark: %s\n", e.what());
    return 1;
  }
}
