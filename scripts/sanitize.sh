#!/usr/bin/env bash
# Lean sanitizer builds, separate from the main one: the core, the unit tests, the np=2 MPI tests
# (collectives, a random mix of them, Adasum, errors, lifecycle, a peer leaving, stalls, faults,
# settings mismatches), the codec and commit-loader fuzz tests and the commit store's unit tests,
# under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan), then the unit tests, the np=2
# tests that exercise the core's threads and the np=4 tests of a process set failing beside others
# under ThreadSanitizer (build-tsan), with, where the CUDA headers are, the NCCL backend's tests on
# the emulated CUDA runtime and NCCL at np=2 (its stream, finalizer and background threads; the
# emulation's stream threads). No LibTorch, no GPU, no examples. Any sanitizer report fails the run;
# suppressions (scripts/sanitizers/) cover only frames inside Open MPI and its libraries.
#   scripts/sanitize.sh [asan|tsan]...   (default: both); FUZZ_SECONDS (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
jobs=$(nproc)
common=(-DHVD_WITH_TORCH=OFF -DHVD_WITH_CUDA=OFF -DHVD_BUILD_EXAMPLES=OFF
        -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g" "-DCMAKE_C_FLAGS_DEBUG=-O1 -g")
[ -z "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ] || common+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$CMAKE_CXX_COMPILER_LAUNCHER")

mpi_targets=(hvd_mpi_collectives hvd_mpi_errors hvd_mpi_lifecycle hvd_mpi_peer_shutdown hvd_mpi_stall
             hvd_mpi_logging hvd_mpi_autotune hvd_mpi_control_channel hvd_init_must_fail hvd_fault_rank hvd_mpi_adasum
             hvd_mpi_mixed_workload)
asan_tests='^(unit_tests|codec_fuzz|commit_fuzz|elastic_store_unit|hvd_mpi_[a-z_]*_np2|hvd_fault_[a-z]*_np2|hvd_settings_mismatch_[a-z]*_np2|hvd_late_rank_np2)$'
tsan_tests='^(unit_tests|hvd_mpi_(collectives|lifecycle|peer_shutdown|stall_[a-z]*|mixed_workload)_np2|hvd_fault_(sigstop|return|allocator)_np2|hvd_mpi_process_set_(failures|stop_[a-z_]*)_np4)$'

run_asan() {
  local b=${ASAN_BUILD_DIR:-build-asan}
  cmake -S . -B "$b" "${common[@]}" -DHVD_SANITIZE=address,undefined -DHVD_FUZZ_SECONDS="${FUZZ_SECONDS:-60}" >/dev/null
  cmake --build "$b" -j"$jobs" --target hvd_unit_tests hvd_codec_fuzz hvd_commit_fuzz test_elastic_store "${mpi_targets[@]}"
  ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=1:fast_unwind_on_malloc=0 \
  LSAN_OPTIONS=suppressions=$root/scripts/sanitizers/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=$root/scripts/sanitizers/ubsan.supp \
    ctest --test-dir "$b" --output-on-failure -R "$asan_tests"
}

# The NCCL backend on the emulated CUDA runtime and NCCL (headers from /usr/local/cuda; no nvcc
# build, no GPU): built into the TSan stage when the toolkit is here.
# The fault sweep too: under TSan it found a failed node step's host step racing the stream's copy
# into the host staging buffer (Note [A failed node step drains the stream before the host step]).
emulated_targets=(test_emulated_cuda_nccl test_nccl_collectives_emulated test_nccl_faults_emulated
                  test_nccl_mixed_workload_emulated test_nccl_fault_sweep_emulated)
emulated_tests='|test_emulated_cuda_nccl_np2|test_nccl_(collectives|mixed_workload)_emulated_np2|test_nccl_faults_[a-z_]*_emulated_np2|test_nccl_fault_sweep_emulated'

run_tsan() {
  local b=${TSAN_BUILD_DIR:-build-tsan} cuda=OFF targets=() tests=$tsan_tests
  if [ -f /usr/local/cuda/include/cuda_runtime.h ] && [ -f /usr/local/cuda/include/nccl.h ]; then
    cuda=ON targets=("${emulated_targets[@]}") tests="${tsan_tests%)\$}${emulated_tests})\$"
  fi
  cmake -S . -B "$b" "${common[@]}" -DHVD_SANITIZE=thread -DHVD_WITH_CUDA=$cuda >/dev/null
  cmake --build "$b" -j"$jobs" --target hvd_unit_tests hvd_mpi_collectives hvd_mpi_lifecycle \
    hvd_mpi_peer_shutdown hvd_mpi_stall hvd_fault_rank hvd_mpi_process_set_failures \
    hvd_mpi_process_set_stop hvd_mpi_mixed_workload "${targets[@]}"
  # Data races are all reported (suppressed only inside Open MPI, tsan.supp). Lock-misuse reports
  # are off: Open MPI's uninstrumented libevent, BTL and PMIx components take and destroy their
  # locks in ways TSan reports as double locks, lock-order inversions and destroyed locked
  # mutexes, from inside MPI_Init/MPI_Finalize, and suppressions cannot match those reports'
  # frames (they have no symbols). horovodcpp's own locks are all scoped std::lock_guard /
  # unique_lock, which cannot double-lock or leak a held lock.
  TSAN_OPTIONS="halt_on_error=1:report_mutex_bugs=0:detect_deadlocks=0:report_destroy_locked=0:suppressions=$root/scripts/sanitizers/tsan.supp" \
    ctest --test-dir "$b" --output-on-failure -R "$tests"
}

for which in "${@:-asan tsan}"; do
  for w in $which; do
    start=$SECONDS
    "run_$w"
    echo "sanitize: $w took $((SECONDS - start)) s"
  done
done
