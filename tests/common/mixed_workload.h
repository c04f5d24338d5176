// A random mix of every collective, submitted by each rank in an order of its own, from two
// threads, and waited for in yet another order: what negotiation promises (named tensors are
// matched whatever order each rank submits them in), against closed forms. The mix is the same on
// every rank (one seed); the orders differ by rank. Descriptors recur from round to round (the
// response cache hits, and misses where a shape changed), a few are new in each round, and with
// three ranks or more some run in a process set of all ranks but the last. Values depend on the
// round, so a result left over from an earlier round is wrong.
//
// Shared by the host test (tests/mpi/test_mixed_workload.cc) and the device test
// (tests/gpu/test_nccl_mixed_workload.cc); `Memory` says where tensors live:
//   static TensorPtr input(DataType, TensorShape, const std::vector<double>& values);
//   static TensorPtr output(DataType, TensorShape);
//   static OutputAllocator allocator();
//   static std::vector<double> read(const TensorPtr&);   // after the handle completed
// Tensors are made and read on the calling thread; only the submissions run on a second one.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "horovodcpp/horovod.h"
#include "tests/common/rank_reduction.h"
#include "tests/mpi/test_support.h"

namespace hvd::test::mixed {

enum class Kind { Allreduce, GroupedAllreduce, Allgather, GroupedAllgather, Broadcast, Alltoall, Reducescatter,
                  GroupedReducescatter };
inline constexpr Kind kKinds[] = {Kind::Allreduce,        Kind::GroupedAllreduce,    Kind::Allgather,
                                  Kind::GroupedAllgather, Kind::Broadcast,           Kind::Alltoall,
                                  Kind::Reducescatter,    Kind::GroupedReducescatter};

inline const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Allreduce: return "allreduce";
    case Kind::GroupedAllreduce: return "grouped allreduce";
    case Kind::Allgather: return "allgather";
    case Kind::GroupedAllgather: return "grouped allgather";
    case Kind::Broadcast: return "broadcast";
    case Kind::Alltoall: return "alltoall";
    case Kind::Reducescatter: return "reducescatter";
    case Kind::GroupedReducescatter: return "grouped reducescatter";
  }
  return "?";
}

// One collective of the mix, the same on every rank.
struct Descriptor {
  Kind kind = Kind::Allreduce;
  std::string name;
  std::vector<DataType> dtypes;    // one per member (one for the single collectives)
  std::vector<std::int64_t> rows;  // per member: elements (allreduce, broadcast) or first dimension
  std::int64_t cols = 1;
  ReduceOp op = ReduceOp::Sum;
  double prescale = 1, postscale = 1;
  int root = 0;           // broadcast: a global rank of the set
  bool in_place = false;  // allreduce, broadcast
  bool in_set = false;    // in the set of every rank but the last

  bool allocated_outputs() const {
    return kind != Kind::Allreduce && kind != Kind::GroupedAllreduce && kind != Kind::Broadcast;
  }
  std::string describe() const {
    std::ostringstream s;
    s << kind_name(kind) << " '" << name << "' (";
    for (std::size_t m = 0; m < dtypes.size(); ++m) s << (m ? ", " : "") << dtype_name(dtypes[m]) << " x" << rows[m];
    s << "; cols " << cols << ", op " << reduce_op_name(op) << ", scale " << prescale << "/" << postscale << ", root "
      << root << (in_place ? ", in place" : "") << (in_set ? ", in the set" : "") << ")";
    return s.str();
  }
};

