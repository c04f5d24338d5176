// Which ranks share a node, for the references of tests that group ranks by node (device Adasum
// averages each node first). Read from the test-only variables themselves, not from the runtime
// under test: HVD_TEST_FAKE_PLACEMENT=round_robin deals the ranks to the nodes in turn (as
// `mpirun --map-by node`); otherwise, and on a real machine, a node's ranks are consecutive.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

namespace hvd::test {

inline bool round_robin_placement() {
  const char* raw = std::getenv("HVD_TEST_FAKE_PLACEMENT");
  return raw != nullptr && std::string(raw) == "round_robin";
}

// The ranks of node `node` (numbered as the runtime numbers nodes: by their lowest rank) when
// `size` ranks run `per_node` to a node, in rank order.
inline std::vector<int> ranks_of_node(int node, int per_node, int size) {
  const int nodes = size / per_node;
  std::vector<int> ranks;
  for (int j = 0; j < per_node; ++j) ranks.push_back(round_robin_placement() ? node + j * nodes : node * per_node + j);
  return ranks;
}

}  // namespace hvd::test
