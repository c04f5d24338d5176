// float16 / bfloat16 conversions used by host reductions.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

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
  REQUIRE(ints[1] == -3);  // -3.5 truncates toward zero, as Horovod's integer scaling does
  std::int64_t six = 6;
  scale_host_buffer(&six, 1, hvd::DataType::Int64, 1.0 / 3);
  REQUIRE(six == 2);  // 6 * (1/3) rounds to exactly 2.0 in double
  std::int16_t shorts[4] = {37, -37, 32000, -32000};
  scale_host_buffer(shorts, 2, hvd::DataType::Int16, 0.19);  // 7.03 and -7.03 truncate
  REQUIRE(shorts[0] == 7);
  REQUIRE(shorts[1] == -7);
  scale_host_buffer(shorts + 2, 2, hvd::DataType::Int16, 2.0);  // clamped to int16's range
  REQUIRE(shorts[2] == 32767);
  REQUIRE(shorts[3] == -32768);
  std::uint16_t halves[2] = {float_to_half(3.0f), float_to_half(-1.0f)};
  scale_host_buffer(halves, 2, hvd::DataType::Float16, 0.25);
  REQUIRE(half_to_float(halves[0]) == 0.75f);
  REQUIRE(half_to_float(halves[1]) == -0.25f);
  double d = 3;
  scale_host_buffer(&d, 1, hvd::DataType::Float64, 1.0 / 3);
  REQUIRE(d == Approx(1.0));
}

// copy_scaled is the fusion buffer's copy in (with the prescale) and out (with the postscale and
// Average's 1/size) in one pass: it must give what a copy and then scale_host_buffer gave.
TEST_CASE("copy_scaled writes the scaled source and leaves the source alone", "[half]") {
  const std::int32_t ints[4] = {10, -7, 3, 0};
  std::int32_t int_out[4] = {99, 99, 99, 99};
  copy_scaled(int_out, ints, 4, hvd::DataType::Int32, 0.5);
  CHECK(int_out[0] == 5);
  CHECK(int_out[1] == -3);  // truncated as scale_host_buffer truncates
  CHECK(int_out[2] == 1);
  CHECK(int_out[3] == 0);
  CHECK(ints[1] == -7);
  const std::uint8_t bytes[3] = {200, 3, 1};
  std::uint8_t byte_out[3] = {};
  copy_scaled(byte_out, bytes, 3, hvd::DataType::UInt8, 0.25);
  CHECK(byte_out[0] == 50);
  CHECK(byte_out[1] == 0);  // 0.75 truncates
  CHECK(byte_out[2] == 0);
  const std::uint16_t halves[2] = {float_to_half(3.0f), float_to_half(-1.0f)};
  std::uint16_t half_out[2] = {};
  copy_scaled(half_out, halves, 2, hvd::DataType::Float16, 4.0);
  CHECK(half_to_float(half_out[0]) == 12.0f);
  CHECK(half_to_float(half_out[1]) == -4.0f);
  const float floats[5] = {1.5f, -2.0f, 0.0f, 1e-40f, 3.0f};
  float float_out[5] = {};
  copy_scaled(float_out, floats, 5, hvd::DataType::Float32, 0.5);
  for (int i = 0; i < 5; ++i) CHECK(float_out[i] == floats[i] * 0.5f);
  const double doubles[2] = {3.0, -6.0};
  double double_out[2] = {};
  copy_scaled(double_out, doubles, 2, hvd::DataType::Float64, 1.0 / 3);
  CHECK(double_out[0] == Approx(1.0));
  CHECK(double_out[1] == Approx(-2.0));
}

TEST_CASE("copy_scaled with factor 1 is a plain copy, and in place it equals scale_host_buffer", "[half]") {
  const std::int64_t big[3] = {(std::int64_t{1} << 62) + 1, -5, 7};
  std::int64_t copied[3] = {};
  copy_scaled(copied, big, 3, hvd::DataType::Int64, 1.0);
  for (int i = 0; i < 3; ++i) CHECK(copied[i] == big[i]);  // exact: not through double
  std::int32_t a[4] = {9, -9, 1, 4}, b[4] = {9, -9, 1, 4};
  copy_scaled(a, a, 4, hvd::DataType::Int32, 1.0 / 3);
  scale_host_buffer(b, 4, hvd::DataType::Int32, 1.0 / 3);
  for (int i = 0; i < 4; ++i) CHECK(a[i] == b[i]);
  CHECK(a[0] == 3);
  copy_scaled(nullptr, nullptr, 0, hvd::DataType::Float32, 2.0);  // an empty tensor's null data
}

// The float loops run vectorized: every length must come out whole, the tail past the vector
// width included, and nothing past `count` may be written.
TEST_CASE("float scaling covers every element of any length, in place and copied", "[half]") {
  for (std::int64_t count : {1, 3, 4, 7, 8, 9, 15, 16, 17, 31, 33, 1027}) {
    INFO("count " << count);
    std::vector<float> from(count + 1), to(count + 1, -1.0f), in_place(count + 1);
    std::vector<double> wide(count + 1);
    for (std::int64_t i = 0; i <= count; ++i) {
      from[i] = in_place[i] = static_cast<float>(i) - 3.0f;
      wide[i] = static_cast<double>(i) + 0.5;
    }
    copy_scaled(to.data(), from.data(), count, hvd::DataType::Float32, 0.5);
    scale_host_buffer(in_place.data(), count, hvd::DataType::Float32, 0.5);
    scale_host_buffer(wide.data(), count, hvd::DataType::Float64, 4.0);
    for (std::int64_t i = 0; i < count; ++i) {
      REQUIRE(to[i] == (static_cast<float>(i) - 3.0f) * 0.5f);
      REQUIRE(in_place[i] == to[i]);
      REQUIRE(wide[i] == (static_cast<double>(i) + 0.5) * 4.0);
    }
    CHECK(to[count] == -1.0f);  // untouched
    CHECK(in_place[count] == static_cast<float>(count) - 3.0f);
    CHECK(wide[count] == static_cast<double>(count) + 0.5);
  }
}
