// The reusable host staging buffer that fused responses are packed into. Grown on demand to the
// largest fused size seen (at most the fusion threshold) and never shrunk, so steady-state
// training allocates nothing. Owned by the Runtime, used only on the background thread.
#pragma once

#include <cstddef>
#include <vector>

namespace hvd::detail {

class FusionBuffer {
 public:
  void* get(std::size_t bytes) {
    if (storage_.size() < bytes) storage_.resize(bytes);
    return storage_.data();
  }
  std::size_t capacity() const { return storage_.size(); }

 private:
  std::vector<unsigned char> storage_;
};

}  // namespace hvd::detail
