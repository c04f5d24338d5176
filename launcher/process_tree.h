// Finds and ends the processes hvdrun started, through /proc (Linux). hvdrun makes itself a
// child subreaper, so ranks orphaned by a dying mpirun become its children and are found here.
// Called from the supervisor on the main thread.
#pragma once

#include <sys/types.h>

#include <vector>

namespace hvd::launcher {

// Every living descendant of `root` (not root itself), parents before children.
std::vector<pid_t> descendants_of(pid_t root);

// SIGKILLs every descendant of the calling process (stopping them first so none forks in
// between), repeating a few times to catch late forks. Does not reap them.
void kill_all_descendants();

// Makes orphaned descendants re-parent to this process instead of init. False if unsupported.
bool become_subreaper();

// Reaps any exited children without blocking; returns how many are still alive.
int reap_children();

}  // namespace hvd::launcher
