// The gradients' collective names that DistributedOptimizers have taken, process-wide. Internal
// to the torch front end.
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>

namespace hvd::torch::detail {

// An optimizer holds a gradient's collective name from the hook that holds it for the end of
// the pass or starts its allreduce until the pass writes it back (or it is discarded). Two
// optimizers of one name taking the same gradient name in one pass would each reduce it, in an
// order that may differ between ranks: each reduced with the other's gradient. Refused here, in
// program order, so every rank refuses the same one; the runtime's own "already in flight"
// refusal depends on whether the first allreduce has completed yet, which differs between ranks
// (one rank refused, the other submitted twice, and a later pass's gradient was reduced with the
// refused pass's).
class HeldGradientNames {
 public:
  // The process's one registry.
  static HeldGradientNames& instance();
  // Whether `owner` holds `name` now (false: another owner does).
  bool claim(const std::string& name, const void* owner);
  void release(const std::string& name, const void* owner);

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, const void*> held_;
};

// What to do when another optimizer of the same name holds a gradient's allreduce.
std::string same_name_advice(const std::string& optimizer_name);

}  // namespace hvd::torch::detail