inline Descriptor random_descriptor(std::mt19937& rng, const std::string& name, bool sets) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  Descriptor d;
  d.kind = kKinds[pick(8)];
  d.name = name;
  const bool grouped =
      d.kind == Kind::GroupedAllreduce || d.kind == Kind::GroupedAllgather || d.kind == Kind::GroupedReducescatter;
  const int members = grouped ? 1 + pick(3) : 1;
  for (int m = 0; m < members; ++m) {
    d.dtypes.push_back(kEveryDtype[static_cast<std::size_t>(pick(static_cast<int>(kEveryDtype.size())))]);
    // Mostly small, sometimes empty, sometimes past a small fusion threshold.
    const int shape = pick(10);
    d.rows.push_back(shape == 0 ? 0 : shape < 8 ? 1 + pick(40) : 500 + pick(2500));
  }
  d.cols = 1 + pick(3);
  const ReduceOp ops[] = {ReduceOp::Sum, ReduceOp::Average, ReduceOp::Min, ReduceOp::Max, ReduceOp::Product};
  const bool reduces = d.kind == Kind::Allreduce || d.kind == Kind::GroupedAllreduce || d.kind == Kind::Reducescatter ||
                       d.kind == Kind::GroupedReducescatter;
  if (reduces) {
    d.op = ops[pick(d.kind == Kind::Allreduce || d.kind == Kind::GroupedAllreduce ? 5 : 4)];
    // Scale factors only where the closed form stays exact and within int8 (at most twice the
    // unscaled sum, 50 at np=4).
    if ((d.op == ReduceOp::Sum || d.op == ReduceOp::Average) && pick(3) == 0) {
      const std::pair<double, double> scales[] = {{0.5, 2.0}, {2.0, 0.5}, {0.5, 1.0},
                                                  {2.0, 1.0}, {1.0, 2.0}, {0.5, 0.5}};
      std::tie(d.prescale, d.postscale) = scales[pick(6)];
    }
  }
  d.in_place = pick(2) == 0;
  d.in_set = sets && pick(4) == 0;
  d.root = pick(hvd::size() - (d.in_set ? 1 : 0));
  return d;
}

struct Placement {
  ProcessSet set;
  int size = 0;
  int rank = 0;  // in the set; the set's ranks are global ranks 0..size-1
};

// What this rank submits for one descriptor in round `round`, and the check of what comes back.
template <typename Memory>
class Submission {
 public:
  Submission(const Descriptor& d, const Placement& where, int round) : d_(d), where_(where), round_(round) {}

  // Makes the tensors (on the calling thread).
  void prepare() {
    const int r = where_.rank, n = where_.size;
    for (std::size_t m = 0; m < d_.dtypes.size(); ++m) {
      const DataType dtype = d_.dtypes[m];
      std::vector<double> values;
      TensorShape shape;
      switch (d_.kind) {
        case Kind::Allreduce:
        case Kind::GroupedAllreduce:
        case Kind::Broadcast:
          shape = {d_.rows[m]};
          for (std::int64_t i = 0; i < d_.rows[m]; ++i)
            values.push_back(d_.kind == Kind::Broadcast ? broadcast_value(r, i) : value(r, i));
          break;
        case Kind::Allgather:
        case Kind::GroupedAllgather:
          shape = {gathered_rows(r, m), d_.cols};
          for (std::int64_t i = 0; i < gathered_rows(r, m) * d_.cols; ++i)
            values.push_back(gathered_value(r, i / d_.cols, i % d_.cols));
          break;
        case Kind::Alltoall: {
          std::int64_t rows = 0;
          for (int to = 0; to < n; ++to) {
            splits_.push_back(split(r, to));
            rows += split(r, to);
            for (std::int64_t j = 0; j < split(r, to); ++j)
              for (int c = 0; c < 3; ++c) values.push_back(exchanged_value(r, to, j, c));
          }
          shape = {rows, 3};
          break;
        }
        case Kind::Reducescatter:
        case Kind::GroupedReducescatter:
          shape = {d_.rows[m], d_.cols};
          for (std::int64_t i = 0; i < d_.rows[m] * d_.cols; ++i) values.push_back(value(r, i));
          break;
      }
      inputs_.push_back(Memory::input(dtype, shape, values));
      if (!d_.allocated_outputs()) outputs_.push_back(d_.in_place ? inputs_.back() : Memory::output(dtype, shape));
    }
  }

  // Starts the collective (any thread).
  Handle submit() const {
    switch (d_.kind) {
      case Kind::Allreduce:
      case Kind::GroupedAllreduce: {
        AllreduceOptions o{d_.op, d_.name, d_.prescale, d_.postscale, where_.set};
        if (d_.kind == Kind::Allreduce) return allreduce_async(inputs_[0], outputs_[0], o);
        return grouped_allreduce_async(inputs_, outputs_, o);
      }
      case Kind::Allgather: return allgather_async(inputs_[0], Memory::allocator(), {d_.name, where_.set});
      case Kind::GroupedAllgather: return grouped_allgather_async(inputs_, Memory::allocator(), {d_.name, where_.set});
      case Kind::Broadcast: return broadcast_async(inputs_[0], outputs_[0], {d_.root, d_.name, where_.set});
      case Kind::Alltoall: return alltoall_async(inputs_[0], Memory::allocator(), {splits_, d_.name, where_.set});
      case Kind::Reducescatter:
      case Kind::GroupedReducescatter: {
        ReducescatterOptions o{d_.op, d_.name, d_.prescale, d_.postscale, where_.set};
        if (d_.kind == Kind::Reducescatter) return reducescatter_async(inputs_[0], Memory::allocator(), o);
        return grouped_reducescatter_async(inputs_, Memory::allocator(), o);
      }
    }
    return {};
  }

