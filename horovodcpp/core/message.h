// The negotiation messages: a Request says "this rank is ready to run this collective on this
// tensor"; a Response tells every rank what to run, in an order identical on all ranks.
// Plain data; encoded on the wire by codec.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "horovodcpp/horovod.h"

namespace hvd::detail {

enum class RequestType : std::uint8_t { Allreduce, Allgather, Broadcast, Alltoall, Reducescatter, Join, Barrier };
enum class ResponseType : std::uint8_t { Allreduce, Allgather, Broadcast, Alltoall, Reducescatter, Join, Barrier, Error };

// Reserved names for the requests behind hvd::join() and hvd::barrier().
constexpr const char* kJoinTensorName = "__hvd_join";
constexpr const char* kBarrierTensorPrefix = "__hvd_barrier";

const char* request_type_name(RequestType type);    // "ALLREDUCE"
// A tensor or group name as error messages show it: names past kMaxShownNameChars are cut,
// keeping the start and end and saying how long the name was.
constexpr std::size_t kMaxShownNameChars = 200;
std::string display_name(const std::string& name);
const char* response_type_name(ResponseType type);  // "ALLREDUCE", ..., "ERROR"
ResponseType response_type_for(RequestType type);

struct Request {
  std::int32_t rank = 0;
  RequestType type = RequestType::Allreduce;
  std::string name;
  DataType dtype = DataType::Float32;
  TensorShape shape;
  std::int32_t device = kCpuDevice;
  ReduceOp reduce_op = ReduceOp::Sum;
  double prescale_factor = 1.0;
  double postscale_factor = 1.0;
  std::int32_t root = 0;
  std::string group;  // non-empty for grouped allreduce: every member carries the group's name
  std::int32_t group_size = 0;
  // How long the rank held it before sending it to the coordinator (a cached request that waited
  // for the others): the stall inspector counts from the submission, not from the arrival.
  double waited_seconds = 0;
  // The process set it belongs to (0: the global set); each set negotiates on its own.
  std::int32_t process_set_id = 0;
  // Non-empty: this rank will not run the collective, and why (it failed here before it could
  // be submitted, or a front end withdrew it). It stands in for the rank's request, so the name
  // completes, with an Error response naming this rank and the reason, on every rank that
  // submitted it. See Note [A collective one rank cannot run fails on every rank].
  std::string error;
  // Local only (neither encoded nor compared): when this rank submitted it. Cycles start on
  // demand, so a request can wait for one; the stall clock of a cached request starts here.
  std::chrono::steady_clock::time_point submitted{};

  bool operator==(const Request& other) const;
  bool operator!=(const Request& other) const { return !(*this == other); }
  // The same collective on the same tensor, whichever rank asks: what the response cache keys on.
  bool same_collective(const Request& other) const;
};

struct RequestList {
  std::vector<Request> requests;
  bool shutdown = false;
};

struct Response {
  ResponseType type = ResponseType::Allreduce;
  std::vector<std::string> names;  // several when fused
  std::vector<TensorShape> shapes;  // one per name: lets joined ranks contribute zeros
  std::vector<std::int64_t> first_dims;  // allgather: first dimension on each rank, per tensor when fused
  DataType dtype = DataType::Float32;
  std::int32_t device = kCpuDevice;
  ReduceOp reduce_op = ReduceOp::Sum;
  double prescale_factor = 1.0;
  double postscale_factor = 1.0;
  std::int32_t root = 0;
  std::string error;  // ResponseType::Error
  std::int32_t last_joined_rank = -1;  // ResponseType::Join

  std::int64_t total_bytes() const;  // sum over tensors of elements * dtype size
  bool operator==(const Response& other) const;
};

struct ResponseList {
  std::vector<Response> responses;
  bool shutdown = false;
  std::string shutdown_reason;  // set when the runtime stops for a reason other than a request
  std::vector<int> shutdown_ranks;  // the ranks whose shutdown wish was agreed (not on the wire)
};

}  // namespace hvd::detail
