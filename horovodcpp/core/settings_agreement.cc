#include "core/settings_agreement.h"

#include <map>
#include <sstream>

namespace hvd::detail {
namespace {

std::string number(double v) {
  std::ostringstream out;
  out.precision(17);
  out << v;
  return out.str();
}

std::vector<std::uint8_t> encode_values(const AgreedValues& values) {
  std::string text;
  for (const auto& [name, value] : values) text += name + "=" + value + "\n";
  return {text.begin(), text.end()};
}

AgreedValues decode_values(const std::vector<std::uint8_t>& bytes) {
  AgreedValues out;
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) out.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  return out;
}

// "0 on rank 0; 134217728 on ranks 1, 2, 3"
std::string describe_values(const std::map<std::string, std::vector<int>>& ranks_by_value) {
  std::string out;
  for (const auto& [value, ranks] : ranks_by_value) {
    out += (out.empty() ? "" : "; ") + (value.empty() ? std::string("(unset)") : value) + " on rank" +
           (ranks.size() > 1 ? "s " : " ");
    for (std::size_t i = 0; i < ranks.size() && i < 16; ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
    if (ranks.size() > 16) out += ", ... (" + std::to_string(ranks.size()) + " ranks)";
  }
  return out;
}

}  // namespace

AgreedValues agreed_values(const Settings& s, const std::string& backends) {
  return {
      {"HOROVOD_FUSION_THRESHOLD", std::to_string(s.fusion_threshold_bytes)},
      {"HOROVOD_CACHE_CAPACITY", std::to_string(s.cache_capacity)},
      {"HOROVOD_CYCLE_TIME", number(s.cycle_time_ms)},
      {"HOROVOD_HIERARCHICAL_ALLREDUCE", s.hierarchical_allreduce ? "1" : "0"},
      {"HOROVOD_CPU_OPERATIONS", s.cpu_operations},
      {"HOROVOD_GPU_OPERATIONS", s.gpu_operations},
      {"HOROVOD_AUTOTUNE", s.autotune ? "1" : "0"},
      {"HOROVOD_DYNAMIC_PROCESS_SETS", s.dynamic_process_sets ? "1" : "0"},
      {"backends compiled in", backends},
  };
}

std::string describe_disagreement(const std::vector<AgreedValues>& values) {
  std::map<std::string, std::map<std::string, std::vector<int>>> by_name;  // name -> value -> ranks
  std::vector<std::string> order;
  for (std::size_t rank = 0; rank < values.size(); ++rank)
    for (const auto& [name, value] : values[rank]) {
      if (by_name.find(name) == by_name.end()) order.push_back(name);
      by_name[name][value].push_back(static_cast<int>(rank));
    }
  std::string out;
  for (const auto& name : order)
    if (by_name[name].size() > 1) out += "\n  " + name + ": " + describe_values(by_name[name]);
  if (out.empty()) return {};
  return "the ranks were started with different settings that every rank must share (set them the same "
         "on every rank, e.g. with hvdrun or mpirun -x):" + out;
}

std::string check_settings_agree(ControlChannel& channel, const AgreedValues& mine) {
  auto gathered = channel.gather(encode_values(mine));
  std::vector<std::uint8_t> verdict;
  if (channel.rank() == 0) {
    std::vector<AgreedValues> all;
    for (const auto& bytes : gathered) all.push_back(decode_values(bytes));
    const std::string message = describe_disagreement(all);
    verdict.assign(message.begin(), message.end());
  }
  verdict = channel.broadcast(verdict);
  return std::string(verdict.begin(), verdict.end());
}

}  // namespace hvd::detail
