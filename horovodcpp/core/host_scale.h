// Multiplies a host buffer by a factor in place, for pre/postscale and Average. Integers are
// scaled through double and rounded to nearest; float16/bfloat16 through float.
#pragma once

#include <cstdint>

#include "horovodcpp/horovod.h"

namespace hvd::detail {

void scale_host_buffer(void* data, std::int64_t count, DataType dtype, double factor);

}  // namespace hvd::detail
