// The wire codec: round trips, and clean errors on truncated or corrupt bytes.
#include <catch2/catch.hpp>

#include <limits>
#include <string>
#include <vector>

#include "core/codec.h"

using namespace hvd;
using namespace hvd::detail;

namespace {

RequestList sample_requests() {
  RequestList list;
  list.shutdown = true;
  Request a;
  a.rank = 3;
  a.type = RequestType::Alltoall;
  a.name = "layer1.weight";
  a.dtype = DataType::BFloat16;
  a.shape = {7, 0, 3};
  a.device = 2;
  a.reduce_op = ReduceOp::Max;
  a.prescale_factor = 0.25;
  a.postscale_factor = 8;
  a.root = 1;
  a.group = "g";
  a.group_size = 4;
  a.process_set_id = 5;
  Request b;
  b.name = "";
  list.requests = {a, b};
  return list;
}

ResponseList sample_responses() {
  ResponseList list;
  Response a;
  a.type = ResponseType::Allgather;
  a.names = {"x", "y"};
  a.shapes = {{1, 2}, {}};
  a.first_dims = {5, 0, 9};
  a.dtype = DataType::Float16;
  a.error = "nothing";
  a.last_joined_rank = 2;
  Response b;
  b.type = ResponseType::Error;
  b.names = {"bad"};
  b.error = "Mismatched shapes";
  list.responses = {a, b};
  list.shutdown_reason = "stall";
  return list;
}

}  // namespace

TEST_CASE("request lists round-trip", "[codec]") {
  const RequestList in = sample_requests();
  const auto bytes = encode(in);
  const RequestList out = decode_request_list(bytes.data(), bytes.size());
  REQUIRE(out.shutdown == in.shutdown);
  REQUIRE(out.requests == in.requests);
}

TEST_CASE("response lists round-trip", "[codec]") {
  const ResponseList in = sample_responses();
  const auto bytes = encode(in);
  const ResponseList out = decode_response_list(bytes.data(), bytes.size());
  REQUIRE(out.responses == in.responses);
  REQUIRE(out.shutdown_reason == "stall");
}

TEST_CASE("every dtype survives the codec, int16 (the newest code) included", "[codec]") {
  for (DataType dtype : {DataType::UInt8, DataType::Int8, DataType::Int16, DataType::Int32, DataType::Int64,
                         DataType::Float16, DataType::BFloat16, DataType::Float32, DataType::Float64}) {
    RequestList in;
    Request r;
    r.name = dtype_name(dtype);
    r.dtype = dtype;
    in.requests = {r};
    const auto bytes = encode(in);
    CHECK(decode_request_list(bytes.data(), bytes.size()).requests.at(0).dtype == dtype);
  }
  CHECK(dtype_size(DataType::Int16) == 2);
  CHECK(std::string(dtype_name(DataType::Int16)) == "int16");
}

TEST_CASE("every truncation of a message is rejected with an error, never a crash", "[codec]") {
  const auto requests = encode(sample_requests());
  for (std::size_t n = 0; n < requests.size(); ++n)
    REQUIRE_THROWS_AS(decode_request_list(requests.data(), n), CodecError);
  const auto responses = encode(sample_responses());
  for (std::size_t n = 0; n < responses.size(); ++n)
    REQUIRE_THROWS_AS(decode_response_list(responses.data(), n), CodecError);
}