  // Waits, then the first difference from the closed form ("" when none).
  std::string check(const Handle& h) const {
    try {
      h.wait();
    } catch (const std::exception& e) {
      return std::string("failed: ") + e.what();
    }
    const int r = where_.rank, n = where_.size;
    for (std::size_t m = 0; m < d_.dtypes.size(); ++m) {
      const DataType dtype = d_.dtypes[m];
      const TensorPtr result = d_.allocated_outputs() ? h.outputs().at(m) : outputs_.at(m);
      TensorShape shape;
      std::function<double(std::int64_t)> expected;
      switch (d_.kind) {
        case Kind::Allreduce:
        case Kind::GroupedAllreduce:
          shape = {d_.rows[m]};
          expected = [&](std::int64_t i) {
            return reduced_over_ranks(d_.op, i + round_, dtype, n, d_.prescale, d_.postscale);
          };
          break;
        case Kind::Allgather:
        case Kind::GroupedAllgather: {
          std::int64_t total = 0;
          for (int s = 0; s < n; ++s) total += gathered_rows(s, m);
          shape = {total, d_.cols};
          expected = [&](std::int64_t i) {
            std::int64_t row = i / d_.cols;
            int s = 0;
            while (row >= gathered_rows(s, m)) row -= gathered_rows(s++, m);
            return gathered_value(s, row, i % d_.cols);
          };
          break;
        }
        case Kind::Broadcast:
          shape = {d_.rows[0]};
          expected = [&](std::int64_t i) { return broadcast_value(d_.root, i); };
          break;
        case Kind::Alltoall: {
          std::vector<std::int64_t> want_splits;
          std::int64_t total = 0;
          for (int from = 0; from < n; ++from) {
            want_splits.push_back(split(from, r));
            total += split(from, r);
          }
          if (h.received_splits() != want_splits) return "received splits differ from the senders' splits";
          shape = {total, 3};
          expected = [&](std::int64_t i) {
            std::int64_t row = i / 3;
            int from = 0;
            while (row >= split(from, r)) row -= split(from++, r);
            return exchanged_value(from, r, row, static_cast<int>(i % 3));
          };
          break;
        }
        case Kind::Reducescatter:
        case Kind::GroupedReducescatter: {
          const std::int64_t rows = d_.rows[m];
          const std::int64_t mine = rows / n + (r < rows % n ? 1 : 0);
          const std::int64_t first = r * (rows / n) + std::min<std::int64_t>(r, rows % n);
          shape = {mine, d_.cols};
          expected = [&, first](std::int64_t i) {
            return reduced_over_ranks(d_.op, first * d_.cols + i + round_, dtype, n, d_.prescale, d_.postscale);
          };
          break;
        }
      }
      const std::string member = "member " + std::to_string(m) + " (" + dtype_name(dtype) + ")";
      if (result->shape() != shape)
        return member + ": shape " + shape_string(result->shape()) + ", expected " + shape_string(shape);
      const std::vector<double> got = Memory::read(result);
      const auto stored = filled(dtype, shape, expected);  // the closed form as the dtype stores it
      for (std::size_t i = 0; i < got.size(); ++i) {
        const double want = read_as_double(*stored, static_cast<std::int64_t>(i));
        if (std::abs(got[i] - want) > tolerance(dtype) * std::max(1.0, std::abs(want)))
          return member + " element " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", expected " +
                 std::to_string(want);
      }
    }
    return {};
  }

  const Descriptor& descriptor() const { return d_; }

