#include "core/fusion.h"

namespace hvd::detail {
namespace {

bool compatible(const Response& a, const Response& b) {
  return a.type == ResponseType::Allreduce && b.type == ResponseType::Allreduce &&
         a.dtype == b.dtype && (a.device == kCpuDevice) == (b.device == kCpuDevice) &&
         a.reduce_op == b.reduce_op && a.prescale_factor == b.prescale_factor &&
         a.postscale_factor == b.postscale_factor;
}

}  // namespace

std::vector<Response> fuse_responses(std::vector<Response> responses, std::int64_t threshold_bytes) {
  if (threshold_bytes <= 0) return responses;
  std::vector<Response> fused;
  std::vector<std::int64_t> fused_bytes;
  for (auto& r : responses) {
    const std::int64_t bytes = r.type == ResponseType::Allreduce ? r.total_bytes() : 0;
    bool merged = false;
    // Look back for an open fused response this one fits into.
    for (std::size_t i = 0; i < fused.size() && !merged; ++i) {
      if (!compatible(fused[i], r) || bytes > threshold_bytes - fused_bytes[i]) continue;  // no overflow
      for (auto& n : r.names) fused[i].names.push_back(std::move(n));
      for (auto& s : r.shapes) fused[i].shapes.push_back(std::move(s));
      fused_bytes[i] += bytes;
      merged = true;
    }
    if (!merged) {
      fused_bytes.push_back(bytes);
      fused.push_back(std::move(r));
    }
  }
  return fused;
}

}  // namespace hvd::detail
