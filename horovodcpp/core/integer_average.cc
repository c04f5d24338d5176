#include "core/integer_average.h"

namespace hvd::detail {
namespace {

template <class T>
void widen_narrow(const T* from, std::int64_t count, std::int64_t* wide) {
  for (std::int64_t i = 0; i < count; ++i) wide[i] = from[i];
}

template <class T>
void finish_narrow(const std::int64_t* sum, std::int64_t count, int divisor, T* to) {
  // |sum| < 2^31 * 2^31: no overflow in int64, and the quotient lies within T's range.
  for (std::int64_t i = 0; i < count; ++i) to[i] = static_cast<T>(sum[i] / divisor);
}

// x = hi * 2^32 + lo with hi = x >> 32 (signed) and lo the low 32 bits (unsigned): the sums of
// each over fewer than 2^31 ranks fit int64.
void widen_int64(const std::int64_t* from, std::int64_t count, std::int64_t* wide) {
  for (std::int64_t i = 0; i < count; ++i) {
    const auto bits = static_cast<std::uint64_t>(from[i]);
    wide[2 * i] = from[i] >> 32;  // arithmetic shift (C++20 defines it; every compiler we use does)
    wide[2 * i + 1] = static_cast<std::int64_t>(bits & 0xffffffffULL);
  }
}

void finish_int64(const std::int64_t* wide, std::int64_t count, int divisor, std::int64_t* to) {
  for (std::int64_t i = 0; i < count; ++i) {
    const __int128 sum = static_cast<__int128>(wide[2 * i]) * (static_cast<__int128>(1) << 32) + wide[2 * i + 1];
    to[i] = static_cast<std::int64_t>(sum / divisor);
  }
}

}  // namespace

bool is_integer(DataType dtype) {
  switch (dtype) {
    case DataType::UInt8:
    case DataType::Int8:
    case DataType::Int32:
    case DataType::Int64: return true;
    default: return false;
  }
}

int average_words(DataType dtype) { return dtype == DataType::Int64 ? 2 : 1; }

void widen_for_average(const void* from, std::int64_t count, DataType dtype, std::int64_t* wide) {
  switch (dtype) {
    case DataType::UInt8: return widen_narrow(static_cast<const std::uint8_t*>(from), count, wide);
    case DataType::Int8: return widen_narrow(static_cast<const std::int8_t*>(from), count, wide);
    case DataType::Int32: return widen_narrow(static_cast<const std::int32_t*>(from), count, wide);
    case DataType::Int64: return widen_int64(static_cast<const std::int64_t*>(from), count, wide);
    default: throw Error(std::string("internal: integer average of ") + dtype_name(dtype));
  }
}

void finish_average(const std::int64_t* wide, std::int64_t count, DataType dtype, int divisor, void* to) {
  if (divisor < 1) throw Error("internal: integer average over " + std::to_string(divisor) + " ranks");
  switch (dtype) {
    case DataType::UInt8: return finish_narrow(wide, count, divisor, static_cast<std::uint8_t*>(to));
    case DataType::Int8: return finish_narrow(wide, count, divisor, static_cast<std::int8_t*>(to));
    case DataType::Int32: return finish_narrow(wide, count, divisor, static_cast<std::int32_t*>(to));
    case DataType::Int64: return finish_int64(wide, count, divisor, static_cast<std::int64_t*>(to));
    default: throw Error(std::string("internal: integer average of ") + dtype_name(dtype));
  }
}

}  // namespace hvd::detail
