// Multiplies host data by a factor, for pre/postscale and floating Average. Integers are
// truncated toward zero and clamped to their dtype (a whole-number factor multiplies exactly in
// integer arithmetic, another goes through double); float16/bfloat16 scale through float.
// Integer Average never comes here: see core/integer_average.h.
#pragma once

#include <cstdint>

#include "horovodcpp/horovod.h"

namespace hvd::detail {

// In place.
void scale_host_buffer(void* data, std::int64_t count, DataType dtype, double factor);

// Writes `count` elements of `from`, each times `factor`, to `to` (a plain copy when the factor is
// 1). One pass instead of a copy and a scale: on a fused buffer that MPI has just written, the
// pass pulls every line from wherever the transfer left it, and a second pass would do so again.
// `to` and `from` may be the same buffer, but must not otherwise overlap.
void copy_scaled(void* to, const void* from, std::int64_t count, DataType dtype, double factor);

}  // namespace hvd::detail
