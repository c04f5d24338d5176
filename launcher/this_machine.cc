#include "this_machine.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>

namespace hvd::launcher {
namespace {

bool same_address(const sockaddr* a, const std::string& text) {
  char buffer[INET6_ADDRSTRLEN] = {0};
  const void* raw = a->sa_family == AF_INET
                        ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(a)->sin_addr)
                        : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
  return inet_ntop(a->sa_family, raw, buffer, sizeof buffer) != nullptr && text == buffer;
}

}  // namespace

bool is_this_machine(const std::string& host) {
  if (host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1") return true;
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) == 0) {
    std::string own = name;
    if (host == own || host == own.substr(0, own.find('.'))) return true;
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool mine = false;
  for (ifaddrs* a = list; a != nullptr && !mine; a = a->ifa_next)
    if (a->ifa_addr != nullptr && (a->ifa_addr->sa_family == AF_INET || a->ifa_addr->sa_family == AF_INET6))
      mine = same_address(a->ifa_addr, host);
  freeifaddrs(list);
  return mine;
}

bool all_on_this_machine(const std::vector<HostSlots>& hosts) {
  return std::all_of(hosts.begin(), hosts.end(),
                     [](const HostSlots& h) { return is_this_machine(h.host); });
}

}  // namespace hvd::launcher
