#include "process_tree.h"

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

namespace hvd::launcher {
namespace {

// ppid of every process, read from /proc/PID/stat (the field after the parenthesised name).
std::multimap<pid_t, pid_t> children_by_parent() {
  std::multimap<pid_t, pid_t> children;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return children;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    long pid = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    std::ifstream stat("/proc/" + std::string(entry->d_name) + "/stat");
    std::string text;
    if (!std::getline(stat, text)) continue;
    auto close = text.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(text.c_str() + close + 1, " %c %ld", &state, &ppid) != 2) continue;
    if (state == 'Z') continue;  // already dead, only waiting to be reaped
    children.emplace(static_cast<pid_t>(ppid), static_cast<pid_t>(pid));
  }
  closedir(dir);
  return children;
}

}  // namespace

std::vector<pid_t> descendants_of(pid_t root) {
  const auto children = children_by_parent();
  std::vector<pid_t> found;
  std::vector<pid_t> frontier = {root};
  while (!frontier.empty()) {
    pid_t parent = frontier.back();
    frontier.pop_back();
    auto range = children.equal_range(parent);
    for (auto it = range.first; it != range.second; ++it) {
      found.push_back(it->second);
      frontier.push_back(it->second);
    }
  }
  return found;
}

void kill_all_descendants() {
  const pid_t self = getpid();
  for (int round = 0; round < 3; ++round) {
    auto tree = descendants_of(self);
    if (tree.empty()) break;
    for (pid_t p : tree) kill(p, SIGSTOP);
    tree = descendants_of(self);  // now complete: nothing in it can fork
    for (pid_t p : tree) kill(p, SIGKILL);
    usleep(20 * 1000);
  }
}

bool become_subreaper() { return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0; }

int reap_children() {
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  return static_cast<int>(descendants_of(getpid()).size());
}

}  // namespace hvd::launcher
