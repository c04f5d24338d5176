// Cross-rank consistency checks the coordinator runs on the requests of one tensor name.
#pragma once

#include <string>
#include <vector>

#include "core/message.h"

namespace hvd::detail {

// Returns an error naming the tensor, the ranks and both values when the requests disagree
// (type, dtype, shape, reduce op, root, scale factors, host/device), or when the collective is
// not allowed while ranks have joined; empty when they are consistent.
std::string check_requests(const std::vector<Request>& requests, int size, const std::vector<int>& joined);

}  // namespace hvd::detail
