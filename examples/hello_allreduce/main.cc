// The smallest horovodcpp program: every rank contributes (rank + 1) * i and checks the sum.
// Runs on host memory without LibTorch: `hvdrun -np 2 ./hello_allreduce`.
#include <cstdio>
#include <vector>

#include <horovodcpp/horovod.h>

int main() {
  hvd::init();
  const int n = 8;
  auto t = hvd::HostTensor::allocate(hvd::DataType::Float32, {n});
  for (int i = 0; i < n; ++i) t->data_as<float>()[i] = static_cast<float>((hvd::rank() + 1) * i);
  hvd::allreduce_async(t, t, {hvd::ReduceOp::Sum, "hello"}).wait();
  const int s = hvd::size();
  int wrong = 0;
  for (int i = 0; i < n; ++i)
    if (t->data_as<float>()[i] != static_cast<float>(s * (s + 1) / 2 * i)) ++wrong;
  std::printf("rank %d of %d (local %d of %d, cross %d of %d): allreduce %s\n", hvd::rank(), s, hvd::local_rank(),
              hvd::local_size(), hvd::cross_rank(), hvd::cross_size(), wrong ? "WRONG" : "ok");
  hvd::shutdown();
  return wrong ? 1 : 0;
}