 private:
  // Small whole numbers, exact in every dtype at np <= 4 (rank_reduction.h), shifted by the round.
  double value(int rank, std::int64_t i) const { return rank_value(rank, i + round_, d_.op); }
  std::int64_t gathered_rows(int rank, std::size_t member) const {
    return (rank + round_ + static_cast<int>(member) + static_cast<int>(d_.rows[member] % 5)) % 3;
  }
  double gathered_value(int rank, std::int64_t row, std::int64_t col) const {
    return 10 * rank + row + col + round_ % 20;
  }
  double broadcast_value(int rank, std::int64_t i) const { return rank * 7 + (i + round_) % 50; }
  std::int64_t split(int from, int to) const { return (from + 2 * to + round_ + d_.rows[0] % 3) % 3; }
  double exchanged_value(int from, int to, std::int64_t row, int col) const {
    return col == 0 ? from : col == 1 ? to : row + round_ % 20;
  }

  Descriptor d_;
  Placement where_;
  int round_;
  std::vector<TensorPtr> inputs_, outputs_;
  std::vector<std::int64_t> splits_;  // alltoall
};

struct Outcome {
  int checked = 0;                    // collectives this rank waited for and compared
  std::vector<std::string> failures;  // each naming the seed, the round and the collective
};

inline unsigned seed_from_environment() {
  const char* text = std::getenv("HVD_TEST_SEED");
  return text != nullptr && *text != '\0' ? static_cast<unsigned>(std::strtoul(text, nullptr, 10)) : 20261127u;
}

// Runs `rounds` rounds of the mix on every rank. Needs HOROVOD_DYNAMIC_PROCESS_SETS=1 at three
// ranks or more (the set is added here). Ends with a barrier: the last rank, outside the set, may
// be done first, and its shutdown would end every rank's collectives, the set's included (as in
// Horovod), while the set still waits for its last ones.
template <typename Memory>
Outcome run(unsigned seed, int rounds) {
  const int rank = hvd::rank(), size = hvd::size();
  std::mt19937 shared(seed);                                         // the same on every rank: the mix
  std::mt19937 own(seed * 7919u + static_cast<unsigned>(rank) + 1);  // this rank's orders
  const bool sets = size >= 3;
  const Placement everyone{ProcessSet{}, size, rank};
  Placement set;
  if (sets) {
    std::vector<int> ranks;
    for (int i = 0; i < size - 1; ++i) ranks.push_back(i);
    set = Placement{add_process_set(ranks), size - 1, rank};
  }
  std::vector<Descriptor> recurring;
  for (int k = 0; k < 24; ++k) recurring.push_back(random_descriptor(shared, "mix." + std::to_string(k), sets));

  Outcome outcome;
  for (int round = 0; round < rounds; ++round) {
    std::vector<Descriptor> mix;
    for (const auto& d : recurring)
      if (shared() % 3 != 0) mix.push_back(d);
    for (int j = 0; j < 3; ++j)
      mix.push_back(random_descriptor(shared, "mix.r" + std::to_string(round) + "." + std::to_string(j), sets));
    std::vector<Submission<Memory>> mine;
    for (const auto& d : mix)
      if (!d.in_set || rank < size - 1) mine.emplace_back(d, d.in_set ? set : everyone, round);
    std::shuffle(mine.begin(), mine.end(), own);
    for (auto& s : mine) s.prepare();

    // Submitted from two threads in every other round, the main thread's share inside a batch in
    // every third.
    std::vector<Handle> handles(mine.size());
    auto submit_every = [&](std::size_t first, std::size_t step) {
      for (std::size_t i = first; i < mine.size(); i += step) handles[i] = mine[i].submit();
    };
    if (round % 2 == 1) {
      std::thread other([&] { submit_every(1, 2); });
      {
        std::optional<SubmissionBatch> batch;
        if (round % 3 == 0) batch.emplace();
        submit_every(0, 2);
      }
      other.join();
    } else {
      std::optional<SubmissionBatch> batch;
      if (round % 3 == 0) batch.emplace();
      submit_every(0, 1);
    }

    std::vector<std::size_t> order(mine.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), own);
    for (std::size_t i : order) {
      const std::string problem = mine[i].check(handles[i]);
      ++outcome.checked;
      if (!problem.empty())
        outcome.failures.push_back("seed " + std::to_string(seed) + " (HVD_TEST_SEED), round " + std::to_string(round) +
                                   ", rank " + std::to_string(rank) + ": " + mine[i].descriptor().describe() + ": " +
                                   problem);
    }
  }
  barrier();
  return outcome;
}

}  // namespace hvd::test::mixed
