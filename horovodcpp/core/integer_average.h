// Average on integer tensors, exactly. Every backend that averages integers goes through these
// three steps, so the result is the same whichever runs it:
//   widen_for_average (each rank's values, after any prescale) -> a Sum of int64 words across the
//   group -> finish_average (into the dtype, then any postscale).
// See Note [Integer averages are exact].
#pragma once

#include <cstdint>

#include "horovodcpp/horovod.h"

namespace hvd::detail {

// Note [Integer averages are exact]
// Average on uint8, int8, int16, int32 and int64 is the sum over the group divided by the group
// size, truncated toward zero: C++'s `/`, torch's div(rounding_mode="trunc"), what Horovod's tests
// expect of integer averages (test_torch.py's join test; Horovod 0.28 itself scales the sum by
// 1.0/size in double and truncates, which loses the low bits of int64 values past 2^53 and can
// land one below an exact quotient). No double is involved here, and the sum cannot overflow:
// each value travels as int64 words (one word for the narrow types, two for int64: the high 32
// bits signed and the low 32 bits unsigned), summed in int64, and put back together in 128 bits
// before the division. The quotient of values that fit the dtype fits it too, so Average never
// overflows, whatever the group size (below 2^31 ranks). Sum and Product wrap instead (modulo
// 2^bits, as the integer addition of MPI and of the CPU does); Min and Max are exact.

bool is_integer(DataType dtype);

// int64 words per element while summing: 2 for int64, 1 for the narrower integers.
int average_words(DataType dtype);

// Writes `count` elements of `from` (an integer dtype) as count * average_words(dtype) words.
void widen_for_average(const void* from, std::int64_t count, DataType dtype, std::int64_t* wide);

// `wide` holds the group's sum of widen_for_average's words: writes each sum / `divisor`
// (truncated toward zero) to `to` as `dtype`. `to` may not overlap `wide`.
void finish_average(const std::int64_t* wide, std::int64_t count, DataType dtype, int divisor, void* to);

}  // namespace hvd::detail
