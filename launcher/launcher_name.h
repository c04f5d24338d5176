// The name the launcher was started under: "horovodrun" when run through that symlink (Horovod's
// launch commands, unchanged), else "hvdrun". Its messages, usage line and version line carry
// it, so a user who typed horovodrun reads horovodrun. Set once by main() before anything runs.
#pragma once

#include <string>

namespace hvd::launcher {

// From argv[0]: its last path component "horovodrun" gives "horovodrun"; anything else "hvdrun".
void set_launcher_name(const std::string& argv0);
const std::string& launcher_name();

}  // namespace hvd::launcher
