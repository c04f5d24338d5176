// gradient_benchmark: one training step's gradient exchange, the way each peer would do it.
// Gradients are submitted in backward order (last layer first) and the step ends when all are
// summed on every rank:
//   raw MPI, one at a time    MPI_Allreduce per tensor (blocking), what hand-written MPI does
//   ours, fused               allreduce_async per tensor, then wait for all (fusion + cache)
//   ours, fused, timeline on  the same while the timeline records (hvd::start_timeline, which
//                             is what HOROVOD_TIMELINE does at init)
//   gloo, one at a time       c10d ProcessGroupGloo allreduce + wait per tensor (LibTorch's
//                             distributed example)
//   gloo, issue all then wait every allreduce issued, then every wait
// Sets: ResNet-50's 161 gradients and N x B-byte tensors (default 200 x 4 KB).
//
//   mpirun -np 4 ./gradient_benchmark [--sets resnet50,small] [--small-count 200]
//       [--small-bytes 4096] [--steps 12] [--rounds 3] [--warmup 2] [--timeline PATH] [--no-gloo]
//
// Each peer's result is first checked against the closed form sum_r (r + 1). Then `rounds`
// rounds run every peer in turn for steps/rounds steps; a step is timed between a barrier and
// its last completion, slowest rank. The table gives the median step and the 95% interval of
// the mean; the ratios are the peer's median over ours (>1: ours is faster).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <horovodcpp/horovod.h>

#include "bench_common.h"
#include "gradient_sets.h"
#ifdef HVD_BENCH_WITH_GLOO
#include <ATen/ATen.h>

#include "gloo_group.h"
#endif

namespace {

using hvd::bench::fixed;

// Command-line settings, read once by main.
struct Config {
  std::vector<std::string> sets{"resnet50", "small"};
  int small_count = 200;
  std::int64_t small_bytes = 4096;
  int steps = 12, rounds = 3, warmup = 2;
  std::string timeline;
  bool gloo = true;
};

// One gradient set's tensors (host float32), with views for every peer. Main thread; owned by main.
struct GradientSet {
  std::string label;
  std::vector<std::shared_ptr<hvd::HostTensor>> tensors;  // backward order
  std::vector<std::string> names;
#ifdef HVD_BENCH_WITH_GLOO
  std::vector<at::Tensor> torch_views;
#endif
  std::int64_t total_bytes = 0;

