// The gradient sets the gradient benchmark exchanges: ResNet-50's 161 parameter gradients
// (torchvision's layout: 53 bias-free convolutions, 53 batch norms with weight and bias, the
// final fully connected layer; 25,557,032 values) and a synthetic set of N small tensors.
// Plain data, read by the gradient benchmark's main thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hvd::bench {

struct GradientSpec {
  std::string name;
  std::vector<std::int64_t> shape;
};

// In parameter order (forward order); backward produces them in reverse.
const std::vector<GradientSpec>& resnet50_gradients();
constexpr std::int64_t kResnet50Parameters = 25557032;

// `count` float32 tensors of `bytes` bytes each.
std::vector<GradientSpec> small_gradients(int count, std::int64_t bytes);

}  // namespace hvd::bench
