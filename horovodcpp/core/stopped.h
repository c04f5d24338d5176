// The message of every operation refused or failed because the runtime has stopped: one phrase
// whichever path refused it (the API's check, a submission racing the stop, the closed queue), so
// users and their scripts find it, followed by the stop's reason.
#pragma once

#include <string>

namespace hvd::detail {

inline std::string stopped_message(const std::string& reason) { return "horovodcpp has stopped: " + reason; }

}  // namespace hvd::detail
