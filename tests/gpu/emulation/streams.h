// Emulated CUDA streams and events (test-only). A stream is a FIFO worker thread that sleeps a
// random delay before each operation; an event completes when the stream that recorded it
// reaches the record. The legacy default stream (0, cudaStreamLegacy, cudaStreamPerThread) of a
// device waits for the work already enqueued on the device's blocking streams and they for its,
// as CUDA's implicit synchronization does; non-blocking streams are ordered by events only.
// Handles are the objects' addresses; the registry keeps every live one, so a stale or foreign
// handle is an error rather than a crash. Thread-safe.
#pragma once

#include <cuda_runtime.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace hvd::emu {

class Stream : public std::enable_shared_from_this<Stream> {
 public:
  Stream(int device, bool blocking, bool legacy) : device_(device), blocking_(blocking), legacy_(legacy) {}
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int device() const { return device_; }
  bool blocking() const { return blocking_; }
  bool legacy() const { return legacy_; }

  void start();  // the worker holds a reference to the stream until it exits
  // Appends `work` (no implicit ordering; see enqueue_on()). Returns its position, from 1.
  std::uint64_t push(std::function<void()> work);
  std::uint64_t enqueued() const;
  bool reached(std::uint64_t position) const;
  void wait_for(std::uint64_t position) const;  // blocks the calling thread
  void retire();                                // the worker exits once the queue is empty

 private:
  void run();

  const int device_;
  const bool blocking_, legacy_;
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::uint64_t enqueued_ = 0, completed_ = 0;
  bool retiring_ = false;
};

class Event : public std::enable_shared_from_this<Event> {
 public:
  void record(Stream& stream);
  bool query() const;
  void synchronize() const;
  void make_wait(Stream& stream);  // `stream` waits for the latest record, if any

 private:
  void complete(std::uint64_t generation);
  void wait(std::uint64_t generation) const;

  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  std::uint64_t recorded_ = 0, completed_ = 0;
};

// Streams.
std::shared_ptr<Stream> create_stream(int device, bool blocking);
// The stream behind a handle (0 and the special handles: the current device's legacy stream);
// null for an unknown handle.
std::shared_ptr<Stream> resolve_stream(cudaStream_t handle);
std::shared_ptr<Stream> legacy_stream(int device);
bool destroy_stream(cudaStream_t handle);
// Enqueues with the legacy stream's implicit ordering; returns the position.
std::uint64_t enqueue_on(Stream& stream, std::function<void()> work);
// Waits until every stream of `device` has run what is enqueued now.
void synchronize_device(int device);

// Events.
std::shared_ptr<Event> create_event();
std::shared_ptr<Event> resolve_event(cudaEvent_t handle);
bool destroy_event(cudaEvent_t handle);

// A device's sticky error (a fault in device work poisons the context, as on a GPU).
cudaError_t sticky_error(int device);
void set_sticky_error(int device, cudaError_t error);

}  // namespace hvd::emu
