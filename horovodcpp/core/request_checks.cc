#include "core/request_checks.h"

#include <algorithm>
#include <sstream>

#include "core/collective_traits.h"

namespace hvd::detail {
namespace {

std::string device_kind(int device) {
  return device == kCpuDevice ? "host" : "GPU " + std::to_string(device);
}

std::string scale(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// "Mismatched <what> for tensor 'x' (ALLREDUCE): rank 0 has A, rank 3 has B"
std::string mismatch(const char* what, const Request& a, const Request& b, const std::string& va,
                     const std::string& vb) {
  std::ostringstream out;
  out << "Mismatched " << what << " for tensor '" << display_name(a.name) << "' (" << request_type_name(a.type)
      << "): rank " << a.rank << " has " << va << ", rank " << b.rank << " has " << vb;
  return out.str();
}

std::string trailing_dims(const TensorShape& s) {
  return shape_string(TensorShape(s.begin() + (s.empty() ? 0 : 1), s.end()));
}

}  // namespace

std::string check_requests(const std::vector<Request>& arrived, int size, const std::vector<int>& joined) {
  // Compare against the lowest rank, so the message does not depend on arrival order. Requests
  // that arrived in one gather are in rank order already; sorting them would be the slow path's
  // largest cost (Note [The coordinator's work is linear in ranks x tensors]).
  std::vector<const Request*> requests;
  requests.reserve(arrived.size());
  for (const Request& r : arrived) requests.push_back(&r);
  const auto by_rank = [](const Request* x, const Request* y) { return x->rank < y->rank; };
  if (!std::is_sorted(requests.begin(), requests.end(), by_rank)) std::sort(requests.begin(), requests.end(), by_rank);
  const Request& a = *requests.front();
  // A rank that cannot run it said so in its request: that is the error, whatever else differs.
  std::vector<int> failed;
  const Request* first = nullptr;
  for (const Request* r : requests) {
    if (r->error.empty()) continue;
    failed.push_back(r->rank);
    if (first == nullptr) first = r;
  }
  if (first != nullptr) {
    std::ostringstream out;
    out << request_type_name(first->type) << " of '" << display_name(first->name) << "' cannot run: rank " << first->rank
        << " did not submit it (" << first->error << ")";
    if (failed.size() > 1) {
      out << "; ranks";
      for (std::size_t i = 0; i < failed.size(); ++i) out << (i ? ", " : " ") << failed[i];
      out << " did not submit it either";
    }
    return out.str();
  }
  const CollectiveTraits& traits = traits_of(a.type);
  for (const Request* each : requests) {
    const Request& b = *each;
    if (b.type != a.type)
      return mismatch("collective operations", a, b, request_type_name(a.type), request_type_name(b.type));
    if (b.dtype != a.dtype) return mismatch("data types", a, b, dtype_name(a.dtype), dtype_name(b.dtype));
    if ((a.device == kCpuDevice) != (b.device == kCpuDevice))
      return mismatch("devices", a, b, device_kind(a.device), device_kind(b.device));
    if (traits.per_rank_first_dim) {
      if (a.shape.empty() || b.shape.empty())
        return "Tensor '" + display_name(a.name) + "' (" + request_type_name(a.type) + ") needs at least one dimension; rank " +
               std::to_string(a.shape.empty() ? a.rank : b.rank) + " passed a scalar";
      if (a.shape.size() != b.shape.size() || trailing_dims(a.shape) != trailing_dims(b.shape))
        return mismatch("shapes (all but the first dimension must agree)", a, b, shape_string(a.shape),
                        shape_string(b.shape));
    } else if (b.shape != a.shape) {
      return mismatch("shapes", a, b, shape_string(a.shape), shape_string(b.shape));
    }
    if (traits.reduces && b.reduce_op != a.reduce_op)
      return mismatch("reduce ops", a, b, reduce_op_name(a.reduce_op), reduce_op_name(b.reduce_op));
    if (b.prescale_factor != a.prescale_factor)
      return mismatch("prescale factors", a, b, scale(a.prescale_factor), scale(b.prescale_factor));
    if (b.postscale_factor != a.postscale_factor)
      return mismatch("postscale factors", a, b, scale(a.postscale_factor), scale(b.postscale_factor));
    if (traits.needs_root && b.root != a.root)
      return mismatch("broadcast roots", a, b, "root " + std::to_string(a.root), "root " + std::to_string(b.root));
    if (b.group != a.group)
      return mismatch("groups", a, b, "'" + display_name(a.group) + "'", "'" + display_name(b.group) + "'");
  }
  if (traits.needs_first_dim && !traits.per_rank_first_dim && a.shape.empty())
    return "Tensor '" + display_name(a.name) + "' (" + traits.name + ") needs at least one dimension";
  if (!joined.empty() && !traits.joinable) {
    std::ostringstream out;
    out << "Tensor '" << display_name(a.name) << "' (" << request_type_name(a.type) << ") cannot run while rank"
        << (joined.size() > 1 ? "s " : " ");
    for (std::size_t i = 0; i < joined.size(); ++i) out << (i ? ", " : "") << joined[i];
    out << (joined.size() > 1 ? " have" : " has") << " joined: only allreduce accepts joined ranks (of " << size << ")";
    return out.str();
  }
  return {};
}

}  // namespace hvd::detail
