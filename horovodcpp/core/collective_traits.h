// One description per collective: what messages, request checks, fusion, the controller and the
// runtime need to know about it. Adding a collective is one entry in collective_traits.cc (and
// its enum value in message.h) plus its ops and its public function. Read-only, any thread.
#pragma once

#include "core/message.h"

namespace hvd::detail {

struct CollectiveTraits {
  RequestType request;
  ResponseType response;
  const char* name;         // as messages and the timeline show it: "ALLREDUCE"
  bool has_tensor;          // false for join and barrier, which only synchronize
  bool fusable;             // consecutive compatible responses share one backend call
  bool cacheable;           // the response cache may remember it (never for grouped tensors)
  bool per_rank_first_dim;  // ranks may differ in the first dimension (trailing dims must agree)
  bool needs_first_dim;     // a scalar is refused
  bool joinable;            // a joined rank still takes part, contributing zeros
  bool needs_root;          // every rank must name the same root
  bool reduces;             // takes a reduce op (and must agree on it)
  bool allocates_output;    // the output shape is known only when the op runs
};

const CollectiveTraits& traits_of(RequestType type);
// Null for ResponseType::Error, which is not a collective.
const CollectiveTraits* find_traits(ResponseType type);
// The last enum values, for the decoder's range checks.
RequestType last_request_type();

}  // namespace hvd::detail
