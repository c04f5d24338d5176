// float16 / bfloat16 conversions used by host reductions.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "core/half.h"
#include "core/host_scale.h"

using namespace hvd::detail;

TEST_CASE("float16 converts exactly where float16 can represent the value", "[half]") {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 0.000061035156f /* smallest normal */, 5.9604645e-8f /* subnormal */})
    REQUIRE(half_to_float(float_to_half(v)) == v);
  REQUIRE(float_to_half(1.0f) == 0x3c00);
  REQUIRE(float_to_half(-2.0f) == 0xc000);
  REQUIRE(std::isinf(half_to_float(float_to_half(70000.0f))));
  REQUIRE(std::isnan(half_to_float(float_to_half(std::numeric_limits<float>::quiet_NaN()))));
  // Round to nearest even: 1 + 2^-11 lies halfway between 1 and the next half, rounds to 1.
  REQUIRE(float_to_half(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  REQUIRE(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
}

TEST_CASE("bfloat16 keeps float's range with 8 bits of mantissa", "[half]") {
  for (float v : {0.0f, 1.0f, -3.0f, std::ldexp(1.0f, 100), 256.0f}) REQUIRE(bfloat16_to_float(float_to_bfloat16(v)) == v);
  REQUIRE(float_to_bfloat16(1.0f) == 0x3f80);
  REQUIRE(bfloat16_to_float(float_to_bfloat16(1.00390625f)) == 1.0f);  // halfway rounds to even
}

TEST_CASE("scaling works for every dtype", "[half]") {
  std::int32_t ints[3] = {10, -7, 3};
  scale_host_buffer(ints, 3, hvd::DataType::Int32, 0.5);
  REQUIRE(ints[0] == 5);
  REQUIRE(ints[1] == -4);  // -3.5 rounds to nearest, away from zero on ties
  std::int64_t six = 6;
  scale_host_buffer(&six, 1, hvd::DataType::Int64, 1.0 / 3);
  REQUIRE(six == 2);  // not 1: 6 * (1/3) is just below 2 in binary
  std::uint16_t halves[2] = {float_to_half(3.0f), float_to_half(-1.0f)};
  scale_host_buffer(halves, 2, hvd::DataType::Float16, 0.25);
  REQUIRE(half_to_float(halves[0]) == 0.75f);
  REQUIRE(half_to_float(halves[1]) == -0.25f);
  double d = 3;
  scale_host_buffer(&d, 1, hvd::DataType::Float64, 1.0 / 3);
  REQUIRE(d == Approx(1.0));
}
