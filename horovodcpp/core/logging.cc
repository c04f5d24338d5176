#include "core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <mutex>

namespace hvd::detail {
namespace {

std::shared_ptr<spdlog::logger> logger() {
  static std::once_flag once;
  static std::shared_ptr<spdlog::logger> instance;
  std::call_once(once, [] {
    instance = spdlog::stderr_color_mt("horovodcpp");
    instance->set_pattern("[%H:%M:%S.%e] [horovodcpp] [%l] %v");
    instance->set_level(spdlog::level::warn);
  });
  return instance;
}

spdlog::level::level_enum parse_level(const std::string& level) {
  if (level == "trace") return spdlog::level::trace;
  if (level == "debug") return spdlog::level::debug;
  if (level == "info") return spdlog::level::info;
  if (level == "error") return spdlog::level::err;
  if (level == "fatal") return spdlog::level::critical;
  return spdlog::level::warn;
}

}  // namespace

void configure_logging(int rank, const std::string& level, bool hide_time) {
  auto log = logger();
  log->set_pattern(std::string(hide_time ? "" : "[%H:%M:%S.%e] ") + "[horovodcpp rank " + std::to_string(rank) +
                   "] [%l] %v");
  log->set_level(parse_level(level));
}

namespace {
// Each line of a multi-line message is its own log line, so every line carries the rank.
void log_lines(spdlog::level::level_enum level, const std::string& message) {
  auto log = logger();
  if (!log->should_log(level)) return;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = message.find('\n', start);
    log->log(level, message.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return;
    start = end + 1;
  }
}
}  // namespace

bool log_enabled(LogLevel level) {
  return logger()->should_log(level == LogLevel::Trace ? spdlog::level::trace : spdlog::level::debug);
}
void log_trace(const std::string& message) { log_lines(spdlog::level::trace, message); }
void log_debug(const std::string& message) { log_lines(spdlog::level::debug, message); }
void log_info(const std::string& message) { log_lines(spdlog::level::info, message); }
void log_warn(const std::string& message) { log_lines(spdlog::level::warn, message); }
void log_error(const std::string& message) { log_lines(spdlog::level::err, message); }

}  // namespace hvd::detail
