#include "launcher_name.h"

namespace hvd::launcher {
namespace {

std::string& name() {
  static std::string value = "hvdrun";
  return value;
}

}  // namespace

void set_launcher_name(const std::string& argv0) {
  const auto slash = argv0.find_last_of('/');
  const std::string base = slash == std::string::npos ? argv0 : argv0.substr(slash + 1);
  name() = base == "horovodrun" ? "horovodrun" : "hvdrun";
}

const std::string& launcher_name() { return name(); }

}  // namespace hvd::launcher
