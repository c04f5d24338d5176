#include "core/tensor_table_entry.h"

#include <stdexcept>

namespace hvd::detail {

void allocate_output(TensorTableEntry& entry, const TensorShape& shape) {
  const DataType dtype = entry.input->dtype();
  entry.output = entry.allocate_output ? entry.allocate_output(dtype, shape) : HostTensor::allocate(dtype, shape);
  if (!entry.output)
    throw std::runtime_error("the output allocator returned no tensor for '" + entry.name + "'");
  if (entry.output->dtype() != dtype || entry.output->shape() != shape)
    throw std::runtime_error("the output allocator for '" + entry.name + "' returned " +
                             dtype_name(entry.output->dtype()) + shape_string(entry.output->shape()) +
                             ", expected " + dtype_name(dtype) + shape_string(shape));
}

}  // namespace hvd::detail
