#!/usr/bin/env bash
# The GPU check for horovodcpp (see docs/gpu.md, "The GPU check"), in steps that each end well
# within a 10-minute device command and can run as separate commands on the same machine:
#
#   scripts/gpu-check.sh prepare         HERE (reaches Debian's packages and the fetched NCCL
#                                        mirror): fills the git-ignored .gpu/ with Open MPI, spdlog,
#                                        fmt, CLI11 and Catch2 packages, the unpack script, and
#                                        NCCL's source (v2.30.x, NCCL_MIRROR=<git dir of a fetch of
#                                        NVIDIA/nccl>) as .gpu/nccl-src.tar.gz. Carry .gpu (and data
#                                        for MNIST: scripts/fetch-mnist.sh).
#   scripts/gpu-check.sh STEP...         ON THE GPU MACHINE, in the repository root. Steps:
#     configure  (about 1 min)  CMake with HVD_WITH_CUDA=ON, HVD_WITH_TORCH=ON against the LibTorch of
#                               the machine's PyTorch; a configure failure is a FAIL (no fallback)
#     build      (3-6 min)      the runtime, LibTorch front end, GPU and torch tests, benchmarks, MNIST;
#                               run it again if it ran out of time: the build resumes
#     tests      (2-4 min)      the GPU tests at np=1, the one-runtime link check, the LibTorch [cuda]
#                               cases at np=1 (they fail, not skip, when torch sees no GPU here)
#     nccl       (unmeasured)   builds NCCL >= 2.30 from .gpu/nccl-src.tar.gz for sm_90 only (the
#                               collectives the tests use, Ring/Simple; GPU_CHECK_NCCL_FULL=1: all);
#                               resumes where it stopped when run again
#     multirank  (2-4 min)      with that NCCL: np=2 and np=4 on the one GPU (NCCL_MULTI_RANK_GPU_ENABLE=1,
#                               NCCL_MAX_CTAS=2, NCCL_NVLS_ENABLE=0): collectives, process sets,
#                               hierarchical allreduce as 2x2, LibTorch [cuda] at np=2
#     sanitizer  (2-4 min)      compute-sanitizer memcheck and synccheck over the GPU tests at np=1
#     mnist      (2-3 min)      MNIST one epoch on the GPU (--device cuda) and on the CPU; both accuracies
#     bench      (2-4 min)      the table: allreduce through the runtime against raw ncclAllReduce
#                               (4 KB .. 256 MB, np=1, and np=2 with NCCL >= 2.30), the DistributedOptimizer
#                               step against plain LibTorch (np=1)
#     all                       every step above in order (for a machine without a command limit)
# Every step's log goes to $OUT/<step>.log (when OUT is set) as soon as the step ends, with one line
# per step appended to $OUT/summary.txt; locally they are in build-gpu/logs. Exit status: 0 when
# every step asked for passed, 1 otherwise. Every command inside a step has its own time limit.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=$root/build-gpu
logs=$build/logs
nccl_tag=${NCCL_TAG:-v2.30.7-1}

prepare() {
  set -e
  mkdir -p .gpu
  cp /work/shared/gpu/fetch-debs.sh /work/shared/gpu/unpack-debs.sh .gpu/
  bash .gpu/fetch-debs.sh .gpu/debs
  local mirror=${NCCL_MIRROR:-/work/.mirror/NVIDIA+nccl/repo}
  if [[ -d "$mirror" ]]; then
    git -C "$mirror" archive --format=tar.gz --prefix=nccl/ "$nccl_tag" > .gpu/nccl-src.tar.gz
    echo "NCCL $nccl_tag source: .gpu/nccl-src.tar.gz ($(du -h .gpu/nccl-src.tar.gz | cut -f1))"
  else
    echo "no NCCL mirror at $mirror (fetch github:NVIDIA/nccl, then NCCL_MIRROR=<its git dir>):" \
         "the nccl and multirank steps will not run" >&2
  fi
  du -sh .gpu
}

if [[ "${1:-}" == "prepare" || "${1:-}" == "--prepare" ]]; then
  prepare
  exit 0
