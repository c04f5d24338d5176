// Runs N Controllers (one thread per simulated rank) for a scripted number of cycles and keeps
// every rank's response list per cycle, so tests can compare ranks with each other.
#pragma once

#include <functional>
#include <thread>

#include "core/controller.h"
#include "fake_channel.h"

namespace hvd::test {

// script(rank, cycle) returns the requests that rank submits in that cycle.
using Script = std::function<std::vector<detail::Request>(int rank, int cycle)>;

struct RunResult {
  // lists[rank][cycle]
  std::vector<std::vector<detail::ResponseList>> lists;
  std::vector<detail::ControllerStats> stats;
};

inline RunResult run_controllers(int size, int cycles, const Script& script, detail::ControllerOptions options = {}) {
  auto rendezvous = std::make_shared<Rendezvous>(size);
  RunResult result;
  result.lists.resize(size);
  result.stats.resize(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      FakeChannel channel(rendezvous, rank);
      detail::Controller controller(channel, options);
      for (int c = 0; c < cycles; ++c) {
        auto requests = script(rank, c);
        result.lists[rank].push_back(controller.compute_response_list(std::move(requests), false));
      }
      result.stats[rank] = controller.stats();
    });
  }
  for (auto& t : threads) t.join();
  return result;
}

inline detail::Request allreduce_request(const std::string& name, TensorShape shape,
                                         DataType dtype = DataType::Float32) {
  detail::Request r;
  r.type = detail::RequestType::Allreduce;
  r.name = name;
  r.shape = std::move(shape);
  r.dtype = dtype;
  r.reduce_op = ReduceOp::Sum;
  return r;
}

// Every name in a cycle's responses, fused or not, in order.
inline std::vector<std::string> names_of(const detail::ResponseList& list) {
  std::vector<std::string> out;
  for (const auto& r : list.responses)
    for (const auto& n : r.names) out.push_back(n);
  return out;
}

}  // namespace hvd::test