TEST_CASE("corrupt bytes are rejected with a message saying what was wrong", "[codec]") {
  auto bytes = encode(sample_requests());
  SECTION("bad magic") {
    bytes[0] = 'X';
    REQUIRE_THROWS_WITH(decode_request_list(bytes.data(), bytes.size()), Catch::Contains("magic"));
  }
  SECTION("a response list is not a request list") {
    auto other = encode(sample_responses());
    REQUIRE_THROWS_WITH(decode_request_list(other.data(), other.size()), Catch::Contains("kind"));
  }
  SECTION("an enum out of range") {
    bytes[4 + 1 + 1 + 4] = 99;  // the first request's type (its first byte)
    REQUIRE_THROWS_WITH(decode_request_list(bytes.data(), bytes.size()), Catch::Contains("request type"));
  }
  SECTION("a huge count is refused before allocating") {
    bytes[6] = bytes[7] = bytes[8] = bytes[9] = 0xff;  // record count
    auto list = bytes;
    REQUIRE_THROWS_AS(decode_request_list(list.data(), list.size()), CodecError);
  }
  SECTION("trailing garbage") {
    bytes.push_back(0);
    REQUIRE_THROWS_WITH(decode_request_list(bytes.data(), bytes.size()), Catch::Contains("trailing"));
  }
  SECTION("a negative dimension is refused") {
    RequestList list;
    list.requests.push_back(sample_requests().requests.front());
    list.requests.front().shape = {3, -2};
    auto negative = encode(list);
    REQUIRE_THROWS_WITH(decode_request_list(negative.data(), negative.size()),
                        Catch::Contains("negative value -2 in shape"));
  }
  SECTION("every single-byte corruption is rejected or decodes to well-formed sizes") {
    int rejected = 0;
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      auto copy = bytes;
      copy[i] ^= 0xa5;
      try {
        const RequestList list = decode_request_list(copy.data(), copy.size());
        for (const auto& r : list.requests)
          for (auto d : r.shape) REQUIRE(d >= 0);
      } catch (const CodecError&) {
        ++rejected;
      }
    }
    REQUIRE(rejected > 0);  // the magic, kind and counts at least are checked
  }
}

TEST_CASE("decoded shapes whose element count overflows 64 bits are refused", "[codec]") {
  // 2^32 x 2^32 elements: each dimension is fine, their product is not.
  RequestList requests;
  Request r;
  r.name = "huge";
  r.shape = {std::int64_t{1} << 32, std::int64_t{1} << 32};
  requests.requests = {r};
  auto bytes = encode(requests);
  REQUIRE_THROWS_WITH(decode_request_list(bytes.data(), bytes.size()),
                      Catch::Contains("corrupt message: shape [4294967296, 4294967296] has more elements"));

  ResponseList responses;
  Response a;
  a.names = {"huge"};
  a.shapes = {{std::int64_t{1} << 40, std::int64_t{1} << 30}};
  responses.responses = {a};
  bytes = encode(responses);
  REQUIRE_THROWS_WITH(decode_response_list(bytes.data(), bytes.size()), Catch::Contains("more elements than fit"));
  // Several tensors that fit one by one but not together.
  a.names = {"a", "b"};
  a.shapes = {{std::int64_t{1} << 59}, {std::int64_t{1} << 59}};
  responses.responses = {a};
  bytes = encode(responses);
  REQUIRE_THROWS_WITH(decode_response_list(bytes.data(), bytes.size()), Catch::Contains("more bytes than fit"));
  a.names = {"g"};
  a.shapes = {{1}};
  a.first_dims = {INT64_MAX, 1};
  responses.responses = {a};
  bytes = encode(responses);
  REQUIRE_THROWS_WITH(decode_response_list(bytes.data(), bytes.size()), Catch::Contains("first dimensions add up"));
  REQUIRE_THROWS_WITH(hvd::num_elements({std::int64_t{1} << 40, std::int64_t{1} << 40}),
                      Catch::Contains("more elements than fit in 64 bits"));
}

TEST_CASE("every optional request field survives the compact encoding, alone and together", "[codec]") {
  Request plain;
  plain.name = "w";
  plain.shape = {5};
  std::vector<Request> variants;
  auto with = [&](auto change) {
    Request r = plain;
    change(r);
    variants.push_back(r);
  };
  with([](Request& r) { r.device = 3; });
  with([](Request& r) { r.device = std::numeric_limits<std::int32_t>::min(); });
  with([](Request& r) { r.prescale_factor = -0.0; });
  with([](Request& r) { r.postscale_factor = 1e300; });
  with([](Request& r) { r.root = std::numeric_limits<std::int32_t>::max(); });
  with([](Request& r) { r.group = "g"; });
  with([](Request& r) { r.group_size = -7; });  // a size without a name still travels
  with([](Request& r) { r.process_set_id = 12345678; });
  with([](Request& r) { r.error = "rank 3 refused it"; });
  with([](Request& r) { r.rank = -1; });
  with([](Request& r) { r.shape = {std::int64_t{1} << 59}; });
  with([](Request& r) { r.shape = {}; });
  variants.push_back(sample_requests().requests.front());  // every field at once
  for (const Request& r : variants) {
    RequestList in;
    in.requests = {r, plain, r};  // each beside a request with every field at its default
    const auto bytes = encode(in);
    const RequestList out = decode_request_list(bytes.data(), bytes.size());
    REQUIRE(out.requests == in.requests);
  }
  // waited_seconds is not part of Request's equality.
  RequestList waited;
  waited.requests = {plain, plain};
  waited.requests[1].waited_seconds = 2.5;
  const auto bytes = encode(waited);
  const RequestList out = decode_request_list(bytes.data(), bytes.size());
  CHECK(out.requests[0].waited_seconds == 0.0);
  CHECK(out.requests[1].waited_seconds == 2.5);
}

