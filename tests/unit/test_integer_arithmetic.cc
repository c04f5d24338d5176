// Integer Average and integer scaling on the host, without MPI: the ranks' sums are formed here
// from widen_for_average's words, as MPI_SUM on int64 forms them, and compared with the exact
// quotient computed in 128 bits (Note [Integer averages are exact]).
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/host_scale.h"
#include "core/integer_average.h"

using namespace hvd::detail;
using hvd::DataType;

namespace {

// The average over ranks[r][i] as the runtime computes it: widen each rank, sum the words, finish.
template <class T>
std::vector<T> average(const std::vector<std::vector<T>>& ranks, DataType dtype) {
  const std::int64_t n = static_cast<std::int64_t>(ranks.front().size());
  const int words = average_words(dtype);
  std::vector<std::int64_t> sum(n * words, 0), mine(n * words);
  for (const auto& values : ranks) {
    widen_for_average(values.data(), n, dtype, mine.data());
    for (std::int64_t w = 0; w < n * words; ++w) sum[w] += mine[w];
  }
  std::vector<T> out(n);
  finish_average(sum.data(), n, dtype, static_cast<int>(ranks.size()), out.data());
  return out;
}

template <class T>
T exact_average(const std::vector<std::vector<T>>& ranks, std::size_t i) {
  __int128 sum = 0;
  for (const auto& values : ranks) sum += values[i];
  return static_cast<T>(sum / static_cast<__int128>(ranks.size()));  // truncates toward zero
}

template <class T>
void check_limits(DataType dtype) {
  using L = std::numeric_limits<T>;
  std::mt19937_64 rng(7);
  for (int size : {2, 3, 4, 7, 64}) {
    std::vector<std::vector<T>> ranks(size);
    for (int r = 0; r < size; ++r) {
      // Near the top (the sum overflows T and, for int64, int64), near the bottom, mixed signs,
      // small values whose sum is negative and not a multiple of the size, and random ones.
      ranks[r] = {static_cast<T>(L::max() - r), L::max(), static_cast<T>(L::min() + r), L::min(),
                  r % 2 ? L::max() : L::min(), static_cast<T>(r - 2), static_cast<T>(-1 - r * (L::min() < 0)),
                  static_cast<T>(rng())};
    }
    const auto got = average(ranks, dtype);
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("size " << size << ", element " << i);
      CHECK(static_cast<long double>(got[i]) == static_cast<long double>(exact_average(ranks, i)));
    }
    CHECK(got[1] == L::max());  // the average of equal values is that value
    CHECK(got[3] == L::min());
  }
}

}  // namespace

TEST_CASE("integer Average is the exact quotient, truncated, at the limits of every dtype", "[integer]") {
  check_limits<std::uint8_t>(DataType::UInt8);
  check_limits<std::int8_t>(DataType::Int8);
  check_limits<std::int16_t>(DataType::Int16);
  check_limits<std::int32_t>(DataType::Int32);
  check_limits<std::int64_t>(DataType::Int64);
}

TEST_CASE("integer Average keeps every bit of int64 and truncates toward zero", "[integer]") {
  const std::int64_t big = (std::int64_t{1} << 60) + 1;  // through double this came back as 2^60
  CHECK(average<std::int64_t>({{big}, {big}}, DataType::Int64)[0] == big);
  CHECK(average<std::int64_t>({{big}, {big + 1}}, DataType::Int64)[0] == big);
  // [1, 2, 3, 7] + rank at np=2: the halves truncate (rounding gave [2, 3, 4, 8]).
  CHECK(average<std::int32_t>({{1, 2, 3, 7}, {2, 3, 4, 8}}, DataType::Int32) == std::vector<std::int32_t>{1, 2, 3, 7});
  CHECK(average<std::int32_t>({{-1, -7}, {-2, 0}}, DataType::Int32) == std::vector<std::int32_t>{-1, -3});
  CHECK(average<std::int8_t>({{100}, {100}, {-128}}, DataType::Int8)[0] == 24);  // 72 / 3; the int8 sum would wrap
  CHECK(average<std::uint8_t>({{255}, {254}}, DataType::UInt8)[0] == 254);
}

TEST_CASE("integer scaling truncates toward zero, clamps, and multiplies whole factors exactly", "[integer]") {
  std::int64_t big[2] = {(std::int64_t{1} << 61) + 3, -((std::int64_t{1} << 61) + 3)};
  scale_host_buffer(big, 2, DataType::Int64, 2.0);
  CHECK(big[0] == (std::int64_t{1} << 62) + 6);  // exact: not through double
  CHECK(big[1] == -((std::int64_t{1} << 62) + 6));
  scale_host_buffer(big, 2, DataType::Int64, 4.0);  // 2^64 + 24 does not fit: clamped
  CHECK(big[0] == std::numeric_limits<std::int64_t>::max());
  CHECK(big[1] == std::numeric_limits<std::int64_t>::min());
  std::int8_t small[4] = {100, -100, 7, -7};
  scale_host_buffer(small, 4, DataType::Int8, 1.5);
  CHECK(small[0] == 127);   // 150 clamps
  CHECK(small[1] == -128);  // -150 clamps
  CHECK(small[2] == 10);    // 10.5 truncates
  CHECK(small[3] == -10);
  std::uint8_t bytes[2] = {3, 200};
  scale_host_buffer(bytes, 2, DataType::UInt8, -1.0);
  CHECK(bytes[0] == 0);  // negative results clamp to 0
  CHECK(bytes[1] == 0);
  std::int32_t nan_scaled[1] = {5};
  scale_host_buffer(nan_scaled, 1, DataType::Int32, std::numeric_limits<double>::quiet_NaN());
  CHECK(nan_scaled[0] == 0);
  std::int64_t huge[2] = {std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min()};
  scale_host_buffer(huge, 2, DataType::Int64, 1e30);  // not a whole factor below 2^62: through double
  CHECK(huge[0] == std::numeric_limits<std::int64_t>::max());
  CHECK(huge[1] == std::numeric_limits<std::int64_t>::min());
}
