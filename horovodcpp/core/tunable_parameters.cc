#include "core/tunable_parameters.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "core/codec.h"

namespace hvd::detail {
namespace {

constexpr std::size_t kEncodedSize = 8 + 8 + 1;
constexpr double kMaxCycleTimeMs = 60000;  // as HOROVOD_CYCLE_TIME accepts

void put_u64(std::vector<std::uint8_t>& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

std::uint64_t get_u64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::uint64_t{p[i]} << (8 * i);
  return v;
}

}  // namespace

std::string describe(const TunableParameters& p) {
  std::ostringstream out;
  out << "fusion threshold " << p.fusion_threshold_bytes << " bytes, cycle time " << p.cycle_time_ms
      << " ms, response cache " << (p.cache_enabled ? "on" : "off");
  return out.str();
}

bool in_range(const TunableParameters& p) {
  return p.fusion_threshold_bytes >= 0 && p.cycle_time_ms > 0 && p.cycle_time_ms <= kMaxCycleTimeMs;
}

std::vector<std::uint8_t> encode(const TunableParameters& p) {
  std::vector<std::uint8_t> out;
  out.reserve(kEncodedSize);
  put_u64(out, static_cast<std::uint64_t>(p.fusion_threshold_bytes));
  std::uint64_t cycle_bits;
  std::memcpy(&cycle_bits, &p.cycle_time_ms, sizeof cycle_bits);
  put_u64(out, cycle_bits);
  out.push_back(p.cache_enabled ? 1 : 0);
  return out;
}

TunableParameters decode_tunable_parameters(const std::vector<std::uint8_t>& bytes) {
  if (bytes.size() != kEncodedSize)
    throw CodecError("corrupt tuned parameters: " + std::to_string(bytes.size()) + " bytes, expected " +
                     std::to_string(kEncodedSize));
  TunableParameters p;
  p.fusion_threshold_bytes = static_cast<std::int64_t>(get_u64(bytes.data()));
  const std::uint64_t cycle_bits = get_u64(bytes.data() + 8);
  std::memcpy(&p.cycle_time_ms, &cycle_bits, sizeof cycle_bits);
  if (bytes[16] > 1) throw CodecError("corrupt tuned parameters: cache flag " + std::to_string(bytes[16]));
  p.cache_enabled = bytes[16] == 1;
  if (!in_range(p)) throw CodecError("corrupt tuned parameters: " + describe(p));
  return p;
}

}  // namespace hvd::detail
