#include "held_gradient_names.h"

namespace hvd::torch::detail {

HeldGradientNames& HeldGradientNames::instance() {
  static HeldGradientNames names;
  return names;
}

bool HeldGradientNames::claim(const std::string& name, const void* owner) {
  std::lock_guard<std::mutex> lock(mutex_);
  return held_.emplace(name, owner).first->second == owner;
}

void HeldGradientNames::release(const std::string& name, const void* owner) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = held_.find(name);
  if (it != held_.end() && it->second == owner) held_.erase(it);
}

std::string same_name_advice(const std::string& optimizer_name) {
  return "Another DistributedOptimizer named '" + optimizer_name +
         "' has this parameter's allreduce in flight: give each optimizer its own DistributedOptimizerOptions::name";
}

}  // namespace hvd::torch::detail
