// MPI datatypes and reduction ops for our dtypes. float16 and bfloat16 have no MPI type: they
// travel as 2-byte contiguous types with user-defined MPI_Ops per ReduceOp that compute through
// float. int8, uint8 and int16 Sum and Product use user-defined MPI_Ops too: see Note [8- and
// 16-bit sums wrap]. Owned by the MpiWorld (created after MPI_Init, freed before MPI_Finalize);
// background thread only.
#pragma once

#include <mpi.h>

#include <array>

#include "horovodcpp/horovod.h"

namespace hvd::detail {

class MpiTypes {
 public:
  void create();
  void destroy();
  MPI_Datatype datatype(DataType dtype) const;
  // The MPI_Op that computes `op` on `dtype`. Average reduces as Sum; scaling is separate.
  MPI_Op reduce_op(DataType dtype, ReduceOp op) const;

 private:
  bool created_ = false;
  MPI_Datatype float16_ = MPI_DATATYPE_NULL;
  MPI_Datatype bfloat16_ = MPI_DATATYPE_NULL;
  std::array<MPI_Op, 4> float16_ops_{};   // Sum, Min, Max, Product
  std::array<MPI_Op, 4> bfloat16_ops_{};
  std::array<MPI_Op, 2> int8_ops_{};  // Sum, Product
  std::array<MPI_Op, 2> uint8_ops_{};
  std::array<MPI_Op, 2> int16_ops_{};
};

// "MPI_Allreduce failed: <MPI's error string>"
std::string mpi_error_message(const char* call, int code);

}  // namespace hvd::detail
