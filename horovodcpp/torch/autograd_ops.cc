// Autograd Functions for allreduce and allgather. The forward runs the plain collective; the
// backward runs the collective that is its adjoint:
//  - y = post * reduce_r(pre * x_r) (divided by size for Average) on every rank, and every
//    rank's loss depends on y, so dL/dx_r = post * pre * reduce_r(dL_r/dy): the same allreduce;
//  - y = concat_r(x_r), so dL/dx_r = rows_r of sum_r'(dL_r'/dy): an allreduce Sum, then a slice.
#include "autograd_ops.h"

#include <torch/csrc/autograd/custom_function.h>

#include "tensor_adapter.h"

namespace hvd::torch::detail {
namespace {

using ::torch::autograd::AutogradContext;
using ::torch::autograd::variable_list;

std::string gradient_name(const std::string& name) { return name.empty() ? name : name + ".grad"; }

// The forward's process set, kept for the backward (saved_data holds IValues only).
struct SavedProcessSet : ::torch::CustomClassHolder {
  explicit SavedProcessSet(ProcessSet s) : set(std::move(s)) {}
  ProcessSet set;
};

c10::IValue save_set(const ProcessSet& set) { return c10::IValue::make_capsule(c10::make_intrusive<SavedProcessSet>(set)); }

ProcessSet saved_set(AutogradContext* ctx) {
  return c10::static_intrusive_pointer_cast<SavedProcessSet>(ctx->saved_data["process_set"].toCapsule())->set;
}

struct AllreduceFunction : public ::torch::autograd::Function<AllreduceFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& tensor, AllreduceOptions options) {
    ctx->saved_data["op"] = static_cast<std::int64_t>(options.op);
    ctx->saved_data["name"] = gradient_name(options.name);
    ctx->saved_data["prescale"] = options.prescale_factor;
    ctx->saved_data["postscale"] = options.postscale_factor;
    ctx->saved_data["shape"] = tensor.sizes().vec();
    ctx->saved_data["process_set"] = save_set(options.process_set);
    return allreduce_async(tensor.detach(), options).wait();
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    AllreduceOptions options;
    options.op = static_cast<ReduceOp>(ctx->saved_data["op"].toInt());
    options.name = ctx->saved_data["name"].toStringRef();
    options.prescale_factor = ctx->saved_data["prescale"].toDouble();
    options.postscale_factor = ctx->saved_data["postscale"].toDouble();
    options.process_set = saved_set(ctx);
    // Every rank takes part in the backward collective, even one whose loss ignored the result.
    at::Tensor grad = grads[0].defined() ? grads[0].contiguous()
                                         : at::zeros(ctx->saved_data["shape"].toIntVector(), grads[0].options());
    return {allreduce_async(grad, options).wait(), at::Tensor()};
  }
};

struct AllgatherFunction : public ::torch::autograd::Function<AllgatherFunction> {
  // uniform: every rank contributes the same number of rows, so the backward needs no sizes.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& tensor, AllgatherOptions options, bool uniform) {
    at::Tensor gathered = allgather_async(tensor.detach(), options).wait();  // refuses scalars
    ctx->saved_data["name"] = gradient_name(options.name);
    ctx->saved_data["rows"] = tensor.size(0);
    ctx->saved_data["uniform"] = uniform;
    ctx->saved_data["process_set"] = save_set(options.process_set);
    return gathered;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const std::string name = ctx->saved_data["name"].toStringRef();
    const std::int64_t rows = ctx->saved_data["rows"].toInt();
    AllreduceOptions sum;
    sum.op = ReduceOp::Sum;
    sum.name = name;
    sum.process_set = saved_set(ctx);
    at::Tensor total = allreduce_async(grads[0].contiguous(), sum).wait();
    const int rank_in_set = sum.process_set.rank();
    std::int64_t offset = rank_in_set * rows;
    if (!ctx->saved_data["uniform"].toBool()) {
      AllgatherOptions sizes_options;
      sizes_options.name = name.empty() ? name : name + ".rows";
      sizes_options.process_set = sum.process_set;
      const at::Tensor sizes = allgather(at::full({1}, rows, at::kLong), sizes_options);
      offset = sizes.slice(0, 0, rank_in_set).sum().item<std::int64_t>();
    }
    return {total.narrow(0, offset, rows), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor differentiable_allreduce(const at::Tensor& tensor, const AllreduceOptions& options) {
  if (options.op != ReduceOp::Sum && options.op != ReduceOp::Average)
    throw Error("allreduce of " + describe(options.name) + ": op " + reduce_op_name(options.op) +
                " has no gradient, but the input requires grad (use Sum or Average, or pass tensor.detach())");
  return AllreduceFunction::apply(tensor, options);
}

at::Tensor differentiable_allgather(const at::Tensor& tensor, const AllgatherOptions& options) {
  return AllgatherFunction::apply(tensor, options, false);
}

at::Tensor differentiable_allgather_uniform(const at::Tensor& tensor, const AllgatherOptions& options) {
  return AllgatherFunction::apply(tensor, options, true);
}

}  // namespace hvd::torch::detail
