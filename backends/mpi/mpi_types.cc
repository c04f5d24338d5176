#include "backends/mpi/mpi_types.h"

#include <cstdint>
#include <string>

#include "core/half.h"

namespace hvd::detail {
namespace {

enum Slot { kSum = 0, kMin = 1, kMax = 2, kProduct = 3 };

template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float), Slot S>
void reduce_16(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = ToFloat(a[i]);
    const float y = ToFloat(b[i]);
    float r;
    if constexpr (S == kSum) r = x + y;
    if constexpr (S == kMin) r = x < y ? x : y;
    if constexpr (S == kMax) r = x > y ? x : y;
    if constexpr (S == kProduct) r = x * y;
    b[i] = FromFloat(r);
  }
}

template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float)>
void create_ops(std::array<MPI_Op, 4>& ops) {
  MPI_Op_create(&reduce_16<ToFloat, FromFloat, kSum>, 1, &ops[kSum]);
  MPI_Op_create(&reduce_16<ToFloat, FromFloat, kMin>, 1, &ops[kMin]);
  MPI_Op_create(&reduce_16<ToFloat, FromFloat, kMax>, 1, &ops[kMax]);
  MPI_Op_create(&reduce_16<ToFloat, FromFloat, kProduct>, 1, &ops[kProduct]);
}

// Note [8- and 16-bit sums wrap]
// Open MPI 4.1's AVX reduction component (op/avx, on by default on x86) adds 8- and 16-bit
// integers with saturating instructions: MPI_SUM of uint8 255 and 1 gives 255, of int8 127 and 1
// gives 127, of int16 32767 and 1 gives 32767 (once a buffer is long enough for the vector
// loop), where C's (and every other reduction's) arithmetic wraps (open-mpi/ompi#8045, closed
// as won't fix). horovodcpp's integer Sum and Product wrap modulo 2^bits on every dtype (README,
// "Core API"), so the 8- and 16-bit ones run as these user-defined ops: unsigned arithmetic,
// truncated to the type, which the compiler vectorizes. int32 and int64 keep MPI's own.
template <class U, Slot S>
void reduce_narrow(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const U*>(in);
  auto* b = static_cast<U*>(inout);
  for (int i = 0; i < *len; ++i) {
    if constexpr (S == kSum) b[i] = static_cast<U>(a[i] + b[i]);
    // The low bits of a product do not depend on signedness.
    if constexpr (S == kProduct) b[i] = static_cast<U>(unsigned{a[i]} * unsigned{b[i]});
  }
}

int slot_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::Average:
    case ReduceOp::Sum: return kSum;
    case ReduceOp::Min: return kMin;
    case ReduceOp::Max: return kMax;
    case ReduceOp::Product: return kProduct;
    case ReduceOp::Adasum: break;  // never an MPI_Op: mpi_adasum.cc
  }
  return kSum;
}

}  // namespace

void MpiTypes::create() {
  if (created_) return;
  MPI_Type_contiguous(2, MPI_BYTE, &float16_);
  MPI_Type_commit(&float16_);
  MPI_Type_contiguous(2, MPI_BYTE, &bfloat16_);
  MPI_Type_commit(&bfloat16_);
  create_ops<half_to_float, float_to_half>(float16_ops_);
  create_ops<bfloat16_to_float, float_to_bfloat16>(bfloat16_ops_);
  // int8 and uint8 share their bits' arithmetic; the ops stay per dtype for the MPI_Op's datatype.
  MPI_Op_create(&reduce_narrow<std::uint8_t, kSum>, 1, &int8_ops_[0]);
  MPI_Op_create(&reduce_narrow<std::uint8_t, kProduct>, 1, &int8_ops_[1]);
  MPI_Op_create(&reduce_narrow<std::uint8_t, kSum>, 1, &uint8_ops_[0]);
  MPI_Op_create(&reduce_narrow<std::uint8_t, kProduct>, 1, &uint8_ops_[1]);
  MPI_Op_create(&reduce_narrow<std::uint16_t, kSum>, 1, &int16_ops_[0]);
  MPI_Op_create(&reduce_narrow<std::uint16_t, kProduct>, 1, &int16_ops_[1]);
  created_ = true;
}

void MpiTypes::destroy() {
  if (!created_) return;
  for (auto& op : float16_ops_) MPI_Op_free(&op);
  for (auto& op : bfloat16_ops_) MPI_Op_free(&op);
  for (auto& op : int8_ops_) MPI_Op_free(&op);
  for (auto& op : uint8_ops_) MPI_Op_free(&op);
  for (auto& op : int16_ops_) MPI_Op_free(&op);
  MPI_Type_free(&float16_);
  MPI_Type_free(&bfloat16_);
  created_ = false;
}

MPI_Datatype MpiTypes::datatype(DataType dtype) const {
  switch (dtype) {
    case DataType::UInt8: return MPI_UINT8_T;
    case DataType::Int8: return MPI_INT8_T;
    case DataType::Int16: return MPI_INT16_T;
    case DataType::Int32: return MPI_INT32_T;
    case DataType::Int64: return MPI_INT64_T;
    case DataType::Float16: return float16_;
    case DataType::BFloat16: return bfloat16_;
    case DataType::Float32: return MPI_FLOAT;
    case DataType::Float64: return MPI_DOUBLE;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op MpiTypes::reduce_op(DataType dtype, ReduceOp op) const {
  if (dtype == DataType::Float16) return float16_ops_[slot_of(op)];
  if (dtype == DataType::BFloat16) return bfloat16_ops_[slot_of(op)];
  if (dtype == DataType::Int8 || dtype == DataType::UInt8 || dtype == DataType::Int16) {
    // See Note [8- and 16-bit sums wrap].
    const auto& ops = dtype == DataType::Int8 ? int8_ops_ : dtype == DataType::UInt8 ? uint8_ops_ : int16_ops_;
    if (op == ReduceOp::Sum || op == ReduceOp::Average) return ops[0];
    if (op == ReduceOp::Product) return ops[1];
  }
  switch (op) {
    case ReduceOp::Average:
    case ReduceOp::Sum: return MPI_SUM;
    case ReduceOp::Min: return MPI_MIN;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Product: return MPI_PROD;
    case ReduceOp::Adasum: break;  // never an MPI_Op: mpi_adasum.cc
  }
  return MPI_SUM;
}

std::string mpi_error_message(const char* call, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(call) + " failed: " + std::string(text, length);
}

}  // namespace hvd::detail
