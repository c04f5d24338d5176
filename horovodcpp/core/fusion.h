// Packs consecutive compatible allreduce responses into one, up to the fusion threshold. A pure
// function of the response list, so every rank computes the same fused list.
#pragma once

#include <cstdint>
#include <vector>

#include "core/message.h"

namespace hvd::detail {

// Two allreduces fuse when dtype, device kind, reduce op and scale factors agree and the fused
// size stays within `threshold_bytes` (0 disables fusion). A fused response takes the position
// of its first member.
std::vector<Response> fuse_responses(std::vector<Response> responses, std::int64_t threshold_bytes);

}  // namespace hvd::detail
