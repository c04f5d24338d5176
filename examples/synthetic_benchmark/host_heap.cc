#include "host_heap.h"

#include <sys/resource.h>

#include <stdexcept>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace hvd::bench {

std::string configure_host_heap(const std::string& mode) {
  if (mode == "glibc") return "glibc as the environment set it (--host-heap glibc)";
  if (mode != "keep") throw std::invalid_argument("--host-heap: '" + mode + "' is not keep or glibc");
#if defined(__GLIBC__)
  // M_MMAP_MAX 0: every block comes from the heap, so freeing one never unmaps it. A trim
  // threshold of 1 GiB: the heap top is never given back during a run. Both also stop glibc
  // from moving these thresholds as it goes.
  if (mallopt(M_MMAP_MAX, 0) != 1 || mallopt(M_TRIM_THRESHOLD, 1 << 30) != 1)
    throw std::runtime_error("--host-heap keep: glibc's mallopt refused M_MMAP_MAX or M_TRIM_THRESHOLD");
  return "freed memory stays in the process (glibc M_MMAP_MAX=0, M_TRIM_THRESHOLD=1 GiB; --host-heap glibc "
         "keeps the defaults)";
#else
  throw std::invalid_argument("--host-heap keep needs glibc; pass --host-heap glibc");
#endif
}

long thread_page_faults() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_minflt + usage.ru_majflt;
}

}  // namespace hvd::bench
