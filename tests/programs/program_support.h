// What the realistic programs share: the data split (each rank's batch is its slice of a union
// batch that a single process could train on), and the checks every program ends with. Only
// the checks talk to horovodcpp; the training code in each program is plain LibTorch plus the
// lines a Horovod user adds (marked HVD).
#pragma once

#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "horovodcpp/torch.h"

namespace programs {

// Which rows of each union batch a process trains on. The union is the concatenation of the
// `world` ranks' batches in rank order; a rank takes its own, and the single-process reference
// takes all of them.
struct Shard {
  int world = 1;  // ranks whose batches make up the union
  int first = 0;  // the first of them this shard takes
  int count = 1;  // how many of them it takes
  static Shard mine() { return {hvd::size(), hvd::rank(), 1}; }
  static Shard all() { return {hvd::size(), 0, hvd::size()}; }
  torch::Tensor rows(const torch::Tensor& union_batch) const {
    const std::int64_t b = union_batch.size(0) / world;
    return union_batch.narrow(0, first * b, count * b);
  }
};

// Failures are collected; finish() prints them on every rank and gives the exit status.
class Checks {
 public:
  explicit Checks(std::string program) : program_(std::move(program)) {}

  // Every rank holds bit-identical tensors (parameters, and buffers where the program asks).
  void identical_across_ranks(const torch::OrderedDict<std::string, torch::Tensor>& tensors, const std::string& what) {
    for (const auto& item : tensors) {
      const torch::Tensor t = item.value().detach().to(torch::kCPU).contiguous();
      const std::string bytes(static_cast<const char*>(t.data_ptr()), static_cast<std::size_t>(t.nbytes()));
      const auto all = hvd::torch::allgather_object(bytes, "check." + what + "." + item.key());
      for (std::size_t r = 1; r < all.size(); ++r)
        if (all[r] != all[0]) fail(what + " '" + item.key() + "' differs between rank 0 and rank " + std::to_string(r));
    }
  }

  // a and b (same names) agree within tol (largest absolute difference).
  void close(const torch::OrderedDict<std::string, torch::Tensor>& a,
             const torch::OrderedDict<std::string, torch::Tensor>& b, double tol, const std::string& what) {
    if (a.size() != b.size()) return fail(what + ": " + std::to_string(a.size()) + " vs " + std::to_string(b.size()) + " tensors");
    double worst = 0;
    std::string where;
    for (const auto& item : a) {
      const double d = (item.value().detach().to(torch::kDouble) - b[item.key()].detach().to(torch::kDouble))
                           .abs().max().item<double>();
      if (!(d <= worst)) {
        worst = d;
        where = item.key();
      }
    }
    std::printf("[%s] rank %d: %s: largest difference %.3g (at '%s'), tolerance %.1g\n", program_.c_str(),
                hvd::rank(), what.c_str(), worst, where.c_str(), tol);
    if (!(worst <= tol)) fail(what + ": '" + where + "' differs by " + std::to_string(worst));
  }

  void expect(bool ok, const std::string& what) {
    if (!ok) fail(what);
  }

  void fail(const std::string& what) { failures_ += "  " + what + "\n"; }

  int finish() const {
    if (failures_.empty()) {
      std::printf("[%s] rank %d of %d: PASS\n", program_.c_str(), hvd::rank(), hvd::size());
      return 0;
    }
    std::fprintf(stderr, "[%s] rank %d of %d: FAIL\n%s", program_.c_str(), hvd::rank(), hvd::size(), failures_.c_str());
    return 1;
  }

 private:
  std::string program_;
  std::string failures_;
};

}  // namespace programs
