#include "hosts.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "horovodcpp/horovod.h"

namespace hvd::launcher {
namespace {

// A slot count is a whole number >= 1; anything else is reported by the caller.
bool parse_slots(const std::string& text, int* slots) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return false;
  errno = 0;
  long v = std::strtol(text.c_str(), nullptr, 10);
  if (errno != 0 || v < 1 || v > 1000000) return false;
  *slots = static_cast<int>(v);
  return true;
}

// "host" or "host:N" -> HostSlots; the error text says what was wrong, without context.
bool parse_host_slots(const std::string& entry, HostSlots* out, std::string* why) {
  auto colon = entry.find(':');
  out->host = entry.substr(0, colon);
  out->slots = 1;
  *why = host_name_problem(out->host);
  if (!why->empty()) return false;
  if (colon != std::string::npos && !parse_slots(entry.substr(colon + 1), &out->slots)) {
    *why = "bad slot count '" + entry.substr(colon + 1) + "' for host '" + out->host +
           "' (a whole number >= 1)";
    return false;
  }
  return true;
}

std::string strip(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

}  // namespace

std::string host_name_problem(const std::string& host) {
  const std::string bad = "bad host name '" + host + "'";
  if (host.empty()) return bad + " (empty)";
  if (host.size() > 255) return bad + " (longer than 255 characters)";
  for (char c : host)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_'))
      return bad + ": a host name has only letters, digits, '.', '-' and '_'";
  return {};
}

std::vector<HostSlots> parse_host_list(const std::string& text) {
  std::vector<HostSlots> hosts;
  if (strip(text).empty()) throw hvd::Error("-H/--hosts: empty host list (expected host:slots,...)");
  if (text.back() == ',')
    throw hvd::Error("-H/--hosts '" + text + "': empty entry after the last ','");
  std::stringstream ss(text);
  std::string entry;
  while (std::getline(ss, entry, ',')) {
    HostSlots hs;
    std::string why;
    if (!parse_host_slots(strip(entry), &hs, &why))
      throw hvd::Error("-H/--hosts '" + text + "': " + why + " (expected host:slots,...)");
    hosts.push_back(hs);
  }
  return hosts;
}

std::vector<HostSlots> parse_hostfile(std::istream& in, const std::string& source) {
  std::vector<HostSlots> hosts;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = strip(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    std::istringstream words(line);
    std::string first, second, extra;
    words >> first >> second >> extra;
    HostSlots hs;
    std::string why;
    bool good = parse_host_slots(first, &hs, &why);
    if (good && !second.empty()) {
      if (first.find(':') != std::string::npos || second.rfind("slots=", 0) != 0) {
        good = false;
        why = "unexpected '" + second + "'";
      } else if (!parse_slots(second.substr(6), &hs.slots)) {
        good = false;
        why = "bad slot count '" + second.substr(6) + "' (a whole number >= 1)";
      }
    }
    if (good && !extra.empty()) {
      good = false;
      why = "unexpected '" + extra + "'";
    }
    if (!good)
      throw hvd::Error("hostfile " + source + " line " + std::to_string(number) + ": " + why +
                       " in '" + line + "' (expected 'HOST slots=N')");
    hosts.push_back(hs);
  }
  if (hosts.empty()) throw hvd::Error("hostfile " + source + " lists no hosts");
  return hosts;
}

std::vector<HostSlots> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw hvd::Error("cannot read hostfile " + path);
  return parse_hostfile(in, path);
}

int total_slots(const std::vector<HostSlots>& hosts) {
  int total = 0;
  for (const auto& h : hosts) total += h.slots;
  return total;
}

std::string host_list_string(const std::vector<HostSlots>& hosts) {
  std::string out;
  for (const auto& h : hosts) {
    if (!out.empty()) out += ',';
    out += h.host + ":" + std::to_string(h.slots);
  }
  return out;
}

}  // namespace hvd::launcher
