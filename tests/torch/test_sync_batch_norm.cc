// SyncBatchNorm against LibTorch's BatchNorm on the union of the ranks' batches, and the
// gradients of the differentiable allreduce and allgather against closed forms.
#include "torch_test_util.h"

namespace ht = hvd::torch;
using hvd_test::error_of;

namespace {

// Rows of this rank in a union where rank r holds r + 1 rows.
std::int64_t first_row(int rank) { return static_cast<std::int64_t>(rank) * (rank + 1) / 2; }

}  // namespace

TEST_CASE("SyncBatchNorm2d equals BatchNorm2d on the union batch, with a different batch size per rank",
          "[sync_batch_norm]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  const auto dtype = torch::TensorOptions().dtype(torch::kDouble);
  const std::int64_t union_rows = first_row(size);
  torch::manual_seed(17);
  const auto x_union = torch::randn({union_rows, 3, 4, 5}, dtype) * 2 + 0.5;
  const auto weight_union = torch::randn({union_rows, 3, 4, 5}, dtype);  // the loss's weights

  torch::nn::BatchNorm2d reference(torch::nn::BatchNorm2dOptions(3).momentum(0.3));
  ht::SyncBatchNorm sync(torch::nn::BatchNormOptions(3).momentum(0.3));
  reference->to(torch::kDouble);
  sync->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    reference->weight.copy_(torch::tensor({1.5, 0.5, 2.0}));
    reference->bias.copy_(torch::tensor({0.1, -0.2, 0.3}));
    sync->weight.copy_(reference->weight);
    sync->bias.copy_(reference->bias);
  }
  for (int step = 0; step < 2; ++step) {  // the second step sees updated running statistics
    INFO("step " << step);
    auto xr = x_union.clone().requires_grad_(true);
    auto yr = reference->forward(xr);
    (yr * weight_union).sum().backward();

    auto mine = x_union.narrow(0, first_row(rank), rank + 1).clone().requires_grad_(true);
    auto y = sync->forward(mine);
    (y * weight_union.narrow(0, first_row(rank), rank + 1)).sum().backward();

    CHECK(y.allclose(yr.narrow(0, first_row(rank), rank + 1), 1e-10, 1e-10));
    CHECK(mine.grad().allclose(xr.grad().narrow(0, first_row(rank), rank + 1), 1e-10, 1e-10));
    // Each rank holds its own share of the parameters' gradients; their sum is the union's.
    CHECK(ht::allreduce(sync->weight.grad(), {hvd::ReduceOp::Sum, "sbn.wgrad"}).allclose(reference->weight.grad(), 1e-10, 1e-10));
    CHECK(ht::allreduce(sync->bias.grad(), {hvd::ReduceOp::Sum, "sbn.bgrad"}).allclose(reference->bias.grad(), 1e-10, 1e-10));
    CHECK(sync->running_mean.allclose(reference->running_mean, 1e-12, 1e-12));
    CHECK(sync->running_var.allclose(reference->running_var, 1e-12, 1e-12));
    CHECK(sync->num_batches_tracked.item<std::int64_t>() == step + 1);
    sync->zero_grad();
    reference->zero_grad();
  }
  // Evaluation uses the running statistics, the same on every rank.
  sync->eval();
  reference->eval();
  torch::NoGradGuard no_grad;
  const auto probe = torch::randn({2, 3, 4, 5}, dtype);
  CHECK(sync->forward(probe).allclose(reference->forward(probe), 1e-10, 1e-10));
  CHECK_THAT(error_of([&] { sync->forward(torch::randn({2, 4, 5}, dtype)); }),
             Catch::Contains("SyncBatchNorm(3): expected an input of 2 to 5 dimensions with 3 channels in dimension 1, "
                             "got shape [2, 4, 5]"));
}

TEST_CASE("allreduce is differentiable: its gradient is the same allreduce", "[autograd]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  const double ranks_sum = size * (size + 1) / 2.0;  // sum over ranks of (r + 1)
  for (auto op : {hvd::ReduceOp::Sum, hvd::ReduceOp::Average}) {
    INFO(hvd::reduce_op_name(op));
    auto x = torch::full({2, 3}, static_cast<double>(rank), torch::requires_grad().dtype(torch::kDouble));
    auto y = ht::allreduce(x, {op, std::string("autograd.allreduce.") + hvd::reduce_op_name(op)});
    const double value = (op == hvd::ReduceOp::Sum ? 1.0 : 1.0 / size) * (size * (size - 1) / 2.0);
    CHECK(y.allclose(torch::full({2, 3}, value, torch::kDouble)));
    (y * (rank + 1)).sum().backward();  // each rank's loss weighs the result by rank + 1
    const double grad = (op == hvd::ReduceOp::Sum ? 1.0 : 1.0 / size) * ranks_sum;
    CHECK(x.grad().allclose(torch::full({2, 3}, grad, torch::kDouble)));
  }
  auto x = torch::ones({2}, torch::requires_grad());
  CHECK_THAT(error_of([&] { ht::allreduce(x, {hvd::ReduceOp::Max, "autograd.max"}); }),
             Catch::Contains("allreduce of 'autograd.max': op Max has no gradient, but the input requires grad"));
  // Outside grad mode, or detached, it is the plain collective.
  torch::NoGradGuard no_grad;
  CHECK(!ht::allreduce(x, {hvd::ReduceOp::Max, "autograd.max.nograd"}).requires_grad());
}

TEST_CASE("allgather is differentiable with a different first dimension per rank", "[autograd]") {
  const int size = hvd::size();
  const int rank = hvd::rank();
  auto x = torch::full({rank + 1, 2}, static_cast<double>(rank), torch::requires_grad().dtype(torch::kDouble));
  auto y = ht::allgather(x, {"autograd.allgather"});
  REQUIRE(y.size(0) == first_row(size));
  // Rank r's loss weighs row i of the result by (r + 1) * i: the gradient of row i summed over
  // ranks is i * sum_r (r + 1), and this rank keeps its own rows.
  const auto rows = torch::arange(first_row(size), torch::kDouble).unsqueeze(1);
  (y * rows * (rank + 1)).sum().backward();
  const double ranks_sum = size * (size + 1) / 2.0;
  const auto expected = (rows.narrow(0, first_row(rank), rank + 1) * ranks_sum).expand({rank + 1, 2});
  CHECK(x.grad().allclose(expected));
}
