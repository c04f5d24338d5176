// Fuzzes the negotiation codec: bytes are decoded as a request list (as the coordinator
// receives them from rank 1, beside a valid list from rank 0) and as a response list; whatever
// decodes goes on to fusion and re-encoding. Nothing may crash or overflow (run under ASan and
// UBSan), and a corrupt request list must stop negotiation with a message naming rank 1.
//
// Built with clang's -fsanitize=fuzzer this is a libFuzzer target; otherwise the main() below
// drives it: random inputs plus mutations of valid encodings, for a bounded time, seeded so a
// failure can be replayed (hvd_codec_fuzz SECONDS [SEED]).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/codec.h"
#include "core/coordinator.h"
#include "core/fusion.h"
#include "fuzz_support.h"

using namespace hvd::detail;

namespace {

void fail(const std::string& why) {
  std::fprintf(stderr, "codec fuzz: FAIL: %s\n", why.c_str());
  std::abort();
}

std::vector<std::uint8_t> valid_requests(int rank) {
  RequestList list;
  Request r;
  r.rank = rank;
  r.name = "w";
  r.shape = {3, 4};
  list.requests = {r};
  return encode(list);
}

void check_requests(const std::uint8_t* data, std::size_t size) {
  bool decodes = true;
  try {
    decode_request_list(data, size);
  } catch (const CodecError&) {
    decodes = false;
  }
  Coordinator coordinator(2, StallOptions{}, nullptr);
  ResponseList out = coordinator.coordinate({valid_requests(0), std::vector<std::uint8_t>(data, data + size)});
  if (!decodes && out.shutdown_reason.find("corrupt negotiation message from rank 1") == std::string::npos)
    fail("a corrupt request list from rank 1 gave: '" + out.shutdown_reason + "'");
  if (decodes) {
    fuse_responses(out.responses, 64);
    encode(out);
  }
}

void check_responses(const std::uint8_t* data, std::size_t size) {
  ResponseList list;
  try {
    list = decode_response_list(data, size);
  } catch (const CodecError&) {
    return;
  }
  const auto again = encode(list);
  const ResponseList round = decode_response_list(again.data(), again.size());
  if (round.responses.size() != list.responses.size()) fail("a decoded response list does not round-trip");
  std::size_t names = 0;
  for (const auto& r : list.responses) names += r.names.size();
  for (std::int64_t threshold : {std::int64_t{0}, std::int64_t{64}, INT64_MAX}) {
    std::size_t fused_names = 0;
    for (const auto& r : fuse_responses(list.responses, threshold)) fused_names += r.names.size();
    if (fused_names != names) fail("fusion lost or invented tensors");
  }
}

std::vector<std::vector<std::uint8_t>> seeds() {
  ResponseList responses;
  Response a;
  a.names = {"x", "y"};
  a.shapes = {{2, 3}, {4}};
  Response b;
  b.type = ResponseType::Allgather;
  b.names = {"g"};
  b.shapes = {{5, 2}};
  b.first_dims = {5, 1};
  Response c;
  c.type = ResponseType::Error;
  c.names = {"bad"};
  c.error = "shapes differ";
  responses.responses = {a, b, c};
  responses.shutdown_reason = "stall";
  RequestList requests;
  Request r;
  r.name = "layer.weight";
  r.shape = {7, 0, 3};
  r.group = "g";
  r.group_size = 2;
  requests.requests = {r, r};
  return {encode(responses), encode(requests), valid_requests(1)};
}

// Codec-aware edit: an extreme 8-byte value at some offset (sizes, dimensions, factors).
void put_extreme(std::vector<std::uint8_t>& bytes, hvd::fuzz::Rng& rng) {
  if (bytes.size() < 8) return;
  const std::uint64_t extremes[] = {0, 1, 0x7fffffffffffffffULL, 0x8000000000000000ULL, ~0ULL,
                                    1ULL << 32, 1ULL << 62, 0x00000000ffffffffULL};
  const std::uint64_t v = extremes[rng() % 8];
  const std::size_t at = rng() % (bytes.size() - 7);
  for (int k = 0; k < 8; ++k) bytes[at + k] = static_cast<std::uint8_t>(v >> (8 * k));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check_requests(data, size);
  check_responses(data, size);
  return 0;
}

#ifndef HVD_LIBFUZZER
int main(int argc, char** argv) {
  const hvd::fuzz::FuzzRun run("codec", argc, argv);
  hvd::fuzz::Rng rng(run.seed());
  const auto corpus = seeds();
  long inputs = 0;
  while (run.time_left()) {
    for (int batch = 0; batch < 256; ++batch, ++inputs) {
      std::vector<std::uint8_t> bytes;
      if (rng() % 8 == 0) {
        bytes = hvd::fuzz::random_bytes<std::vector<std::uint8_t>>(rng, 256);
        if (bytes.size() >= 5 && rng() % 2) {  // a valid header, so the records get decoded
          bytes[0] = 'H', bytes[1] = 'V', bytes[2] = 'D', bytes[3] = '1', bytes[4] = 1 + rng() % 2;
        }
      } else {
        bytes = corpus[rng() % corpus.size()];
        hvd::fuzz::mutate(bytes, rng, 4, put_extreme);
      }
      LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    }
  }
  std::printf("codec fuzz: %ld inputs, no failure\n", inputs);
  return 0;
}
#endif
