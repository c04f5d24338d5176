// The knobs the autotuner changes on a live job, as one value: rank 0's ParameterManager decides
// them, the Controller carries them to every rank (encoded as below) and applies them in the
// same negotiation cycle everywhere. Plain data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hvd::detail {

struct TunableParameters {
  std::int64_t fusion_threshold_bytes = 0;
  double cycle_time_ms = 1;
  bool cache_enabled = true;

  bool operator==(const TunableParameters& o) const {
    return fusion_threshold_bytes == o.fusion_threshold_bytes && cycle_time_ms == o.cycle_time_ms &&
           cache_enabled == o.cache_enabled;
  }
  bool operator!=(const TunableParameters& o) const { return !(*this == o); }
};

// "threshold 1048576 bytes, cycle time 2.5 ms, cache on"
std::string describe(const TunableParameters& p);

// Whether the values are ones the runtime can run with: a threshold >= 0 and a cycle time in
// (0, 60000] ms, as HOROVOD_FUSION_THRESHOLD and HOROVOD_CYCLE_TIME accept.
bool in_range(const TunableParameters& p);

// Fixed-size little-endian bytes; decode throws CodecError (codec.h) on a wrong size or a value
// out of range (negative threshold, cycle time not in (0, 60000] ms).
std::vector<std::uint8_t> encode(const TunableParameters& p);
TunableParameters decode_tunable_parameters(const std::vector<std::uint8_t>& bytes);

}  // namespace hvd::detail
