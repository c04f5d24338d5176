// The commit store (atomic, a damaged or half-written newest file is never taken) and the
// elastic sampler (resharding mid-epoch at another world size neither repeats nor skips a
// sample), in one process without MPI.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <set>

#include "elastic/commit_store.h"
#include "horovodcpp/elastic.h"

using hvd::detail::CommitStore;
using hvd::elastic::ElasticSampler;
using Catch::Matchers::Contains;

namespace {

std::string fresh_dir(const std::string& tag) {
  const std::string dir = "/tmp/hvd-elastic-store-" + tag + "-" + std::to_string(getpid());
  std::system(("rm -rf " + dir).c_str());
  return dir;
}

}  // namespace

TEST_CASE("commits are written whole, the newest intact one is found, old ones pruned") {
  const std::string base = fresh_dir("basic");
  const CommitStore store(base + "/nested/dir");
  CHECK(store.newest_id() == 0);
  for (int id = 1; id <= 4; ++id) store.write({id, 4, std::string(1000 + id, static_cast<char>('a' + id))});
  CHECK(store.newest_id() == 4);
  auto c = store.read(4);
  REQUIRE(c);
  CHECK(c->world_size == 4);
  CHECK(c->payload == std::string(1004, 'e'));
  CHECK_FALSE(store.read(1));  // pruned: the newest two are kept
  CHECK(store.read(3));
  // No temporary file is left behind.
  CHECK(std::system(("test -z \"$(ls -A " + store.dir() + " | grep tmp)\"").c_str()) == 0);
  store.remove_all();
  CHECK(store.newest_id() == 0);
  std::system(("rm -rf " + base).c_str());  // remove_all() leaves the directories above the store
}

TEST_CASE("a torn or corrupted newest commit is skipped for the one before") {
  const CommitStore store(fresh_dir("torn"));
  store.write({7, 2, "seven"});
  store.write({8, 2, "eight-eight"});
  {
    // A process killed while writing leaves only a temporary file: not a commit.
    std::ofstream(store.dir() + "/.tmp-123-9") << "HVDCOMMIT1 id=9 size=2 bytes=100 fnv1a=0\nhalf";
  }
  CHECK(store.newest_id() == 8);
  {
    // Truncated (e.g. a disk that lost the tail): its length no longer matches.
    std::string path = store.path_of(8);
    std::ifstream in(path, std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(path, std::ios::binary | std::ios::trunc) << all.substr(0, all.size() - 3);
  }
  CHECK(store.newest_id() == 7);
  {
    // Same length, one byte flipped: the checksum catches it.
    std::string path = store.path_of(7);
    std::ifstream in(path, std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(in)), {});
    all.back() ^= 1;
    std::ofstream(path, std::ios::binary | std::ios::trunc) << all;
  }
  CHECK(store.newest_id() == 0);
  std::system(("rm -rf " + store.dir()).c_str());
}

TEST_CASE("HOROVOD_ELASTIC_DIR wins over the per-user, job-named default under TMPDIR") {
  unsetenv("HOROVOD_ELASTIC_DIR");
  setenv("TMPDIR", "/var/tmp/x", 1);
  CHECK(hvd::detail::elastic_dir("job1") == "/var/tmp/x/horovodcpp-elastic-" + std::to_string(geteuid()) + "/job1");
  setenv("HOROVOD_ELASTIC_DIR", "/data/commits", 1);
  CHECK(hvd::detail::elastic_dir("job1") == "/data/commits");
  unsetenv("HOROVOD_ELASTIC_DIR");
  unsetenv("TMPDIR");
}

// Runs `steps` steps of every rank of `size`, returning the samples they used.
std::vector<std::int64_t> train_steps(std::vector<ElasticSampler>& ranks, std::int64_t steps,
                                      std::int64_t batch) {
  std::vector<std::int64_t> used;
  for (std::int64_t s = 0; s < steps; ++s)
    for (auto& r : ranks) {
      auto b = r.batch(s, batch);
      used.insert(used.end(), b.begin(), b.end());
      r.record_batch(s, batch);
    }
  return used;
}

std::vector<ElasticSampler> world(int size, const std::vector<std::int64_t>* saved, std::int64_t n) {
  std::vector<ElasticSampler> ranks;
  for (int r = 0; r < size; ++r) {
    ranks.emplace_back(n, true, 7);
    if (saved) ranks.back().load(*saved);
    ranks.back().reshard(r, size);
  }
  return ranks;
}

TEST_CASE("the sampler resumes mid-epoch at another size without repeating or skipping") {
  const std::int64_t n = 103, batch = 4;
  auto four = world(4, nullptr, n);
  CHECK(four[0].num_batches(batch) == 7);  // ceil(103 / 16)
  auto used = train_steps(four, 3, batch);  // 48 samples
  const auto saved = four[2].save();
  for (auto& r : four) CHECK(r.save() == saved);  // the same state on every rank
  CHECK(four[0].processed_count() == 48);

  auto three = world(3, &saved, n);  // restored at size 3: 55 left, 12 per step
  CHECK(three[0].num_batches(batch) == 5);
  auto more = train_steps(three, three[0].num_batches(batch), batch);
  used.insert(used.end(), more.begin(), more.end());
  std::multiset<std::int64_t> seen(used.begin(), used.end());
  CHECK(used.size() == static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) CHECK(seen.count(i) == 1);
  CHECK(three[1].processed_count() == n);

  // A new epoch is a new order with nothing processed; the same epoch again keeps progress.
  three[0].set_epoch(0);
  CHECK(three[0].processed_count() == n);
  three[0].set_epoch(1);
  CHECK(three[0].processed_count() == 0);
  CHECK(three[0].epoch() == 1);
}

TEST_CASE("sampler misuse is an error naming what is wrong") {
  ElasticSampler s(10, false, 0);
  CHECK_THROWS_WITH(s.record_batch(1, 2), Contains("record_batch(1) but step 0 is the next one"));
  CHECK_THROWS_WITH(s.num_batches(0), Contains("batch_size 0 must be >= 1"));
  ElasticSampler other(11, false, 0);
  CHECK_THROWS_WITH(other.load(s.save()), Contains("dataset size 10) does not match this one (dataset size 11"));
  CHECK(s.batch(0, 4) == std::vector<std::int64_t>{0, 1, 2, 3});
}
