// hvd-timeline: checks, summarises and merges horovodcpp timelines (Chrome Trace Event JSON).
//   hvd-timeline check FILE            exit 1 with the first bad event
//   hvd-timeline summary [--top N] FILE
//   hvd-timeline merge FILE... -o OUT  one trace, a row group per rank
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "timeline/trace_check.h"
#include "timeline/trace_file.h"
#include "timeline/trace_merge.h"
#include "timeline/trace_summary.h"

namespace {

using namespace hvd::timeline;

constexpr int kUsageError = 2;

int usage(const std::string& problem) {
  if (!problem.empty()) std::cerr << "hvd-timeline: " << problem << "\n";
  std::cerr << "usage: hvd-timeline check FILE\n"
               "       hvd-timeline summary [--top N] FILE   (N tensors per table; default 10)\n"
               "       hvd-timeline merge FILE... -o OUT\n"
               "Files cut short by a crash (no closing ']', or a partial last event) are read up\n"
               "to the cut; anything else that is not strict JSON is an error.\n";
  return kUsageError;
}

int run_check(const std::string& path) {
  const TraceFile trace = read_trace_file(path);
  const CheckResult result = check_trace(trace);
  if (!result.ok) {
    std::cerr << path << ": " << result.message << "\n  " << trace.events[result.bad_index].dump()
              << "\n";
    return 1;
  }
  for (const auto& warning : result.warnings) std::cerr << path << ": warning: " << warning << "\n";
  std::cout << path << ": OK: " << trace.events.size() << " events on " << result.rows
            << " row(s)\n";
  return 0;
}

int run_summary(const std::vector<std::string>& args) {
  SummaryOptions options;
  std::string path;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--top") {
      if (i + 1 >= args.size()) return usage("summary: --top needs a number");
      const std::string& value = args[++i];
      char* end = nullptr;
      const long top = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || top < 1) {
        return usage("summary: --top needs a whole number of at least 1, not '" + value + "'");
      }
      options.top = static_cast<std::size_t>(top);
    } else if (path.empty()) {
      path = args[i];
    } else {
      return usage("summary takes exactly one FILE");
    }
  }
  if (path.empty()) return usage("summary takes exactly one FILE");
  const TraceFile trace = read_trace_file(path);
  print_summary(trace, summarize_trace(trace), std::cout, options);
  return 0;
}

int run_merge(const std::vector<std::string>& args) {
  std::vector<std::string> inputs;
  std::string output;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-o" || args[i] == "--output") {
      if (i + 1 >= args.size()) return usage("merge: -o needs a file name");
      output = args[++i];
    } else {
      inputs.push_back(args[i]);
    }
  }
  if (output.empty()) return usage("merge: name the output with -o OUT");
  if (inputs.empty()) return usage("merge: name at least one input trace");
  std::vector<TraceFile> traces;
  for (const auto& input : inputs) {
    traces.push_back(read_trace_file(input));
    if (!traces.back().complete) {
      std::cerr << input << ": warning: " << traces.back().note << "\n";
    }
  }
  const auto merged = merge_traces(traces);
  write_trace(merged, output);
  std::cout << output << ": merged " << inputs.size() << " trace(s), " << merged.size()
            << " events\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help") return usage("");
  const std::string& command = args[0];
  try {
    if (command == "check") {
      if (args.size() != 2) return usage(command + " takes exactly one FILE");
      return run_check(args[1]);
    }
    if (command == "summary") return run_summary({args.begin() + 1, args.end()});
    if (command == "merge") return run_merge({args.begin() + 1, args.end()});
  } catch (const TraceError& e) {
    std::cerr << "hvd-timeline: " << e.what() << "\n";
    return 1;
  }
  return usage("unknown command '" + command + "'");
}
