// Grouped allgather and grouped reducescatter on host memory: one handle for several tensors of
// different shapes, a different first dimension per rank, every dtype, against closed forms.
// ctest runs this suite with fusion on (the group fuses into one MPI call) and off.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "closed_forms.h"

using namespace hvd;
using hvd::test::count_mismatches;
using hvd::test::filled;
using hvd::test::kEveryDtype;
using hvd::test::kEveryReduceOp;
using hvd::test::rank_value;
using hvd::test::read_as_double;
using hvd::test::reduced_over_ranks;

namespace {

std::shared_ptr<HostTensor> output(const Handle& h, std::size_t i) {
  return std::static_pointer_cast<HostTensor>(h.outputs().at(i));
}

}  // namespace

TEST_CASE("grouped allgather: members of different widths, a different first dimension per rank", "[grouped][allgather]") {
  const int rank = hvd::rank(), size = hvd::size();
  for (DataType dtype : kEveryDtype) {
    // Member k has (rank + k) rows of (k + 1) columns; value = 10 * rank + 3 * k + row + col.
    std::vector<TensorPtr> ins;
    const int members = 3;
    for (int k = 0; k < members; ++k) {
      const std::int64_t cols = k + 1;
      ins.push_back(filled(dtype, {rank + k, cols}, [&](std::int64_t i) { return 10 * rank + 3 * k + i / cols + i % cols; }));
    }
    Handle h = grouped_allgather_async(ins, host_allocator(), {std::string("gag.") + dtype_name(dtype)});
    h.wait();
    REQUIRE(h.outputs().size() == static_cast<std::size_t>(members));
    for (int k = 0; k < members; ++k) {
      const std::int64_t cols = k + 1;
      auto out = output(h, k);
      std::int64_t rows = 0;
      for (int r = 0; r < size; ++r) rows += r + k;
      INFO(dtype_name(dtype) << " member " << k);
      REQUIRE(out->shape() == TensorShape{rows, cols});
      std::int64_t at = 0;
      int wrong = 0;
      for (int r = 0; r < size; ++r)
        for (int row = 0; row < r + k; ++row, ++at)
          for (std::int64_t col = 0; col < cols; ++col)
            wrong += read_as_double(*out, at * cols + col) != 10 * r + 3 * k + row + col;
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("grouped reducescatter: every dtype and reduce op, uneven rows, with scale factors", "[grouped][reducescatter]") {
  const int rank = hvd::rank(), size = hvd::size();
  const std::vector<std::int64_t> rows_of = {std::int64_t{2} * size + 1, std::int64_t{size - 1}, std::int64_t{size}};
  const std::vector<std::int64_t> cols_of = {3, 1, 2};
  for (DataType dtype : kEveryDtype) {
    for (ReduceOp op : kEveryReduceOp) {
      std::vector<TensorPtr> ins;
      for (std::size_t k = 0; k < rows_of.size(); ++k)
        ins.push_back(filled(dtype, {rows_of[k], cols_of[k]}, [&](std::int64_t i) { return rank_value(rank, i, op); }));
      const std::string name = std::string("grs.") + dtype_name(dtype) + "." + reduce_op_name(op);
      // Scale factors that are exact in every dtype, integers included.
      const double pre = op == ReduceOp::Sum ? 2.0 : 1.0, post = op == ReduceOp::Max ? 3.0 : 1.0;
      Handle h = grouped_reducescatter_async(ins, host_allocator(), {op, name, pre, post});
      h.wait();
      for (std::size_t k = 0; k < rows_of.size(); ++k) {
        const std::int64_t rows = rows_of[k], cols = cols_of[k];
        const std::int64_t mine = rows / size + (rank < rows % size ? 1 : 0);
        const std::int64_t first = rank * (rows / size) + std::min<std::int64_t>(rank, rows % size);
        auto out = output(h, k);
        INFO(name << " member " << k);
        REQUIRE(out->shape() == TensorShape{mine, cols});
        CHECK(count_mismatches(*out, [&](std::int64_t i) {
                return reduced_over_ranks(op, first * cols + i, dtype, size, pre, post);
              }) == 0);
      }
    }
  }
}

TEST_CASE("grouped allgather and reducescatter repeat, and mix with single collectives", "[grouped]") {
  const int rank = hvd::rank(), size = hvd::size();
  for (int step = 0; step < 4; ++step) {
    auto a = filled(DataType::Float32, {1, 2}, [&](std::int64_t i) { return rank * 2 + i + step; });
    auto b = filled(DataType::Float32, {2, 2}, [&](std::int64_t) { return rank; });
    Handle g = grouped_allgather_async({a, b}, host_allocator(), {"gmix.ag"});
    auto single = filled(DataType::Float32, {size}, [&](std::int64_t i) { return rank + i; });
    Handle s = reducescatter_async(single, host_allocator(), {ReduceOp::Sum, "gmix.rs"});
    g.wait();
    s.wait();
    auto ga = output(g, 0), gb = output(g, 1), rs = output(s, 0);
    CHECK(count_mismatches(*ga, [&](std::int64_t i) { return i + step; }) == 0);
    CHECK(count_mismatches(*gb, [&](std::int64_t i) { return static_cast<double>(i / 4); }) == 0);
    CHECK(count_mismatches(*rs, [&](std::int64_t) { return size * (size - 1) / 2.0 + size * rank; }) == 0);
  }
}
