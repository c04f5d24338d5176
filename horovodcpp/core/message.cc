#include "core/message.h"

namespace hvd::detail {

const char* request_type_name(RequestType type) {
  switch (type) {
    case RequestType::Allreduce: return "ALLREDUCE";
    case RequestType::Allgather: return "ALLGATHER";
    case RequestType::Broadcast: return "BROADCAST";
    case RequestType::Alltoall: return "ALLTOALL";
    case RequestType::Reducescatter: return "REDUCESCATTER";
    case RequestType::Join: return "JOIN";
    case RequestType::Barrier: return "BARRIER";
  }
  return "UNKNOWN";
}

const char* response_type_name(ResponseType type) {
  switch (type) {
    case ResponseType::Allreduce: return "ALLREDUCE";
    case ResponseType::Allgather: return "ALLGATHER";
    case ResponseType::Broadcast: return "BROADCAST";
    case ResponseType::Alltoall: return "ALLTOALL";
    case ResponseType::Reducescatter: return "REDUCESCATTER";
    case ResponseType::Join: return "JOIN";
    case ResponseType::Barrier: return "BARRIER";
    case ResponseType::Error: return "ERROR";
  }
  return "UNKNOWN";
}

ResponseType response_type_for(RequestType type) {
  switch (type) {
    case RequestType::Allreduce: return ResponseType::Allreduce;
    case RequestType::Allgather: return ResponseType::Allgather;
    case RequestType::Broadcast: return ResponseType::Broadcast;
    case RequestType::Alltoall: return ResponseType::Alltoall;
    case RequestType::Reducescatter: return ResponseType::Reducescatter;
    case RequestType::Join: return ResponseType::Join;
    case RequestType::Barrier: return ResponseType::Barrier;
  }
  return ResponseType::Error;
}

bool Request::operator==(const Request& o) const { return rank == o.rank && same_collective(o); }

bool Request::same_collective(const Request& o) const {
  return type == o.type && name == o.name && dtype == o.dtype && shape == o.shape && device == o.device &&
         reduce_op == o.reduce_op && prescale_factor == o.prescale_factor &&
         postscale_factor == o.postscale_factor && root == o.root && group == o.group &&
         group_size == o.group_size && process_set_id == o.process_set_id;
}

std::int64_t Response::total_bytes() const {
  std::int64_t total = 0;
  for (const auto& s : shapes) total += num_elements(s) * dtype_size(dtype);
  return total;
}

bool Response::operator==(const Response& o) const {
  return type == o.type && names == o.names && shapes == o.shapes && first_dims == o.first_dims &&
         dtype == o.dtype && device == o.device && reduce_op == o.reduce_op &&
         prescale_factor == o.prescale_factor && postscale_factor == o.postscale_factor &&
         root == o.root && error == o.error && last_joined_rank == o.last_joined_rank;
}

std::string display_name(const std::string& name) {
  if (name.size() <= kMaxShownNameChars) return name;
  const std::size_t keep = kMaxShownNameChars / 2;
  return name.substr(0, keep) + "...(" + std::to_string(name.size()) + " characters)..." +
         name.substr(name.size() - keep / 2);
}

}  // namespace hvd::detail
