// A small elastic job without LibTorch, for the commit store's job-level tests (planted.sh): its
// state is a step counter and the sum of an allreduce per step, committed every COMMIT_EVERY
// steps. Prints "START rank R step S commit C" after the restore and "DONE rank R step S sum X"
// at the end, or "ERROR rank R: MESSAGE" (X: the sum over steps s < S of sum over ranks of (r + 1) * (s + 1), the same
// whatever was resumed). Usage: elastic_counter STEPS COMMIT_EVERY
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "horovodcpp/elastic.h"
#include "tests/common/rank_markers.h"

namespace {

class Counter : public hvd::elastic::State {
 public:
  std::int64_t step = 0;
  double sum = 0;

 protected:
  std::string serialize() const override {
    std::string bytes(sizeof step + sizeof sum, '\0');
    std::memcpy(bytes.data(), &step, sizeof step);
    std::memcpy(bytes.data() + sizeof step, &sum, sizeof sum);
    return bytes;
  }
  void deserialize(const std::string& bytes) override {
    if (bytes.size() != sizeof step + sizeof sum) throw hvd::Error("elastic_counter: a state of " + std::to_string(bytes.size()) + " bytes");
    std::memcpy(&step, bytes.data(), sizeof step);
    std::memcpy(&sum, bytes.data() + sizeof step, sizeof sum);
  }
};

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t steps = argc > 1 ? std::atoll(argv[1]) : 6;
  const std::int64_t every = argc > 2 ? std::atoll(argv[2]) : 2;
  Counter state;
  try {
    hvd::elastic::run(state, [&](Counter& s) {
      std::printf("START rank %d step %lld commit %lld\n", hvd::rank(), static_cast<long long>(s.step),
                  static_cast<long long>(s.commit_id()));
      std::fflush(stdout);
      for (; s.step < steps;) {
        auto t = hvd::HostTensor::allocate(hvd::DataType::Float64, {1});
        *t->data_as<double>() = (hvd::rank() + 1.0) * (s.step + 1);
        hvd::allreduce_async(t, t, {hvd::ReduceOp::Sum, "counter.step"}).wait();
        s.sum += *t->data_as<double>();
        ++s.step;
        if (s.step % every == 0) s.commit();
      }
    });
  } catch (const std::exception& e) {
    std::printf("ERROR rank %d: %s\n", hvd::rank(), e.what());
    std::fflush(stdout);
    // Every rank says it before the first to exit makes mpirun end the others.
    if (const char* dir = std::getenv("HVD_TEST_DIR"))
      hvd::test::mark_and_wait_for_ranks(std::string(dir) + "/error.", hvd::rank(), hvd::size(), std::chrono::seconds(5));
    hvd::shutdown();
    return 1;
  }
  std::printf("DONE rank %d step %lld sum %.0f\n", hvd::rank(), static_cast<long long>(state.step), state.sum);
  hvd::shutdown();
  return 0;
}
