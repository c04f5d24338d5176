// LD_PRELOAD shim for start_check_race.sh: widens, in one process, the window in which the start
// check's lookup callback could touch its waiter's state after the waiter freed it.
// - PMIx_Get_nb of the start check's key: the caller pauses 1 s after each, so the answers
//   are in before it looks, and it frees the round's state as soon as it does.
// - The notify_all() of the last of those answers (the (size-1)-th std::condition_variable::
//   notify_all() since the first lookup: the callbacks, on PMIx's progress thread) pauses 500 ms
//   first, then says whether the condition variable lies in a block freed (operator delete) in the
//   meantime: "USE AFTER FREE" (and skips the broadcast, which on freed memory may hang), or
//   "late notify: the condition variable is alive".
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pmix.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kIdle, kAsked, kNotifying, kDone };
static atomic_int stage = kIdle;
static atomic_int notifies;  // since the first lookup

// Blocks freed while the late notify waits.
enum { kMaxFreed = 4096 };
static struct {
  uintptr_t start, end;
} freed[kMaxFreed];
static atomic_int freed_count;

static void pause_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static void note_freed(void* p) {
  if (p == NULL || atomic_load(&stage) != kNotifying) return;
  int i = atomic_fetch_add(&freed_count, 1);
  if (i < kMaxFreed) {
    freed[i].start = (uintptr_t)p;
    freed[i].end = (uintptr_t)p + malloc_usable_size(p);
  }
}

void _ZdlPv(void* p) {  // operator delete(void*)
  note_freed(p);
  free(p);
}

void _ZdlPvm(void* p, size_t size) {  // operator delete(void*, size_t)
  (void)size;
  note_freed(p);
  free(p);
}

void _ZNSt18condition_variable10notify_allEv(pthread_cond_t* cv) {  // std::condition_variable::notify_all()
  const char* size = getenv("OMPI_COMM_WORLD_SIZE");
  const int answers = size != NULL ? atoi(size) - 1 : 1;
  int asked = kAsked;
  if (atomic_load(&stage) != kAsked || atomic_fetch_add(&notifies, 1) + 1 != answers ||
      !atomic_compare_exchange_strong(&stage, &asked, kNotifying)) {
    pthread_cond_broadcast(cv);
    return;
  }
  pause_ms(500);
  atomic_store(&stage, kDone);
  int n = atomic_load(&freed_count);
  if (n > kMaxFreed) n = kMaxFreed;
  for (int i = 0; i < n; ++i)
    if ((uintptr_t)cv >= freed[i].start && (uintptr_t)cv < freed[i].end) {
      fprintf(stderr, "late_notify_shim: USE AFTER FREE: notify_all on %p, in a block freed while it waited\n",
              (void*)cv);
      return;
    }
  fprintf(stderr, "late_notify_shim: late notify: the condition variable is alive\n");
  pthread_cond_broadcast(cv);
}

pmix_status_t PMIx_Get_nb(const pmix_proc_t* proc, const pmix_key_t key, const pmix_info_t info[], size_t ninfo,
                          pmix_value_cbfunc_t cbfunc, void* cbdata) {
  typedef pmix_status_t (*get_nb_t)(const pmix_proc_t*, const pmix_key_t, const pmix_info_t[], size_t,
                                    pmix_value_cbfunc_t, void*);
  get_nb_t real = (get_nb_t)dlsym(RTLD_NEXT, "PMIx_Get_nb");
  const int ours = strcmp(key, "horovodcpp.arrived") == 0;
  int idle = kIdle;
  if (ours) atomic_compare_exchange_strong(&stage, &idle, kAsked);
  pmix_status_t rc = real(proc, key, info, ninfo, cbfunc, cbdata);
  if (ours) pause_ms(1000);
  return rc;
}
