// Fuzzes the elastic commit loader (Note [What the commit store trusts], commit_store.h): bytes
// are parsed as a commit file named for commit 8, in memory (parse_commit) and, for one input in
// eight, as a real file in a store (CommitStore::read and newest_id, beside an intact commit 7).
// Nothing may crash, overflow or allocate more than the input (run under ASan and UBSan); both
// loaders must agree; and an accepted commit must be exactly what its header says: its id, a
// world size >= 1, and a payload of the stated length whose checksum matches.
//
// Built with clang's -fsanitize=fuzzer this is a libFuzzer target; otherwise the main() below
// drives it: mutations of valid commits (numbers in the header swapped for extreme ones, bytes
// flipped, cut, inserted) and random bytes, for a bounded time, seeded so a failure can be
// replayed (hvd_commit_fuzz SECONDS [SEED]).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "core/logging.h"
#include "elastic/commit_store.h"
#include "fuzz_support.h"

using namespace hvd::detail;

namespace {

void fail(const std::string& why) {
  std::fprintf(stderr, "commit fuzz: FAIL: %s\n", why.c_str());
  std::abort();
}

const std::string& store_dir() {
  static const std::string dir = "/tmp/hvd-commit-fuzz-" + std::to_string(getpid());
  return dir;
}

const CommitStore& store() {
  static const CommitStore s = [] {
    CommitStore made(store_dir());
    made.write({7, 3, "the commit before"});
    return made;
  }();
  return s;
}

std::uint64_t fnv1a(const std::string& bytes) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ULL;
  return h;
}

void check_accepted(const StoredCommit& c, const std::string& bytes, const char* who) {
  if (c.id != 8) fail(std::string(who) + " accepted a commit whose id is " + std::to_string(c.id));
  if (c.world_size < 1) fail(std::string(who) + " accepted world size " + std::to_string(c.world_size));
  if (c.payload.size() >= bytes.size() || bytes.compare(bytes.size() - c.payload.size(), c.payload.size(), c.payload) != 0)
    fail(std::string(who) + " accepted a payload that is not the file's tail");
  const std::string header = bytes.substr(0, bytes.size() - c.payload.size());
  if (header.back() != '\n' || header.find('\n') != header.size() - 1 || header.size() > 160)
    fail(std::string(who) + " accepted a header that is not one short line");
  char sum[32];
  std::snprintf(sum, sizeof sum, "fnv1a=%016llx\n", static_cast<unsigned long long>(fnv1a(c.payload)));
  if (header.size() < std::string(sum).size() || header.compare(header.size() - std::string(sum).size(), std::string::npos, sum) != 0)
    fail(std::string(who) + " accepted a payload whose checksum is not the header's");
}

void check(const std::uint8_t* data, std::size_t size, bool on_disk) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::string problem;
  const auto parsed = parse_commit(bytes, 8, &problem);
  if (parsed) check_accepted(*parsed, bytes, "parse_commit");
  if (!parsed && problem.empty()) fail("parse_commit refused without saying why");
  if (!on_disk) return;
  {
    std::ofstream out(store().path_of(8), std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  std::string read_problem;
  const auto read = store().read(8, &read_problem);
  if (read.has_value() != parsed.has_value())
    fail("the file loader and the parser disagree: " + (read ? std::string("file accepted") : read_problem) + " / " +
         (parsed ? std::string("parser accepted") : problem));
  if (read) {
    check_accepted(*read, bytes, "CommitStore::read");
    if (read->payload != parsed->payload || read->world_size != parsed->world_size) fail("the loaders read different commits");
  }
  std::vector<std::string> skipped;
  const std::int64_t newest = store().newest_id(&skipped);
  if (newest != (read ? 8 : 7)) fail("newest_id " + std::to_string(newest) + " after " + (read ? "an accepted" : "a refused") + " commit 8");
}

std::vector<std::string> seeds() {
  const CommitStore s(store_dir() + "-seeds");
  std::vector<std::string> out;
  const std::vector<StoredCommit> commits = {{8, 4, "payload"}, {8, 1, ""}, {8, 2147483647, std::string(300, '\0')},
                                             {8, 16, std::string("\n\nHVDCOMMIT1 id=8\n", 17)}};
  for (const auto& c : commits) {
    s.write(c);
    std::ifstream in(s.path_of(8), std::ios::binary);
    out.emplace_back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  std::system(("rm -rf " + s.dir()).c_str());
  return out;
}

// Replaces the number after one of the header's "key=" with an extreme one.
void swap_number(std::string& bytes, hvd::fuzz::Rng& rng) {
  static const char* keys[] = {"id=", "size=", "bytes=", "fnv1a="};
  static const char* values[] = {"0", "-1", "18446744073709551615", "18446744073709551616", "99999999999999",
                                 "4000000000", "9223372036854775807", "2147483648", "00000000000000000008",
                                 "+8", " 8", "8 ", "", "0x10", "ffffffffffffffff", "1e3"};
  const std::string key = keys[rng() % 4];
  const auto at = bytes.find(key);
  if (at == std::string::npos) return;
  const auto begin = at + key.size();
  auto end = bytes.find_first_of(" \n", begin);
  if (end == std::string::npos) end = bytes.size();
  bytes.replace(begin, end - begin, values[rng() % (sizeof values / sizeof *values)]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static long calls = 0;
  check(data, size, calls++ % 8 == 0);
  return 0;
}

#ifndef HVD_LIBFUZZER
int main(int argc, char** argv) {
  const hvd::fuzz::FuzzRun run("commit", argc, argv);
  configure_logging(0, "error", false);  // the loader warns about every damaged file it skips
  hvd::fuzz::Rng rng(run.seed());
  const auto corpus = seeds();
  for (const auto& c : corpus) LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(c.data()), c.size());
  long inputs = 0, accepted = 0;
  while (run.time_left()) {
    for (int batch = 0; batch < 64; ++batch, ++inputs) {
      std::string bytes;
      if (rng() % 16 == 0) {
        bytes = hvd::fuzz::random_bytes<std::string>(rng, 400);
      } else {
        bytes = corpus[rng() % corpus.size()];
        hvd::fuzz::mutate(bytes, rng, 3, swap_number);
      }
      std::string problem;
      accepted += parse_commit(bytes, 8, &problem).has_value() ? 1 : 0;
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    }
  }
  std::system(("rm -rf " + store_dir()).c_str());
  std::printf("commit fuzz: %ld inputs (%ld accepted), no failure\n", inputs, accepted);
  return 0;
}
#endif
