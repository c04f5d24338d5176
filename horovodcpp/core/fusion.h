// Packs compatible responses of a fusable collective (collective_traits.h) into one, up to the
// fusion threshold. A pure function of the response list, so every rank computes the same fused
// list.
#pragma once

#include <cstdint>
#include <vector>

#include "core/message.h"

namespace hvd::detail {

// Two responses fuse when their collective is fusable, dtype and device kind agree (and reduce op
// and scale factors, for collectives that reduce) and the fused size stays within
// `threshold_bytes` (0 disables fusion); an allgather counts its gathered bytes, and its
// first_dims become one block of per-rank first dimensions per tensor. A fused response takes
// the position of its first member.
std::vector<Response> fuse_responses(std::vector<Response> responses, std::int64_t threshold_bytes);

}  // namespace hvd::detail