fi
if (( $# == 0 )); then
  sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  exit 2
fi

mkdir -p "$logs"
failed=0
started=$(date +%s)
elapsed() { echo "$(( $(date +%s) - started ))s"; }
# record STEP RESULT: one summary line, here and in $OUT.
record() {
  echo "== $1: $2 ($(elapsed))" | tee -a "$logs/summary.txt"
  if [[ -n "${OUT:-}" ]]; then echo "$1: $2" >> "$OUT/summary.txt"; fi
}
# run LOG SECONDS COMMAND...: appends the command's output to the step's log, with a limit.
run() {
  local log=$1 limit=$2; shift 2
  echo "\$ $*" >> "$log"
  timeout --kill-after=10 "$limit" "$@" >> "$log" 2>&1
  local rc=$?
  if (( rc == 124 || rc == 137 )); then echo "TIMED OUT after ${limit}s: $*" >> "$log"; fi
  return $rc
}

# --- the machine: carried packages, versions, the NCCL that PyTorch loads ------------------------
setup() {
  if [[ -d .gpu/debs ]]; then
    eval "$(bash .gpu/unpack-debs.sh .gpu/debs)"
  elif ! command -v mpirun > /dev/null; then
    echo "no mpirun and no .gpu/debs: run scripts/gpu-check.sh prepare where Debian's packages are, and carry .gpu" >&2
    exit 2
  fi
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  mpirun_flags=(--oversubscribe --bind-to none)
  [[ $(id -u) == 0 ]] && mpirun_flags+=(--allow-run-as-root)
  torch_prefix=$(python3 -c "import torch; print(torch.utils.cmake_prefix_path)" 2>/dev/null || true)
  # Build against the NCCL PyTorch loads (the nvidia-nccl wheel), so one process never holds two
  # libnccl.so.2; the wheel ships libnccl.so.2 only: link through a libnccl.so of our own.
  nccl_args=()
  nccl_dir=$(python3 -c "import nvidia.nccl as n; print(list(n.__path__)[0])" 2>/dev/null || true)
  nccl_header=/usr/local/cuda/include/nccl.h
  if [[ -n "$nccl_dir" && -f "$nccl_dir/include/nccl.h" && -f "$nccl_dir/lib/libnccl.so.2" ]]; then
    mkdir -p .gpu/nccl-link
    ln -sf "$nccl_dir/lib/libnccl.so.2" .gpu/nccl-link/libnccl.so
    nccl_args=(-DNCCL_INCLUDE_DIR="$nccl_dir/include" -DNCCL_LIBRARY="$root/.gpu/nccl-link/libnccl.so")
    export LD_LIBRARY_PATH=$nccl_dir/lib:${LD_LIBRARY_PATH:-}
    nccl_header=$nccl_dir/include/nccl.h
  fi
  # NCCL >= 2.30 built by the nccl step: loaded instead of the wheel's (same soname).
  built_nccl=$build/nccl/lib
  multirank_ok=no
  if [[ -f $built_nccl/libnccl.so.2 ]]; then multirank_ok=yes; fi
}

versions() {
  {
    date -u +%FT%TZ
    command -v nvidia-smi > /dev/null && nvidia-smi -L && nvidia-smi --query-gpu=driver_version --format=csv,noheader
    python3 -c "import torch; print('PyTorch', torch.__version__, 'CUDA', torch.version.cuda, 'NCCL', torch.cuda.nccl.version(), 'devices', torch.cuda.device_count())" 2>&1
    nvcc --version 2>/dev/null | tail -n 2
    echo "NCCL headers: $nccl_header ($(awk '/#define NCCL_VERSION_CODE/ {print $3}' "$nccl_header" 2>/dev/null))"
    mpirun --version 2>/dev/null | head -n 1
    command -v compute-sanitizer > /dev/null && compute-sanitizer --version | tail -n 1
  } 2>&1
}

# finish STEP RC: copies the step's log to $OUT at once and records the outcome.
finish() {
  local step=$1 rc=$2
  if [[ -n "${OUT:-}" ]]; then cp "$logs/$step.log" "$OUT/$step.log"; fi
  if (( rc == 0 )); then
    record "$step" ok
  else
    failed=1
    record "$step" "FAILED (exit $rc; see $step.log)"
  fi
}

# --- steps --------------------------------------------------------------------------------------
step_configure() {
  local log=$1
  versions >> "$log"
  if [[ -z "$torch_prefix" ]]; then echo "python3 has no torch: no LibTorch to build against" >> "$log"; return 1; fi
  local generator=()
  command -v ninja > /dev/null && generator=(-G Ninja)
  run "$log" 240 cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DHVD_WITH_CUDA=ON -DHVD_WITH_TORCH=ON -DHVD_BUILD_EXAMPLES=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_PREFIX_PATH="$torch_prefix" "${nccl_args[@]}"
}

targets=(horovodcpp horovodcpp_torch test_nccl_collectives test_nccl_process_sets nccl_allreduce_benchmark
         torch_step_benchmark test_torch mnist)
step_build() {
  local log=$1
  [[ -f $build/CMakeCache.txt ]] || { echo "run the configure step first" >> "$log"; return 1; }
  run "$log" 540 cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
}

step_tests() {
  local log=$1 rc=0
  run "$log" 120 ctest --test-dir "$build" -R '^(test_nccl_collectives_np1|gpu_link_one_cuda_runtime)$' \
    --output-on-failure || rc=1
  grep -qE "SKIPPED|\*\*\*Skipped" "$log" && { echo "FAIL: a GPU test skipped itself on a GPU machine" >> "$log"; rc=1; }
  run "$log" 200 env HVD_TEST_EXPECT_CUDA=1 OMP_NUM_THREADS=4 mpirun "${mpirun_flags[@]}" -np 1 \
    "$build/tests/torch/test_torch" "[cuda]" || rc=1
  return $rc
}

step_nccl() {
  local log=$1
  [[ -f .gpu/nccl-src.tar.gz ]] || { echo "no .gpu/nccl-src.tar.gz: run prepare here and carry .gpu" >> "$log"; return 1; }
  if [[ ! -d $build/nccl-src ]]; then
    mkdir -p "$build/nccl-src"
    tar -xzf .gpu/nccl-src.tar.gz -C "$build/nccl-src" --strip-components=1
  fi
  local only=()
  if [[ -z "${GPU_CHECK_NCCL_FULL:-}" ]]; then
    only=("ONLY_FUNCS=AllReduce * * RING SIMPLE|AllGather * * RING SIMPLE|Broadcast * * RING SIMPLE|ReduceScatter * * RING SIMPLE|SendRecv")
  fi
  local t0=$SECONDS
  run "$log" 540 make -C "$build/nccl-src" -j "$(nproc)" src.build BUILDDIR="$build/nccl" \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" "${only[@]}"
  local rc=$?
  echo "nccl build: $((SECONDS - t0)) s this run" >> "$log"
  [[ -f $build/nccl/lib/libnccl.so.2 ]] && ls -l "$build/nccl/lib" >> "$log"
  return $rc
}

# The environment of several ranks on one GPU, with the NCCL the nccl step built (only Ring and
# Simple kernels unless GPU_CHECK_NCCL_FULL is set: NCCL must then choose them).
multirank_env() {
  local forced="NCCL_ALGO=Ring NCCL_PROTO=Simple"
  [[ -n "${GPU_CHECK_NCCL_FULL:-}" ]] && forced=""
  echo env LD_LIBRARY_PATH="$built_nccl:$LD_LIBRARY_PATH" NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_MAX_CTAS=2 \
    NCCL_NVLS_ENABLE=0 $forced
}

step_multirank() {
  local log=$1 rc=0
  if [[ $multirank_ok != yes ]]; then echo "no NCCL >= 2.30 in $built_nccl: run the nccl step first" >> "$log"; return 1; fi
  local env_cmd
  read -r -a env_cmd <<< "$(multirank_env)"
  local gpu=$build/tests/gpu
  "${env_cmd[@]}" python3 -c "import ctypes; v=ctypes.c_int(); ctypes.CDLL('libnccl.so.2').ncclGetVersion(ctypes.byref(v)); print('NCCL loaded:', v.value)" >> "$log" 2>&1
  run "$log" 150 "${env_cmd[@]}" mpirun "${mpirun_flags[@]}" -np 2 "$gpu/test_nccl_collectives" || rc=1
  run "$log" 150 "${env_cmd[@]}" mpirun "${mpirun_flags[@]}" -np 4 "$gpu/test_nccl_collectives" || rc=1
  run "$log" 120 "${env_cmd[@]}" HVD_TEST_FAKE_LOCAL_SIZE=2 HOROVOD_HIERARCHICAL_ALLREDUCE=1 \
    mpirun "${mpirun_flags[@]}" -np 4 "$gpu/test_nccl_collectives" "[allreduce]" || rc=1
  run "$log" 120 "${env_cmd[@]}" HOROVOD_DYNAMIC_PROCESS_SETS=1 mpirun "${mpirun_flags[@]}" -np 4 \
    "$gpu/test_nccl_process_sets" || rc=1
  run "$log" 150 "${env_cmd[@]}" HVD_TEST_EXPECT_CUDA=1 OMP_NUM_THREADS=4 mpirun "${mpirun_flags[@]}" -np 2 \
    "$build/tests/torch/test_torch" "[cuda]" || rc=1
  grep -q "SKIPPED" "$log" && { echo "FAIL: a GPU test skipped itself" >> "$log"; rc=1; }
  return $rc
}

step_sanitizer() {
  local log=$1 rc=0
  command -v compute-sanitizer > /dev/null || { echo "compute-sanitizer is not on the PATH" >> "$log"; return 1; }
  local tool
  for tool in memcheck synccheck; do
    run "$log" 240 mpirun "${mpirun_flags[@]}" -np 1 compute-sanitizer --tool "$tool" --error-exitcode 3 \
      "$build/tests/gpu/test_nccl_collectives" "~[readiness]" || rc=1
  done
  return $rc
}

step_mnist() {
  local log=$1 rc=0
  local mnist=$build/examples/mnist/mnist
  [[ -d data/mnist ]] || { echo "no data/mnist: run scripts/fetch-mnist.sh here and carry data" >> "$log"; return 1; }
  run "$log" 150 mpirun "${mpirun_flags[@]}" -np 1 "$mnist" --device cuda --epochs 1 --checkpoint '' \
    --data data/mnist || rc=1
  run "$log" 150 env OMP_NUM_THREADS=8 mpirun "${mpirun_flags[@]}" -np 1 "$mnist" --device cpu --epochs 1 \
    --checkpoint '' --data data/mnist || rc=1
  grep -E "^mnist:|test: " "$log" | tee -a "$logs/summary.txt" > /dev/null
  return $rc
}

step_bench() {
  local log=$1 rc=0
  export HOROVOD_CYCLE_TIME=${HOROVOD_CYCLE_TIME:-1}
  run "$log" 150 mpirun "${mpirun_flags[@]}" -np 1 "$build/tests/gpu/nccl_allreduce_benchmark" || rc=1
  if [[ $multirank_ok == yes ]]; then
    local env_cmd
    read -r -a env_cmd <<< "$(multirank_env)"
    run "$log" 150 "${env_cmd[@]}" mpirun "${mpirun_flags[@]}" -np 2 "$build/tests/gpu/nccl_allreduce_benchmark" || rc=1
  fi
  run "$log" 120 mpirun "${mpirun_flags[@]}" -np 1 "$build/tests/gpu/torch_step_benchmark" || rc=1
  {
    echo "| measurement | horovodcpp | reference | reference is | ratio |"
    echo "|---|---|---|---|---|"
    grep '^| ' "$log" | grep -v -e '^| measurement' -e '^|---'
  } > "$logs/table.md"
  cat "$logs/table.md" >> "$log"
  if [[ -n "${OUT:-}" ]]; then cp "$logs/table.md" "$OUT/table.md"; fi
  return $rc
}

setup
steps=("$@")
if [[ " ${steps[*]} " == *" all "* ]]; then steps=(configure build tests nccl multirank sanitizer mnist bench); fi
for step in "${steps[@]}"; do
  if ! declare -F "step_$step" > /dev/null; then
    echo "unknown step '$step' (run without arguments for the list)" >&2
    exit 2
  fi
  : > "$logs/$step.log"
  echo "== $step ..."
  "step_$step" "$logs/$step.log"
  rc=$?
  # Reread the machine after a step that may have produced what later steps use.
  [[ $step == nccl ]] && setup
  finish "$step" $rc
  tail -n 15 "$logs/$step.log"
done
exit $failed
