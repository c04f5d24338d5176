#include "core/submission.h"

#include "core/collective_traits.h"

namespace hvd::detail {
namespace {

void check_input(const std::string& op, const std::string& name, const TensorPtr& t) {
  if (!t) throw InvalidArgument(op + " of '" + name + "': the input tensor is null");
  for (auto d : t->shape())
    if (d < 0) throw InvalidArgument(op + " of '" + name + "': negative dimension in shape " + shape_string(t->shape()));
  if (t->data() == nullptr && t->num_elements() > 0) throw InvalidArgument(op + " of '" + name + "': the input has no data");
}

void check_output(const std::string& op, const std::string& name, const TensorPtr& in, const TensorPtr& out) {
  if (!out) throw InvalidArgument(op + " of '" + name + "': the output tensor is null");
  if (out->dtype() != in->dtype() || out->num_elements() != in->num_elements())
    throw InvalidArgument(op + " of '" + name + "': output " + dtype_name(out->dtype()) + shape_string(out->shape()) +
                " does not match input " + dtype_name(in->dtype()) + shape_string(in->shape()));
  if (out->device() != in->device())
    throw InvalidArgument(op + " of '" + name + "': output is on device " + std::to_string(out->device()) +
                " but input is on device " + std::to_string(in->device()));
}

// Adasum combines floating-point vectors through their dot products, and only as an allreduce
// (Horovod's rule too); the power-of-two number of ranks is checked where it runs.
void check_adasum(RequestType type, const std::string& op, const std::string& name, const TensorPtr& t) {
  if (type != RequestType::Allreduce)
    throw InvalidArgument(op + " of '" + name + "': Adasum is an allreduce only; use Sum or Average here");
  const DataType d = t->dtype();
  if (d != DataType::Float16 && d != DataType::BFloat16 && d != DataType::Float32 && d != DataType::Float64)
    throw InvalidArgument(op + " of '" + name + "': Adasum reduces float16, bfloat16, float32 and float64 tensors, not " +
                          dtype_name(d));
}

}  // namespace

TensorTableEntry checked_entry(RequestType type, const std::string& op, const std::string& name, Submitted s) {
  const CollectiveTraits& traits = traits_of(type);
  if (traits.has_tensor) {
    check_input(op, name, s.input);
    if (!traits.allocates_output) check_output(op, name, s.input, s.output);
    if (traits.needs_first_dim && s.input->shape().empty())
      throw InvalidArgument(op + " of '" + name + "': the input is a scalar; " + traits.name + " needs a first dimension");
  }
  TensorTableEntry e;
  e.name = name;
  e.type = type;
  e.device = s.input ? s.input->device() : kCpuDevice;
  e.input = std::move(s.input);
  e.output = std::move(s.output);
  e.ready = std::move(s.ready);
  if (traits.allocates_output) e.allocate_output = std::move(s.allocate_output);
  if (traits.reduces) {
    if (s.reduction.op == ReduceOp::Adasum) check_adasum(type, op, name, e.input);
    e.reduce_op = s.reduction.op;
    e.prescale_factor = s.reduction.prescale_factor;
    e.postscale_factor = s.reduction.postscale_factor;
  }
  return e;
}

Request request_for(const TensorTableEntry& e) {
  const CollectiveTraits& traits = traits_of(e.type);
  Request r;
  r.type = e.type;
  r.name = e.name;
  if (e.input) {
    r.dtype = e.input->dtype();
    r.shape = e.input->shape();
  }
  r.device = e.device;
  if (traits.reduces) {
    r.reduce_op = e.reduce_op;
    r.prescale_factor = e.prescale_factor;
    r.postscale_factor = e.postscale_factor;
  }
  if (traits.needs_root) r.root = e.root;
  return r;
}

}  // namespace hvd::detail
