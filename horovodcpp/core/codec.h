// Wire encoding of request and response lists: a versioned, length-checked little-endian
// format. Decoding truncated or corrupt bytes throws CodecError; it never reads out of bounds.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "core/message.h"

namespace hvd::detail {

class CodecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::vector<std::uint8_t> encode(const RequestList& list);
std::vector<std::uint8_t> encode(const ResponseList& list);
RequestList decode_request_list(const std::uint8_t* data, std::size_t size);
ResponseList decode_response_list(const std::uint8_t* data, std::size_t size);

}  // namespace hvd::detail
