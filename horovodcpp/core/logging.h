// Runtime logging through spdlog: one logger whose lines carry the rank once it is known, at the
// level from HOROVOD_LOG_LEVEL. Thread-safe.
#pragma once

#include <string>

namespace hvd::detail {

void configure_logging(int rank, const std::string& level, bool hide_time);  // level: trace..fatal
// Whether debug or trace lines would be written: lets hot paths skip building the message.
enum class LogLevel { Trace, Debug };
bool log_enabled(LogLevel level);
void log_trace(const std::string& message);
void log_debug(const std::string& message);
void log_info(const std::string& message);
void log_warn(const std::string& message);
void log_error(const std::string& message);

}  // namespace hvd::detail
