#include "core/message.h"

#include "core/collective_traits.h"

namespace hvd::detail {

const char* request_type_name(RequestType type) { return traits_of(type).name; }

const char* response_type_name(ResponseType type) {
  const CollectiveTraits* traits = find_traits(type);
  return traits != nullptr ? traits->name : "ERROR";
}

ResponseType response_type_for(RequestType type) { return traits_of(type).response; }

bool Request::operator==(const Request& o) const { return rank == o.rank && same_collective(o); }

bool Request::same_collective(const Request& o) const {
  return type == o.type && name == o.name && dtype == o.dtype && shape == o.shape && device == o.device &&
         reduce_op == o.reduce_op && prescale_factor == o.prescale_factor &&
         postscale_factor == o.postscale_factor && root == o.root && group == o.group &&
         group_size == o.group_size && process_set_id == o.process_set_id && error == o.error;
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
