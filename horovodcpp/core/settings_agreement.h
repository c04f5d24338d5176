// Settings every rank must share (declared SettingScope::Shared in settings_table.cc: they shape
// the wire protocol or the collective schedule: fusion threshold, cache capacity, cycle time,
// hierarchical allreduce, the backends chosen, ...), and the backends compiled in.
// Ranks started with different environments (plain mpirun, per-node env files, MPMD) would
// otherwise fuse differently or index different cache slots and compute with wrong data.
// Checked once, collectively, at hvd::init() on the background thread.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/control_channel.h"
#include "core/settings.h"

namespace hvd::detail {

// (variable, effective value) for every Shared setting, in table order, then the backends.
using AgreedValues = std::vector<std::pair<std::string, std::string>>;

AgreedValues agreed_values(const Settings& settings, const std::string& backends);

// Collective: every rank sends its values to the coordinator, which compares them and
// broadcasts the verdict. Returns "" when every rank agrees, else the same message on every
// rank, naming each differing variable and each rank's value.
std::string check_settings_agree(ControlChannel& channel, const AgreedValues& mine);

// The comparison itself (coordinator side): values[rank] for every rank.
std::string describe_disagreement(const std::vector<AgreedValues>& values);

}  // namespace hvd::detail
