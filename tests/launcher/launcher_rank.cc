// The rank program of the launcher tests: a real horovodcpp job started by hvdrun.
//   launcher_rank info [TAG [N]]  print topology, the namespace, knobs and the result of an
//                                 allreduce of N float64 elements (default 16; 1048576 = 8 MiB)
//   launcher_rank args A B ...    print each argument as received (spaces, quotes, ';' intact)
//   launcher_rank exit R CODE     rank R (or every rank: R = all) exits with CODE without
//                                 shutdown; the others wait
//   launcher_rank kill R          rank R kills itself with SIGKILL; the others wait
//   launcher_rank sleep S [TAG]   every rank sleeps S seconds (signal tests; TAG names the job)
#include <unistd.h>

#include <climits>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <horovodcpp/horovod.h>

namespace {

// Each rank contributes (rank + 1) * i; the sum over ranks is size * (size + 1) / 2 * i, exact
// in float64 for every n used here.
bool allreduce_matches(std::int64_t n, double* element_one) {
  auto t = hvd::HostTensor::allocate(hvd::DataType::Float64, {n});
  for (std::int64_t i = 0; i < n; ++i) t->data_as<double>()[i] = (hvd::rank() + 1.0) * i;
  hvd::allreduce_async(t, t, {hvd::ReduceOp::Sum, "launcher.sum"}).wait();
  const double s = hvd::size();
  bool good = true;
  for (std::int64_t i = 0; i < n; ++i)
    good = good && t->data_as<double>()[i] == s * (s + 1) / 2 * static_cast<double>(i);
  *element_one = t->data_as<double>()[1];
  return good;
}

std::string network_namespace() {
  char link[256] = {0};
  ssize_t n = readlink("/proc/self/ns/net", link, sizeof link - 1);
  return n > 0 ? std::string(link, static_cast<std::size_t>(n)) : "unknown";
}

std::string host_name() {
  char name[256] = {0};
  return gethostname(name, sizeof name - 1) == 0 ? name : "unknown";
}

const char* env_or_unset(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "unset";
}

int info(const char* tag, std::int64_t elements) {
  double element_one = 0;
  const bool good = allreduce_matches(elements, &element_one);
  std::printf("RANKINFO tag=%s rank=%d size=%d local_rank=%d local_size=%d cross_rank=%d "
              "cross_size=%d netns=%s host=%s fusion=%s nccl_if=%s elements=%lld allreduce=%s "
              "element1=%g\n",
              tag, hvd::rank(), hvd::size(), hvd::local_rank(), hvd::local_size(),
              hvd::cross_rank(), hvd::cross_size(), network_namespace().c_str(), host_name().c_str(),
              env_or_unset("HOROVOD_FUSION_THRESHOLD"), env_or_unset("NCCL_SOCKET_IFNAME"),
              static_cast<long long>(elements), good ? "ok" : "WRONG", element_one);
  std::fflush(stdout);
  return good ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: launcher_rank info|args|exit|sleep ...\n");
    return 64;
  }
  const std::string mode = argv[1];
  hvd::init();
  int rc = 0;
  if (mode == "info") {
    const std::int64_t elements = argc > 3 ? std::atoll(argv[3]) : 16;
    rc = elements >= 2 ? info(argc > 2 ? argv[2] : "-", elements) : 64;
  } else if (mode == "args") {
    for (int i = 2; i < argc; ++i) std::printf("ARG rank=%d %d=<%s>\n", hvd::rank(), i - 1, argv[i]);
  } else if (mode == "exit" && argc > 3) {
    hvd::barrier();
    if (std::strcmp(argv[2], "all") == 0 || hvd::rank() == std::atoi(argv[2]))
      std::exit(std::atoi(argv[3]));
    sleep(60);  // mpirun must end us long before this
  } else if (mode == "kill" && argc > 2) {
    hvd::barrier();
    if (hvd::rank() == std::atoi(argv[2])) std::raise(SIGKILL);
    sleep(60);
  } else if (mode == "sleep" && argc > 2) {
    std::printf("SLEEPING rank=%d\n", hvd::rank());
    std::fflush(stdout);
    sleep(static_cast<unsigned>(std::atoi(argv[2])));
  } else {
    std::fprintf(stderr, "launcher_rank: bad arguments\n");
    rc = 64;
  }
  hvd::shutdown();
  return rc;
}
