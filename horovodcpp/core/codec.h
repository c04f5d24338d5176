// Wire encoding of request and response lists: a versioned, length-checked little-endian
// format. Decoding truncated or corrupt bytes throws CodecError; it never reads out of bounds.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/message.h"

namespace hvd::detail {

class CodecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads an encoded RequestList one request at a time into a Request the caller keeps, whose name
// and shape then reuse their storage: the coordinator reads every rank's list each slow-path
// cycle (see Note [The coordinator's work is linear in ranks x tensors]). It keeps the previous
// request's rank and name, which the next request's encoding refers to. Throws CodecError as
// decode_request_list does, for the header on construction and for a request in next().
class RequestListReader {
 public:
  RequestListReader(const std::uint8_t* data, std::size_t size);
  bool shutdown() const { return shutdown_; }
  // Reads the next request into *r (every encoded field is overwritten); false after the last,
  // once the bytes are checked to end there.
  bool next(Request* r);

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
  std::uint32_t left_ = 0;
  bool shutdown_ = false;
  // What the next request may refer to: the previous one's rank and name.
  bool any_read_ = false;
  std::int32_t rank_ = 0;
  std::string name_;
};

std::vector<std::uint8_t> encode(const RequestList& list);
std::vector<std::uint8_t> encode(const ResponseList& list);
RequestList decode_request_list(const std::uint8_t* data, std::size_t size);
ResponseList decode_response_list(const std::uint8_t* data, std::size_t size);

}  // namespace hvd::detail
