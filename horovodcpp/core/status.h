// The outcome of one operation, passed from the background thread to a handle. Never thrown
// across the thread boundary; Handle::wait() turns a failure into hvd::Error.
#pragma once

#include <string>
#include <utility>

namespace hvd::detail {

enum class StatusCode { Ok, Error, Aborted, InProgress };

class Status {
 public:
  static Status ok() { return Status(StatusCode::Ok, {}); }
  static Status error(std::string message) { return Status(StatusCode::Error, std::move(message)); }
  // The runtime shut down (or stalled and was shut down) before the operation finished.
  static Status aborted(std::string message) { return Status(StatusCode::Aborted, std::move(message)); }
  // The op completes its entries itself later (GPU finalizer).
  static Status in_progress() { return Status(StatusCode::InProgress, {}); }

  bool is_ok() const { return code_ == StatusCode::Ok; }
  bool in_progress_now() const { return code_ == StatusCode::InProgress; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  StatusCode code_;
  std::string message_;
};

}  // namespace hvd::detail
