#include "core/collective_traits.h"

#include <iterator>

namespace hvd::detail {
namespace {

using R = RequestType;
using P = ResponseType;

// Indexed by RequestType. Allgather and reducescatter fuse as in Horovod (one backend call for
// several tensors); alltoall exchanges splits per tensor and broadcast has a root, so they do not.
//  request        response        name             tensor fuse   cache  perdim first  join   root   reduce alloc
constexpr CollectiveTraits kCollectives[] = {
    {R::Allreduce, P::Allreduce, "ALLREDUCE", true, true, true, false, false, true, false, true, false},
    {R::Allgather, P::Allgather, "ALLGATHER", true, true, true, true, true, false, false, false, true},
    {R::Broadcast, P::Broadcast, "BROADCAST", true, false, true, false, false, false, true, false, false},
    {R::Alltoall, P::Alltoall, "ALLTOALL", true, false, true, true, true, false, false, false, true},
    {R::Reducescatter, P::Reducescatter, "REDUCESCATTER", true, true, true, false, true, false, false, true, true},
    {R::Join, P::Join, "JOIN", false, false, false, false, false, false, false, false, false},
    {R::Barrier, P::Barrier, "BARRIER", false, false, false, false, false, false, false, false, false},
};

constexpr bool table_in_enum_order() {
  for (std::size_t i = 0; i < std::size(kCollectives); ++i)
    if (static_cast<std::size_t>(kCollectives[i].request) != i ||
        static_cast<std::size_t>(kCollectives[i].response) != i)
      return false;
  return true;
}
static_assert(table_in_enum_order(), "kCollectives must list the collectives in RequestType order");
static_assert(static_cast<std::size_t>(ResponseType::Error) == std::size(kCollectives),
              "every RequestType needs its entry, and ResponseType::Error comes last");

}  // namespace

const CollectiveTraits& traits_of(RequestType type) { return kCollectives[static_cast<std::size_t>(type)]; }

const CollectiveTraits* find_traits(ResponseType type) {
  const auto i = static_cast<std::size_t>(type);
  return i < std::size(kCollectives) ? &kCollectives[i] : nullptr;
}

RequestType last_request_type() { return kCollectives[std::size(kCollectives) - 1].request; }

}  // namespace hvd::detail
