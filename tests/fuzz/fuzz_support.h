// What the fuzz programs (codec_fuzz.cc, commit_fuzz.cc) share when they run without libFuzzer:
// the command line `PROGRAM SECONDS [SEED]`, seeded so that a failure can be replayed, and the
// format-blind edits that turn a valid input into a damaged one, for bytes held in a
// std::vector<std::uint8_t> or a std::string alike. Each program adds the edits that know its
// format (extreme sizes in the codec, extreme header numbers in a commit file).
#pragma once

#include <chrono>
#include <cstdint>
#include <random>

namespace hvd::fuzz {

using Rng = std::mt19937_64;

// One run's length and seed, from `PROGRAM SECONDS [SEED]` (10 s and a random seed when left
// out), announced as "<what> fuzz: S s, seed N" so a failure can be replayed with the seed.
class FuzzRun {
 public:
  FuzzRun(const char* what, int argc, char** argv);
  std::uint64_t seed() const { return seed_; }
  bool time_left() const { return std::chrono::steady_clock::now() < end_; }

 private:
  std::uint64_t seed_;
  std::chrono::steady_clock::time_point end_;
};

template <class Bytes>
using Element = typename Bytes::value_type;

template <class Bytes>
void flip_bit(Bytes& bytes, Rng& rng) {
  if (bytes.empty()) return;
  const std::size_t at = rng() % bytes.size();
  bytes[at] ^= static_cast<Element<Bytes>>(1u << (rng() % 8));
}

template <class Bytes>
void cut_tail(Bytes& bytes, Rng& rng) {
  if (!bytes.empty()) bytes.resize(rng() % bytes.size());
}

// 1 to 8 copies of one random byte, anywhere.
template <class Bytes>
void insert_run(Bytes& bytes, Rng& rng) {
  const std::size_t at = bytes.empty() ? 0 : rng() % bytes.size();
  const std::size_t length = 1 + rng() % 8;
  const auto value = static_cast<Element<Bytes>>(rng());
  bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(at), length, value);
}

template <class Bytes>
void overwrite_byte(Bytes& bytes, Rng& rng) {
  if (bytes.empty()) return;
  const std::size_t at = rng() % bytes.size();
  bytes[at] = static_cast<Element<Bytes>>(rng());
}

// 0 to max_size - 1 random bytes.
template <class Bytes>
Bytes random_bytes(Rng& rng, std::size_t max_size) {
  Bytes bytes(rng() % max_size, Element<Bytes>{});
  for (auto& b : bytes) b = static_cast<Element<Bytes>>(rng());
  return bytes;
}

// 1 to max_edits edits of `bytes`, each, equally likely, the program's own `format_edit(bytes,
// rng)` or one of the format-blind ones above.
template <class Bytes, class FormatEdit>
void mutate(Bytes& bytes, Rng& rng, int max_edits, FormatEdit format_edit) {
  const int edits = 1 + static_cast<int>(rng() % static_cast<std::uint64_t>(max_edits));
  for (int i = 0; i < edits; ++i) {
    switch (rng() % 5) {
      case 0: format_edit(bytes, rng); break;
      case 1: flip_bit(bytes, rng); break;
      case 2: cut_tail(bytes, rng); break;
      case 3: insert_run(bytes, rng); break;
      default: overwrite_byte(bytes, rng);
    }
  }
}

}  // namespace hvd::fuzz
