// Finding a program the way execvp would, through the PATH of a given environment, so hvdrun can
// refuse a missing mpirun, srun or rank program before anything starts. Main thread only.
#pragma once

#include <string>

#include "environment.h"

namespace hvd::launcher {

// The full path of `program` (as execvp would find it through PATH), or "" when not found.
// A name with a '/' is checked as it is.
std::string find_program(const std::string& program, const Environment& env);
// Why find_program() found nothing: "not found ...", or the file that exists but is a directory
// or lacks execute permission.
std::string why_not_runnable(const std::string& program, const Environment& env);

}  // namespace hvd::launcher
