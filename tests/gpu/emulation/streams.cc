#include "tests/gpu/emulation/streams.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <vector>

#include "tests/gpu/emulation/emulation.h"

namespace hvd::emu {

void Stream::start() {
  std::thread([self = shared_from_this()] {
    name_this_thread("emu-stream");
    self->run();
  }).detach();
}

void Stream::run() {
  for (;;) {
    std::function<void()> work;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return retiring_ || !queue_.empty(); });
      if (queue_.empty()) return;  // retiring and drained
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    random_delay();
    work();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++completed_;
    }
    cv_.notify_all();
  }
}

std::uint64_t Stream::push(std::function<void()> work) {
  std::uint64_t position = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(work));
    position = ++enqueued_;
  }
  cv_.notify_all();
  return position;
}

std::uint64_t Stream::enqueued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return enqueued_;
}

bool Stream::reached(std::uint64_t position) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ >= position;
}

void Stream::wait_for(std::uint64_t position) const {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return completed_ >= position; });
}

void Stream::retire() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    retiring_ = true;
  }
  cv_.notify_all();
}

void Event::record(Stream& stream) {
  std::uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation = ++recorded_;
  }
  enqueue_on(stream, [self = shared_from_this(), generation] { self->complete(generation); });
}

void Event::complete(std::uint64_t generation) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (generation > completed_) completed_ = generation;
  }
  cv_.notify_all();
}

bool Event::query() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ >= recorded_;
}

void Event::wait(std::uint64_t generation) const {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return completed_ >= generation; });
}

void Event::synchronize() const {
  std::uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation = recorded_;
  }
  wait(generation);
}

void Event::make_wait(Stream& stream) {
  std::uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation = recorded_;
  }
  if (generation == 0) return;  // never recorded: nothing to wait for
  enqueue_on(stream, [self = shared_from_this(), generation] { self->wait(generation); });
}

namespace {

struct Registry {
  std::mutex mutex;
  std::map<const void*, std::shared_ptr<Stream>> streams;
  std::map<int, std::shared_ptr<Stream>> legacy;
  std::map<const void*, std::shared_ptr<Event>> events;
  // Handles destroyed and not handed out again: using one is undefined in CUDA (on the first real
  // GPU run, cudaFreeAsync on a destroyed stream crashed), so the emulation stops the process.
  std::set<const void*> destroyed;
  std::vector<std::atomic<int>> sticky;
  Registry() : sticky(static_cast<std::size_t>(config().devices > 0 ? config().devices : 1)) {}
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: detached workers may outlive main
  return *r;
}

}  // namespace

std::shared_ptr<Stream> create_stream(int device, bool blocking) {
  auto stream = std::make_shared<Stream>(device, blocking, false);
  stream->start();
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().streams[stream.get()] = stream;
  registry().destroyed.erase(stream.get());
  return stream;
}

std::shared_ptr<Stream> legacy_stream(int device) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto& stream = r.legacy[device];
  if (!stream) {
    stream = std::make_shared<Stream>(device, true, true);
    stream->start();
  }
  return stream;
}

std::shared_ptr<Stream> resolve_stream(cudaStream_t handle) {
  if (handle == nullptr || handle == cudaStreamLegacy || handle == cudaStreamPerThread)
    return legacy_stream(current_device());
  std::lock_guard<std::mutex> lock(registry().mutex);
  auto it = registry().streams.find(handle);
  if (it != registry().streams.end()) return it->second;
  if (registry().destroyed.count(handle) != 0) {
    std::fprintf(stderr, "emulated CUDA: stream %p used after cudaStreamDestroy (undefined in CUDA, where it "
                 "crashes)\n", static_cast<const void*>(handle));
    std::abort();
  }
  return nullptr;
}

bool destroy_stream(cudaStream_t handle) {
  std::shared_ptr<Stream> stream;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    auto it = registry().streams.find(handle);
    if (it == registry().streams.end()) return false;
    stream = it->second;
    registry().streams.erase(it);
    registry().destroyed.insert(handle);
  }
  stream->retire();  // as in CUDA: returns at once, the work already enqueued still runs
  return true;
}

std::uint64_t enqueue_on(Stream& stream, std::function<void()> work) {
  std::vector<std::pair<std::shared_ptr<Stream>, std::uint64_t>> after;
  if (stream.legacy()) {
    std::lock_guard<std::mutex> lock(registry().mutex);
    for (const auto& [handle, other] : registry().streams)
      if (other->device() == stream.device() && other->blocking()) after.emplace_back(other, other->enqueued());
  } else if (stream.blocking()) {
    auto legacy = legacy_stream(stream.device());
    after.emplace_back(legacy, legacy->enqueued());
  }
  if (after.empty()) return stream.push(std::move(work));
  return stream.push([after = std::move(after), work = std::move(work)] {
    for (const auto& [other, position] : after) other->wait_for(position);
    work();
  });
}

void synchronize_device(int device) {
  std::vector<std::pair<std::shared_ptr<Stream>, std::uint64_t>> streams;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    for (const auto& [handle, stream] : registry().streams)
      if (stream->device() == device) streams.emplace_back(stream, stream->enqueued());
    auto legacy = registry().legacy.find(device);
    if (legacy != registry().legacy.end()) streams.emplace_back(legacy->second, legacy->second->enqueued());
  }
  for (const auto& [stream, position] : streams) stream->wait_for(position);
}

std::shared_ptr<Event> create_event() {
  auto event = std::make_shared<Event>();
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().events[event.get()] = event;
  return event;
}

std::shared_ptr<Event> resolve_event(cudaEvent_t handle) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  auto it = registry().events.find(handle);
  return it == registry().events.end() ? nullptr : it->second;
}

bool destroy_event(cudaEvent_t handle) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  return registry().events.erase(handle) == 1;
}

cudaError_t sticky_error(int device) {
  auto& sticky = registry().sticky;
  if (device < 0 || static_cast<std::size_t>(device) >= sticky.size()) return cudaSuccess;
  return static_cast<cudaError_t>(sticky[static_cast<std::size_t>(device)].load());
}

void set_sticky_error(int device, cudaError_t error) {
  auto& sticky = registry().sticky;
  if (device >= 0 && static_cast<std::size_t>(device) < sticky.size())
    sticky[static_cast<std::size_t>(device)].store(static_cast<int>(error));
}

}  // namespace hvd::emu
