#include "tests/gpu/emulation/emulation.h"

#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

namespace hvd::emu {
namespace {

int env_int(const char* name, int fallback, int lowest) {
  const char* raw = std::getenv(name);
  if (raw == nullptr || *raw == '\0') return fallback;
  char* end = nullptr;
  const long value = std::strtol(raw, &end, 10);
  if (*end != '\0' || value < lowest || value > 1 << 20)
    fatal(std::string(name) + "='" + raw + "' must be an integer >= " + std::to_string(lowest));
  return static_cast<int>(value);
}

std::string env_name(const char* name, const char* fallback) {
  const char* raw = std::getenv(name);
  if (raw == nullptr || *raw == '\0') return fallback;
  const std::string value = raw;
  if (value.size() > 64 || value.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") !=
                               std::string::npos)
    fatal(std::string(name) + "='" + raw + "' must be 1 to 64 letters, digits or underscores");
  return value;
}

Config load() {
  Config c;
  c.devices = env_int("HVD_EMU_DEVICES", 2, 0);
  c.max_delay_us = env_int("HVD_EMU_MAX_DELAY_US", 200, 0);
  c.peer_aborts_unseen = env_int("HVD_EMU_PEER_ABORTS_UNSEEN", 0, 0) != 0;
  const int seed = env_int("HVD_EMU_SEED", 0, 0);
  c.seed = seed != 0 ? static_cast<std::uint64_t>(seed)
                     : static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  c.seed ^= static_cast<std::uint64_t>(getpid()) << 20;
  c.segment_prefix = env_name("HVD_EMU_SHM_PREFIX", "hvdemu");
  return c;
}

thread_local int t_device = 0;

}  // namespace

const Config& config() {
  static const Config c = load();
  return c;
}

void fatal(const std::string& what) {
  std::fprintf(stderr, "EMULATED CUDA: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

void name_this_thread(const char* name) { pthread_setname_np(pthread_self(), name); }

void random_delay() {
  const int most = config().max_delay_us;
  if (most <= 0) return;
  thread_local std::mt19937_64 generator(config().seed ^ std::hash<std::thread::id>()(std::this_thread::get_id()));
  std::uniform_int_distribution<int> pick(0, most);
  std::this_thread::sleep_for(std::chrono::microseconds(pick(generator)));
}

int current_device() { return t_device; }
void set_current_device(int device) { t_device = device; }

}  // namespace hvd::emu