  GradientSet(std::string set_label, const std::vector<hvd::bench::GradientSpec>& specs) : label(std::move(set_label)) {
    for (auto it = specs.rbegin(); it != specs.rend(); ++it) {
      auto t = hvd::HostTensor::allocate(hvd::DataType::Float32, it->shape);
      total_bytes += t->size_bytes();
      names.push_back("gradient_benchmark." + label + "." + it->name);
#ifdef HVD_BENCH_WITH_GLOO
      torch_views.push_back(at::from_blob(t->data(), {t->num_elements()}, at::TensorOptions().dtype(at::kFloat)));
#endif
      tensors.push_back(std::move(t));
    }
  }
  void fill(float value) {
    for (auto& t : tensors) std::fill_n(t->data_as<float>(), t->num_elements(), value);
  }
  std::int64_t mismatches(float value) const {
    std::int64_t wrong = 0;
    for (const auto& t : tensors)
      wrong += std::count_if(t->data_as<float>(), t->data_as<float>() + t->num_elements(),
                             [value](float v) { return v != value; });
    return wrong;
  }
};

// One way of exchanging a step's gradients.
struct Peer {
  std::string name;
  std::function<void()> step;
  bool timeline = false;  // record the timeline while this peer runs
};

std::vector<Peer> peers_for(GradientSet& set, MPI_Comm comm, [[maybe_unused]] hvd::bench::GlooGroupPtr gloo,
                            bool with_timeline) {
  std::vector<Peer> peers;
  peers.push_back({"raw MPI, one at a time", [&set, comm] {
                     for (auto& t : set.tensors)
                       MPI_Allreduce(MPI_IN_PLACE, t->data(), static_cast<int>(t->num_elements()), MPI_FLOAT, MPI_SUM, comm);
                   }});
  auto ours = [&set] {
    std::vector<hvd::Handle> handles;
    handles.reserve(set.tensors.size());
    for (std::size_t i = 0; i < set.tensors.size(); ++i)
      handles.push_back(hvd::allreduce_async(set.tensors[i], set.tensors[i], {hvd::ReduceOp::Sum, set.names[i]}));
    for (auto& h : handles) h.wait();
  };
  peers.push_back({"ours, fused", ours});
  if (with_timeline) peers.push_back({"ours, fused, timeline on", ours, true});
#ifdef HVD_BENCH_WITH_GLOO
  if (gloo) {
    peers.push_back({"gloo, one at a time", [&set, gloo] {
                       for (auto& t : set.torch_views) gloo->allreduce(t);
                     }});
    peers.push_back({"gloo, issue all then wait", [&set, gloo] { gloo->allreduce_all_then_wait(set.torch_views); }});
  }
#endif
  return peers;
}

void check(const std::vector<Peer>& peers, GradientSet& set, const hvd::bench::Session& session) {
  const int n = session.size();
  for (const auto& peer : peers) {
    set.fill(static_cast<float>(session.rank() + 1));
    peer.step();
    const auto wrong = set.mismatches(static_cast<float>(n * (n + 1) / 2));
    if (hvd::bench::max_over_ranks(static_cast<double>(wrong), session.comm()) > 0)
      throw std::runtime_error(peer.name + " gave a wrong sum on some rank for set " + set.label);
  }
  set.fill(0.0f);
}

// This rank's seconds for one step (the slowest rank is taken later, once for all steps).
double timed_step(const Peer& peer, MPI_Comm comm) {
  hvd::bench::quiet_barrier(comm);
  const double start = hvd::bench::now_seconds();
  peer.step();
  return hvd::bench::now_seconds() - start;
}

// Per peer, every timed step's seconds.
std::vector<std::vector<double>> run_peers(const std::vector<Peer>& peers, const Config& config, MPI_Comm comm) {
  for (const auto& peer : peers)
    for (int i = 0; i < config.warmup; ++i) timed_step(peer, comm);
  std::vector<std::vector<double>> samples(peers.size());
  const int per_round = std::max(1, config.steps / config.rounds);
  for (int round = 0; round < config.rounds; ++round) {
    for (std::size_t p = 0; p < peers.size(); ++p) {
      if (peers[p].timeline) hvd::start_timeline(config.timeline);
      for (int i = 0; i < per_round; ++i) samples[p].push_back(timed_step(peers[p], comm));
      if (peers[p].timeline) hvd::stop_timeline();
    }
  }
  for (auto& s : samples) s = hvd::bench::max_over_ranks(std::move(s), comm);  // slowest rank per step
  return samples;
}

void report(const GradientSet& set, const std::vector<Peer>& peers, const std::vector<std::vector<double>>& samples,
            int np) {
  std::vector<hvd::bench::Summary> s;
  for (const auto& x : samples) s.push_back(hvd::bench::summarize(x));
  const double ours = s[1].median;
  hvd::bench::Table table({"peer", "step median (ms)", "mean ± 95% (ms)", "min (ms)", "busbw (GB/s)", "peer/ours"});
  for (std::size_t p = 0; p < peers.size(); ++p) {
    const double busbw = set.total_bytes / s[p].median / 1e9 * 2.0 * (np - 1) / np;
    table.add({peers[p].name, fixed(s[p].median * 1e3, 3), fixed(s[p].mean * 1e3, 3) + " ± " + fixed(s[p].ci95 * 1e3, 3),
               fixed(s[p].min * 1e3, 3), fixed(busbw, 3), fixed(s[p].median / ours, 2) + "x"});
  }
  std::printf("\n### gradient set %s: %zu tensors, %s per step, np=%d (%zu steps per peer)\n\n%s\n", set.label.c_str(),
              set.tensors.size(), hvd::bench::human_bytes(set.total_bytes).c_str(), np, samples[0].size(),
              table.str().c_str());
  if (set.label == "small(200 x 4 KB)") {  // the set the targets are stated for
    const double speedup = s[0].median / ours;
    const std::string what = set.label + " per step at np=" + std::to_string(np) + ": raw MPI one-at-a-time / ours";
    if (np == 4) hvd::bench::report_target(what, speedup, 3.0, true, "x");
    if (np == 2) hvd::bench::report_target(what + " (within 2x of raw)", speedup, 0.5, true, "x");
  }
  std::fflush(stdout);
}

Config parse(const hvd::bench::Args& args) {
  Config c;
  std::string sets = args.get("--sets", "resnet50,small") + ",";
  c.sets.clear();
  for (std::size_t at = 0, comma; (comma = sets.find(',', at)) != std::string::npos; at = comma + 1)
    if (comma > at) c.sets.push_back(sets.substr(at, comma - at));
  for (const auto& s : c.sets)
    if (s != "resnet50" && s != "small") throw std::invalid_argument("--sets: '" + s + "' is not resnet50 or small");
  c.small_count = static_cast<int>(args.get_int("--small-count", c.small_count));
  c.small_bytes = args.get_int("--small-bytes", c.small_bytes);
  c.steps = static_cast<int>(args.get_int("--steps", c.steps));
  c.rounds = static_cast<int>(args.get_int("--rounds", c.rounds));
  c.warmup = static_cast<int>(args.get_int("--warmup", c.warmup));
  const char* tmp = std::getenv("TMPDIR");
  c.timeline = args.get("--timeline", std::string(tmp ? tmp : "/tmp") + "/hvd_gradient_benchmark_timeline.json");
  c.gloo = !args.flag("--no-gloo");
  args.reject_unknown();
  if (c.small_count < 1 || c.small_bytes < 4 || c.small_bytes % 4 || c.steps < 1 || c.rounds < 1 || c.warmup < 0)
    throw std::invalid_argument("need --small-count >= 1, --small-bytes a positive multiple of 4, --steps >= 1, "
                                "--rounds >= 1, --warmup >= 0");
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  hvd::bench::Args args(argc, argv);
  if (args.flag("--help")) {
    std::puts("usage: mpirun -np N gradient_benchmark [--sets resnet50,small] [--small-count N] [--small-bytes B] "
              "[--steps S] [--rounds R] [--warmup W] [--timeline PATH] [--no-gloo]");
    return 0;
  }
  hvd::bench::Session session(&argc, &argv);
  try {
    const Config config = parse(args);
    hvd::bench::GlooGroupPtr gloo;
#ifdef HVD_BENCH_WITH_GLOO
    if (config.gloo) gloo = std::make_shared<hvd::bench::GlooGroup>(session.comm(), session.all_on_one_node());
#endif
    std::int64_t resnet50_values = 0;
    for (const auto& spec : hvd::bench::resnet50_gradients()) resnet50_values += hvd::num_elements(spec.shape);
    if (hvd::bench::resnet50_gradients().size() != 161 || resnet50_values != hvd::bench::kResnet50Parameters)
      throw std::logic_error("the ResNet-50 table does not hold 161 gradients of 25,557,032 values");
    for (const auto& name : config.sets) {
      const bool small = name == "small";
      GradientSet set(small ? "small(" + std::to_string(config.small_count) + " x " +
                                  hvd::bench::human_bytes(config.small_bytes) + ")"
                            : "resnet50",
                      small ? hvd::bench::small_gradients(config.small_count, config.small_bytes)
                            : hvd::bench::resnet50_gradients());
      auto peers = peers_for(set, session.comm(), gloo, !config.timeline.empty());
      check(peers, set, session);
      auto samples = run_peers(peers, config, session.comm());
      if (session.rank() == 0) report(set, peers, samples, session.size());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gradient_benchmark (rank %d): %s\n", session.rank(), e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return 0;
}
