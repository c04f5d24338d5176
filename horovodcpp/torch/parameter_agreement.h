// The check that every rank's DistributedOptimizer reduces the same parameters: a cheap digest
// every round, and on a difference the full lists, exchanged, and the first difference named.
// See Note [A model that differs between ranks fails on every rank]. Internal to the torch
// front end; used by GradientReducer on the training thread (or the thread ending backward).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "horovodcpp/horovod.h"

namespace hvd::torch::detail {

// Note [A model that differs between ranks fails on every rank]
// Gradients are reduced by name, one allreduce each, started as backward produces them. When the
// ranks' models differ (an extra layer on one rank, a parameter frozen or unfrozen on some ranks
// only, a param group added on some), some names are submitted on some ranks only, and those
// ranks would wait for the others for good. So each rank describes its parameters (names,
// dtypes, shapes, requires_grad, which the optimizer updates, which gradients are in flight) and
// the ranks compare a digest of it in every reduction round, the first included, in the round's
// one small int64 allreduce (not at construction: ranks may build different numbers of
// optimizers, so a collective there could not be matched; the first round comes before any
// reduced gradient is used). A difference is certain on every rank at once (they all
// see the same reduced digest, or the same shape mismatch of that allreduce), and then every
// rank exchanges its full description, names the first difference and the ranks, withdraws
// (hvd::withdraw) the gradients it will never submit that others have in flight, so their
// handles fail instead of waiting, and throws the same message.

struct ParameterEntry {
  std::string name;
  std::string dtype;  // "float32"
  std::string shape;  // "[4, 3]"
  bool requires_grad = false;
  int slot = -1;      // its place among the optimizer's reduced parameters; -1: not reduced
  bool in_flight = false;  // its gradient's allreduce is started and not yet written back
};

struct ParameterList {
  std::string optimizer;  // DistributedOptimizerOptions::name
  std::vector<ParameterEntry> entries;
};

std::string encode_parameters(const ParameterList& list);
ParameterList decode_parameters(const std::string& bytes);  // throws hvd::Error when malformed

// The digest as two positive int64 words whose Max over the ranks tells whether all digests are
// equal (a joined rank adds zeros, which change neither Max).
std::array<std::int64_t, 2> digest_words(const ParameterList& list);
// The same in two parts, for a caller that keeps the first while its parameters do not change:
// static_digest() covers everything but `in_flight`, which changes every round and which
// digest_words(static_digest(list), list) adds (equal to digest_words(list)).
std::uint64_t static_digest(const ParameterList& list);
std::array<std::int64_t, 2> digest_words(std::uint64_t static_digest, const ParameterList& list);
bool same_digest_everywhere(const std::array<std::int64_t, 2>& max_over_ranks);

// The first difference between the lists of `ranks` (global ranks, in the order of `lists`),
// each compared with the first: "" when they are all the same.
std::string describe_difference(const std::vector<ParameterList>& lists, const std::vector<int>& ranks);

// Collective over `set`: every rank's list (two allgathers named `name`.length and `name`.bytes).
std::vector<ParameterList> gather_parameters(const ParameterList& mine, const ProcessSet& set, const std::string& name);

}  // namespace hvd::torch::detail
