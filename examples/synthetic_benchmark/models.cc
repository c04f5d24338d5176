#include "models.h"

#include <stdexcept>

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/pooling.h>

namespace hvd::bench {
namespace {

namespace nn = ::torch::nn;

nn::Conv2d conv(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

// 1x1 convolution + batch norm on the shortcut when the shape changes.
nn::Sequential shortcut(std::int64_t in, std::int64_t out, std::int64_t stride) {
  if (in == out && stride == 1) return nullptr;
  return nn::Sequential(conv(in, out, 1, stride), nn::BatchNorm2d(out));
}

// Two 3x3 convolutions.
class BasicBlockImpl : public nn::Module {
 public:
  BasicBlockImpl(std::int64_t in, std::int64_t out, std::int64_t stride)
      : conv1_(register_module("conv1", conv(in, out, 3, stride))),
        bn1_(register_module("bn1", nn::BatchNorm2d(out))),
        conv2_(register_module("conv2", conv(out, out, 3, 1))),
        bn2_(register_module("bn2", nn::BatchNorm2d(out))),
        downsample_(shortcut(in, out, stride)) {
    if (downsample_) register_module("downsample", downsample_);
  }
  ::torch::Tensor forward(::torch::Tensor x) {
    auto y = ::torch::relu(bn1_(conv1_(x)));
    y = bn2_(conv2_(y));
    return ::torch::relu(y + (downsample_ ? downsample_->forward(x) : x));
  }

 private:
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  nn::Conv2d conv2_;
  nn::BatchNorm2d bn2_;
  nn::Sequential downsample_;
};
// (TORCH_MODULE spelled out: inside namespace hvd, its unqualified torch:: means hvd::torch.)
class BasicBlock : public ::torch::nn::ModuleHolder<BasicBlockImpl> {
 public:
  using ::torch::nn::ModuleHolder<BasicBlockImpl>::ModuleHolder;
};

// 1x1 reduce, 3x3 (carries the stride), 1x1 expand to 4 x width.
class BottleneckImpl : public nn::Module {
 public:
  BottleneckImpl(std::int64_t in, std::int64_t width, std::int64_t stride)
      : conv1_(register_module("conv1", conv(in, width, 1, 1))),
        bn1_(register_module("bn1", nn::BatchNorm2d(width))),
        conv2_(register_module("conv2", conv(width, width, 3, stride))),
        bn2_(register_module("bn2", nn::BatchNorm2d(width))),
        conv3_(register_module("conv3", conv(width, 4 * width, 1, 1))),
        bn3_(register_module("bn3", nn::BatchNorm2d(4 * width))),
        downsample_(shortcut(in, 4 * width, stride)) {
    if (downsample_) register_module("downsample", downsample_);
  }
  ::torch::Tensor forward(::torch::Tensor x) {
    auto y = ::torch::relu(bn1_(conv1_(x)));
    y = ::torch::relu(bn2_(conv2_(y)));
    y = bn3_(conv3_(y));
    return ::torch::relu(y + (downsample_ ? downsample_->forward(x) : x));
  }

 private:
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  nn::Conv2d conv2_;
  nn::BatchNorm2d bn2_;
  nn::Conv2d conv3_;
  nn::BatchNorm2d bn3_;
  nn::Sequential downsample_;
};
class Bottleneck : public ::torch::nn::ModuleHolder<BottleneckImpl> {
 public:
  using ::torch::nn::ModuleHolder<BottleneckImpl>::ModuleHolder;
};

}  // namespace

ResNetImpl::ResNetImpl(const Layout& layout) : imagenet_stem_(layout.imagenet_stem) {
  stem_ = register_module("conv1", conv(3, layout.stem_width, imagenet_stem_ ? 7 : 3, imagenet_stem_ ? 2 : 1));
  stem_bn_ = register_module("bn1", nn::BatchNorm2d(layout.stem_width));
  stages_ = nn::Sequential();
  std::int64_t in = layout.stem_width;
  for (std::size_t s = 0; s < layout.blocks.size(); ++s) {
    for (int b = 0; b < layout.blocks[s]; ++b) {
      const std::int64_t stride = (s > 0 && b == 0) ? 2 : 1;
      if (layout.bottleneck) {
        stages_->push_back(Bottleneck(in, layout.width[s], stride));
        in = 4 * layout.width[s];
      } else {
        stages_->push_back(BasicBlock(in, layout.width[s], stride));
        in = layout.width[s];
      }
    }
  }
  register_module("layers", stages_);
  fc_ = register_module("fc", nn::Linear(in, layout.classes));
}

torch::Tensor ResNetImpl::forward(::torch::Tensor x) {
  x = ::torch::relu(stem_bn_(stem_(x)));
  if (imagenet_stem_) x = ::torch::max_pool2d(x, 3, 2, 1);
  x = stages_->forward(x);
  x = ::torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
  return fc_(x);
}

ModelSpec make_model(const std::string& name) {
  ResNetImpl::Layout layout;
  ModelSpec spec;
  if (name == "resnet50") {
    layout.bottleneck = true;
    layout.blocks = {3, 4, 6, 3};
    layout.width = {64, 128, 256, 512};
  } else if (name == "resnet18") {
    layout.blocks = {2, 2, 2, 2};
    layout.width = {64, 128, 256, 512};
  } else if (name == "resnet20") {
    layout.blocks = {3, 3, 3};
    layout.width = {16, 32, 64};
    layout.imagenet_stem = false;
    layout.stem_width = 16;
    layout.classes = 10;
    spec.image_size = 32;
  } else {
    throw std::invalid_argument("--model: '" + name + "' is not one of resnet50, resnet18, resnet20");
  }
  spec.classes = layout.classes;
  spec.model = ResNet(layout);
  return spec;
}

}  // namespace hvd::bench
