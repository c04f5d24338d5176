#include "parameter_agreement.h"

#include <cstring>
#include <map>
#include <sstream>

namespace hvd::torch::detail {
namespace {

constexpr char kField = '\x1f';   // between the fields of an entry
constexpr char kRecord = '\x1e';  // after each entry
constexpr std::int64_t kDigestRange = std::int64_t{1} << 62;

// Names are the user's: keep the separators out of them.
std::string clean(const std::string& text) {
  std::string out = text;
  for (char& c : out)
    if (c == kField || c == kRecord) c = ' ';
  return out;
}

constexpr std::uint64_t kFnvPrime = 1099511628211ULL;

std::uint64_t fnv1a(const std::string& bytes) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : bytes) h = (h ^ c) * kFnvPrime;
  return h;
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string out = ranks.size() > 1 ? "ranks " : "rank ";
  for (std::size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

std::string what_it_is(const ParameterEntry& e) { return e.dtype + " " + e.shape; }

std::string grad_state(const ParameterEntry& e) { return e.requires_grad ? "requires grad" : "is frozen (requires_grad false)"; }

// The first difference between `a` (on rank ra) and `b` (on rank rb), or "". Differences of
// the model come before those of what is in flight, which follow from them.
std::string first_difference(const ParameterList& a, int ra, const ParameterList& b, int rb) {
  const std::string on_a = " on rank " + std::to_string(ra), on_b = " on rank " + std::to_string(rb);
  if (a.optimizer != b.optimizer)
    return "the optimizer is named '" + a.optimizer + "'" + on_a + " but '" + b.optimizer + "'" + on_b +
           " (DistributedOptimizerOptions::name)";
  std::map<std::string, const ParameterEntry*> in_a, in_b;
  for (const auto& e : a.entries) in_a.emplace(e.name, &e);
  for (const auto& e : b.entries) in_b.emplace(e.name, &e);
  for (const auto& x : a.entries) {
    auto it = in_b.find(x.name);
    if (it == in_b.end())
      return "parameter '" + x.name + "' (" + what_it_is(x) + ") exists" + on_a + " but not" + on_b;
    const ParameterEntry& y = *it->second;
    if (x.dtype != y.dtype || x.shape != y.shape)
      return "parameter '" + x.name + "' is " + what_it_is(x) + on_a + " but " + what_it_is(y) + on_b;
    if (x.requires_grad != y.requires_grad)
      return "parameter '" + x.name + "' " + grad_state(x) + on_a + " but " + grad_state(y) + on_b;
  }
  for (const auto& y : b.entries)
    if (!in_a.count(y.name))
      return "parameter '" + y.name + "' (" + what_it_is(y) + ") exists" + on_b + " but not" + on_a;
  if (a.entries.size() != b.entries.size())  // repeated names: construction refuses them
    return "rank " + std::to_string(ra) + " has " + std::to_string(a.entries.size()) + " parameters and rank " +
           std::to_string(rb) + " has " + std::to_string(b.entries.size());
  for (const auto& x : a.entries) {
    const ParameterEntry& y = *in_b.at(x.name);
    if ((x.slot < 0) != (y.slot < 0)) {
      const bool here = x.slot >= 0;
      return "parameter '" + x.name + "' is updated by the optimizer" + (here ? on_a : on_b) + " but not" +
             (here ? on_b : on_a) + " (a param group added, or a parameter unfrozen, on some ranks only)";
    }
    if (x.slot != y.slot)
      return "parameter '" + x.name + "' is the optimizer's reduced parameter #" + std::to_string(x.slot) + on_a +
             " but #" + std::to_string(y.slot) + on_b + " (param groups changed in another order)";
  }
  for (const auto& x : a.entries) {
    const ParameterEntry& y = *in_b.at(x.name);
    if (x.in_flight != y.in_flight) {
      const bool here = x.in_flight;
      return "the gradient of '" + x.name + "' is being reduced" + (here ? on_a : on_b) + " but not" +
             (here ? on_b : on_a);
    }
  }
  return {};
}

}  // namespace

std::string encode_parameters(const ParameterList& list) {
  std::string out = clean(list.optimizer) + kRecord;
  for (const auto& e : list.entries) {
    out += clean(e.name) + kField + e.dtype + kField + e.shape + kField + (e.requires_grad ? "1" : "0") + kField +
           std::to_string(e.slot) + kField + (e.in_flight ? "1" : "0") + kRecord;
  }
  return out;
}

ParameterList decode_parameters(const std::string& bytes) {
  ParameterList list;
  std::vector<std::string> records;
  std::string record;
  for (char c : bytes) {
    if (c == kRecord) {
      records.push_back(record);
      record.clear();
    } else {
      record += c;
    }
  }
  if (records.empty() || !record.empty()) throw Error("DistributedOptimizer: a malformed parameter list arrived");
  list.optimizer = records.front();
  for (std::size_t i = 1; i < records.size(); ++i) {
    std::vector<std::string> f;
    std::string field;
    for (char c : records[i] + kField) {
      if (c == kField) {
        f.push_back(field);
        field.clear();
      } else {
        field += c;
      }
    }
    if (f.size() != 6) throw Error("DistributedOptimizer: a malformed parameter list arrived");
    ParameterEntry e;
    e.name = f[0];
    e.dtype = f[1];
    e.shape = f[2];
    e.requires_grad = f[3] == "1";
    e.slot = std::atoi(f[4].c_str());
    e.in_flight = f[5] == "1";
    list.entries.push_back(std::move(e));
  }
  return list;
}

// Everything of the list but what is in flight, in encode_parameters' framing.
std::uint64_t static_digest(const ParameterList& list) {
  std::string out = clean(list.optimizer) + kRecord;
  for (const auto& e : list.entries) {
    out += clean(e.name) + kField + e.dtype + kField + e.shape + kField + (e.requires_grad ? "1" : "0") + kField +
           std::to_string(e.slot) + kRecord;
  }
  return fnv1a(out);
}

// One byte per entry after the static part: the number of entries is fixed by it.
std::array<std::int64_t, 2> digest_words(std::uint64_t static_part, const ParameterList& list) {
  std::uint64_t h = static_part;
  for (const auto& e : list.entries) h = (h ^ static_cast<unsigned char>(e.in_flight ? '1' : '0')) * kFnvPrime;
  const auto d = static_cast<std::int64_t>(h % static_cast<std::uint64_t>(kDigestRange));
  return {d + 1, kDigestRange - d};  // both in [1, 2^62]
}

std::array<std::int64_t, 2> digest_words(const ParameterList& list) {
  return digest_words(static_digest(list), list);
}

bool same_digest_everywhere(const std::array<std::int64_t, 2>& m) {
  // max(d) + 1 == m[0] and 2^62 - min(d) == m[1]: equal exactly when max(d) == min(d).
  return m[0] - 1 == kDigestRange - m[1];
}

std::string describe_difference(const std::vector<ParameterList>& lists, const std::vector<int>& ranks) {
  std::string first;
  std::vector<int> differing;
  for (std::size_t r = 1; r < lists.size(); ++r) {
    const std::string d = first_difference(lists[0], ranks[0], lists[r], ranks[r]);
    if (d.empty()) continue;
    if (first.empty()) first = d;
    differing.push_back(ranks[r]);
  }
  if (first.empty()) return {};
  return "DistributedOptimizer: the model differs between ranks, so its gradients cannot be reduced: " + first +
         " (" + ranks_text(differing) + (differing.size() > 1 ? " differ" : " differs") + " from rank " +
         std::to_string(ranks[0]) +
         "). Every rank must build the same model, freeze the same parameters and give the optimizer the same "
         "param groups";
}

std::vector<ParameterList> gather_parameters(const ParameterList& mine, const ProcessSet& set, const std::string& name) {
  const std::string bytes = encode_parameters(mine);
  auto length = HostTensor::allocate(DataType::Int64, {1});
  *length->data_as<std::int64_t>() = static_cast<std::int64_t>(bytes.size());
  AllgatherOptions options;
  options.process_set = set;
  options.name = name + ".length";
  Handle lengths = allgather_async(length, host_allocator(), options);
  lengths.wait();
  auto data = HostTensor::allocate(DataType::UInt8, {static_cast<std::int64_t>(bytes.size())});
  std::memcpy(data->data(), bytes.data(), bytes.size());
  options.name = name + ".bytes";
  Handle all = allgather_async(data, host_allocator(), options);
  all.wait();
  Tensor& sizes = *lengths.outputs().front();
  const auto* at = static_cast<const char*>(all.outputs().front()->data());
  const auto* size_of = static_cast<const std::int64_t*>(sizes.data());
  std::vector<ParameterList> lists;
  for (std::int64_t r = 0; r < sizes.num_elements(); ++r) {
    const std::int64_t n = size_of[r];
    lists.push_back(decode_parameters(std::string(at, static_cast<std::size_t>(n))));
    at += n;
  }
  return lists;
}

}  // namespace hvd::torch::detail
