// memcpy that accepts the null data pointer of an empty tensor (HostTensor::allocate gives none
// for zero elements; memcpy's pointers must be valid even for zero bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hvd::detail {

inline void copy_bytes(void* to, const void* from, std::int64_t bytes) {
  if (bytes > 0) std::memcpy(to, from, static_cast<std::size_t>(bytes));
}

}  // namespace hvd::detail
