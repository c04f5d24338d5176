// The threads of this process as Linux lists them (/proc/self/task): each one's id and name (at
// most 15 characters), for tests that check which threads exist and what they are called. Empty
// only when /proc cannot be read.
#pragma once

#include <dirent.h>

#include <fstream>
#include <string>
#include <vector>

namespace hvd::test {

struct ProcessThread {
  long tid;
  std::string name;
};

inline std::vector<ProcessThread> threads_of_this_process() {
  std::vector<ProcessThread> out;
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return out;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + entry->d_name + "/comm");
    std::string name;
    if (std::getline(comm, name)) out.push_back({std::stol(entry->d_name), name});
  }
  ::closedir(dir);
  return out;
}

}  // namespace hvd::test
