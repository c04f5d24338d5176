// The models the synthetic benchmark trains: ResNet-50 and ResNet-18 (ImageNet layout, 224x224
// inputs, He et al. 2015) and ResNet-20 (the small CIFAR-style ResNet: three stages of basic
// blocks, 16/32/64 channels, 32x32 inputs), written with LibTorch modules. Built and used by
// the benchmark's training thread.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/batchnorm.h>

#include <memory>
#include <string>
#include <vector>

namespace hvd::bench {

// A ResNet: a stem, stages of residual blocks (basic or bottleneck), global average pooling and
// a classifier.
class ResNetImpl : public ::torch::nn::Module {
 public:
  struct Layout {
    bool bottleneck = false;
    std::vector<int> blocks;          // per stage
    std::vector<std::int64_t> width;  // per stage (bottleneck: inner width; out = 4 x width)
    bool imagenet_stem = true;        // 7x7/2 conv + 3x3/2 max pool, else one 3x3 conv
    std::int64_t stem_width = 64;
    std::int64_t classes = 1000;
  };
  explicit ResNetImpl(const Layout& layout);
  ::torch::Tensor forward(::torch::Tensor x);

 private:
  bool imagenet_stem_;
  ::torch::nn::Conv2d stem_{nullptr};
  ::torch::nn::BatchNorm2d stem_bn_{nullptr};
  ::torch::nn::Sequential stages_{nullptr};
  ::torch::nn::Linear fc_{nullptr};
};
// (TORCH_MODULE spelled out: inside namespace hvd, its unqualified torch:: means hvd::torch.)
class ResNet : public ::torch::nn::ModuleHolder<ResNetImpl> {
 public:
  using ::torch::nn::ModuleHolder<ResNetImpl>::ModuleHolder;
};

struct ModelSpec {
  ResNet model{nullptr};
  std::int64_t image_size = 224;
  std::int64_t classes = 1000;
};

// "resnet50", "resnet18" or "resnet20"; anything else throws naming the choices.
ModelSpec make_model(const std::string& name);

}  // namespace hvd::bench