TEST_CASE("names are sent as the rest after the previous name's prefix; ranks only when they change", "[codec]") {
  const std::vector<std::string> names = {"model.layer1.weight", "model.layer1.bias", "model.layer10.weight",
                                          "", "x", "model.layer1.weight", "model.layer1.weight", "model"};
  const std::vector<std::int32_t> ranks = {3, 3, 4, 4, -1, std::numeric_limits<std::int32_t>::min(), 0, 0};
  RequestList in;
  for (std::size_t i = 0; i < names.size(); ++i) {
    Request r;
    r.name = names[i];
    r.rank = ranks[i];
    in.requests.push_back(r);
  }
  const auto bytes = encode(in);
  const RequestList out = decode_request_list(bytes.data(), bytes.size());
  REQUIRE(out.requests == in.requests);
}

TEST_CASE("a gradient's request takes about 20 bytes on the wire", "[codec]") {
  // 200 gradients named and shaped as the controller benchmark names them; fixed widths took 95
  // bytes each.
  RequestList list;
  for (int i = 0; i < 200; ++i) {
    Request r;
    r.rank = 4095;
    r.name = "model.layer" + std::to_string(i / 2) + (i % 2 ? ".bias" : ".weight") + ".grad";
    r.shape = {1024};
    r.reduce_op = ReduceOp::Average;
    list.requests.push_back(r);
  }
  const auto bytes = encode(list);
  CHECK(bytes.size() < 10 + 200 * 22);
  CHECK(decode_request_list(bytes.data(), bytes.size()).requests == list.requests);
}

TEST_CASE("compact request fields that cannot be right are refused, naming the field", "[codec]") {
  Request a;
  a.name = "ab";
  Request b;
  b.name = "ac";
  RequestList one;
  one.requests = {a};
  const std::size_t second = encode(one).size();  // where the second record starts
  RequestList two;
  two.requests = {a, b};
  SECTION("a name sharing more than the previous name holds") {
    auto bytes = encode(two);
    bytes[second + 2] = 5;  // type byte, flags, then the shared prefix (the rank is the previous one)
    REQUIRE_THROWS_WITH(decode_request_list(bytes.data(), bytes.size()),
                        Catch::Contains("shares 5 bytes with the previous request's name of 2"));
  }
  SECTION("the first request claiming the previous request's rank") {
    auto bytes = encode(one);
    bytes[10] |= 0x80;
    REQUIRE_THROWS_WITH(decode_request_list(bytes.data(), bytes.size()), Catch::Contains("first request of a list"));
  }
  const std::vector<std::uint8_t> header = {'H', 'V', 'D', '2', 1, 0, 1, 0, 0, 0};
  SECTION("a varint longer than 64 bits") {
    auto bytes = header;
    bytes.insert(bytes.end(), {0, 0});  // allreduce, no optional fields
    bytes.insert(bytes.end(), 9, 0xff);
    bytes.push_back(0x7f);
    REQUIRE_THROWS_WITH(decode_request_list(bytes.data(), bytes.size()), Catch::Contains("rank does not fit in 64 bits"));
  }
  SECTION("an int32 field beyond 32 bits") {
    auto bytes = header;
    bytes.insert(bytes.end(), {0, 0, 0x80, 0x80, 0x80, 0x80, 0x20});  // rank: 2^33 zig-zagged
    REQUIRE_THROWS_WITH(decode_request_list(bytes.data(), bytes.size()),
                        Catch::Contains("rank 8589934592 does not fit in 32 bits"));
  }
}
