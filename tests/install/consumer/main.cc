// Built against the installed package: sums (rank + 1) over the ranks.
#include <horovodcpp/horovod.h>

#include <cstdio>

int main() {
  hvd::init();
  auto t = hvd::HostTensor::allocate(hvd::DataType::Int64, {1});
  t->data_as<long long>()[0] = hvd::rank() + 1;
  hvd::allreduce_async(t, t, {hvd::ReduceOp::Sum, "consumer"}).wait();
  const long long n = hvd::size();
  const bool ok = t->data_as<long long>()[0] == n * (n + 1) / 2;
  std::printf("consumer rank %d: %s\n", hvd::rank(), ok ? "ok" : "WRONG");
  hvd::shutdown();
  return ok ? 0 : 1;
}
