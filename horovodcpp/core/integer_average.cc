#include "core/integer_average.h"

#include "core/integer_elements.h"

namespace hvd::detail {
namespace {

template <class T>
void widen_all(const T* from, std::int64_t count, std::int64_t* wide) {
  for (std::int64_t i = 0; i < count; ++i) integer::widen(from[i], wide + i * integer::Words<T>::value);
}

template <class T>
void finish_all(const std::int64_t* wide, std::int64_t count, int divisor, T* to) {
  for (std::int64_t i = 0; i < count; ++i) to[i] = integer::finish<T>(wide + i * integer::Words<T>::value, divisor);
}

}  // namespace

bool is_integer(DataType dtype) {
  switch (dtype) {
    case DataType::UInt8:
    case DataType::Int8:
    case DataType::Int16:
    case DataType::Int32:
    case DataType::Int64: return true;
    default: return false;
  }
}

int average_words(DataType dtype) { return dtype == DataType::Int64 ? 2 : 1; }

void widen_for_average(const void* from, std::int64_t count, DataType dtype, std::int64_t* wide) {
  switch (dtype) {
    case DataType::UInt8: return widen_all(static_cast<const std::uint8_t*>(from), count, wide);
    case DataType::Int8: return widen_all(static_cast<const std::int8_t*>(from), count, wide);
    case DataType::Int16: return widen_all(static_cast<const std::int16_t*>(from), count, wide);
    case DataType::Int32: return widen_all(static_cast<const std::int32_t*>(from), count, wide);
    case DataType::Int64: return widen_all(static_cast<const std::int64_t*>(from), count, wide);
    default: throw Error(std::string("internal: integer average of ") + dtype_name(dtype));
  }
}

void finish_average(const std::int64_t* wide, std::int64_t count, DataType dtype, int divisor, void* to) {
  if (divisor < 1) throw Error("internal: integer average over " + std::to_string(divisor) + " ranks");
  switch (dtype) {
    case DataType::UInt8: return finish_all(wide, count, divisor, static_cast<std::uint8_t*>(to));
    case DataType::Int8: return finish_all(wide, count, divisor, static_cast<std::int8_t*>(to));
    case DataType::Int16: return finish_all(wide, count, divisor, static_cast<std::int16_t*>(to));
    case DataType::Int32: return finish_all(wide, count, divisor, static_cast<std::int32_t*>(to));
    case DataType::Int64: return finish_all(wide, count, divisor, static_cast<std::int64_t*>(to));
    default: throw Error(std::string("internal: integer average of ") + dtype_name(dtype));
  }
}

}  // namespace hvd::detail
