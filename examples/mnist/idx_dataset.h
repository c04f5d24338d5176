// MNIST digits from IDX files (the format of the MNIST distribution, written here by
// scripts/fetch-mnist.sh). torch::data::datasets::MNIST insists on exactly 60,000 / 10,000
// images; this reads any count, so the 8,000 / 2,000 split of the npm digits loads too.
// Used by the training thread; owns the images as one normalised float tensor.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>

namespace mnist {

class IdxDataset : public torch::data::datasets::Dataset<IdxDataset> {
 public:
  // prefix "train" or "t10k"; normalises with MNIST's mean and standard deviation.
  IdxDataset(const std::string& dir, const std::string& prefix) {
    const std::string images_path = dir + "/" + prefix + "-images-idx3-ubyte";
    const std::string labels_path = dir + "/" + prefix + "-labels-idx1-ubyte";
    std::ifstream images(images_path, std::ios::binary);
    std::ifstream labels(labels_path, std::ios::binary);
    if (!images || !labels)
      throw std::runtime_error("cannot open " + (images ? labels_path : images_path) +
                               " (run scripts/fetch-mnist.sh to fetch the digits)");
    expect(images, 0x803, images_path, "magic number");
    const std::uint32_t count = read_u32(images, images_path);
    expect(images, 28, images_path, "rows");
    expect(images, 28, images_path, "columns");
    expect(labels, 0x801, labels_path, "magic number");
    expect(labels, count, labels_path, "image count (as in " + images_path + ")");
    auto pixels = torch::empty({count, 1, 28, 28}, torch::kUInt8);
    labels_ = torch::empty({count}, torch::kUInt8);
    read_bytes(images, pixels, images_path);
    read_bytes(labels, labels_, labels_path);
    images_ = (pixels.to(torch::kFloat32) / 255.0f - 0.1307f) / 0.3081f;
    labels_ = labels_.to(torch::kInt64);
  }

  torch::data::Example<> get(size_t index) override { return {images_[index], labels_[index]}; }
  torch::optional<size_t> size() const override { return static_cast<size_t>(labels_.size(0)); }

 private:
  static std::uint32_t read_u32(std::ifstream& in, const std::string& path) {
    unsigned char b[4];
    if (!in.read(reinterpret_cast<char*>(b), 4)) throw std::runtime_error(path + ": truncated header");
    return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | b[3];
  }
  static void expect(std::ifstream& in, std::uint32_t want, const std::string& path, const std::string& what) {
    const std::uint32_t got = read_u32(in, path);
    if (got != want)
      throw std::runtime_error(path + ": " + what + " is " + std::to_string(got) + ", expected " +
                               std::to_string(want));
  }
  static void read_bytes(std::ifstream& in, torch::Tensor& t, const std::string& path) {
    if (!in.read(static_cast<char*>(t.data_ptr()), t.numel()))
      throw std::runtime_error(path + ": holds fewer bytes than its header announces");
  }

  torch::Tensor images_, labels_;
};

}  // namespace mnist
