#!/usr/bin/env bash
# The single GPU check for horovodcpp (see docs/gpu.md).
#
#   scripts/gpu-check.sh --prepare   here, on a machine that reaches Debian's packages: copies
#                                    /work/shared/gpu/{fetch,unpack}-debs.sh into .gpu/ and
#                                    downloads Open MPI, spdlog, fmt, CLI11 and Catch2 into
#                                    .gpu/debs (about 18 MB). .gpu/ is git-ignored; carry it.
#   scripts/gpu-check.sh             on the GPU machine (device tool: carry [".gpu"], and
#                                    "data" too for MNIST): unpacks .gpu/debs into /opt/hvd-deps,
#                                    builds against the LibTorch of the machine's PyTorch with
#                                    HVD_WITH_CUDA=ON and HVD_WITH_TORCH=ON, runs the GPU tests
#                                    at np=1 (np=2 and the hierarchical path too when NCCL >=
#                                    2.30 lets ranks share a GPU), trains MNIST on the GPU when
#                                    the example exists, and prints one table.
# Fits one 10-minute device command: every step has its own time limit, a failed step is
# reported and the rest still run. Logs go to build-gpu/logs (and to $OUT when it is set).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

if [[ "${1:-}" == "--prepare" ]]; then
  set -e
  mkdir -p .gpu
  cp /work/shared/gpu/fetch-debs.sh /work/shared/gpu/unpack-debs.sh .gpu/
  bash .gpu/fetch-debs.sh .gpu/debs
  du -sh .gpu
  exit 0
fi

build=$root/build-gpu
logs=$build/logs
mkdir -p "$logs"
declare -a summary=()
note() { summary+=("$1"); echo "== $1"; }
# run_step NAME SECONDS COMMAND...: runs with a limit, logs to $logs/NAME.log, records the outcome.
run_step() {
  local name=$1 limit=$2; shift 2
  echo "== $name: $*"
  timeout "$limit" "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$logs/$name.log"
  case $rc in
    0) note "$name: ok" ;;
    77) note "$name: skipped ($(grep -m1 SKIPPED "$logs/$name.log"))" ;;
    124) note "$name: TIMED OUT after ${limit}s" ;;
    *) note "$name: FAILED (exit $rc, see $logs/$name.log)" ;;
  esac
  return $rc
}
started=$(date +%s)
elapsed() { echo $(( $(date +%s) - started ))s; }

# --- dependencies -------------------------------------------------------------------------
# The image may lack any of Open MPI, spdlog, fmt, CLI11 and Catch2: use the carried packages.
if [[ -d .gpu/debs ]]; then
  eval "$(bash .gpu/unpack-debs.sh .gpu/debs)"
elif ! command -v mpirun > /dev/null; then
  echo "no mpirun and no .gpu/debs: run scripts/gpu-check.sh --prepare here and carry .gpu" >&2
  exit 2
fi
command -v nvidia-smi > /dev/null && nvidia-smi -L
torch_prefix=$(python3 -c "import torch; print(torch.utils.cmake_prefix_path)" 2>/dev/null || true)
python3 -c "import torch; print('PyTorch', torch.__version__, 'CUDA', torch.version.cuda, 'NCCL', torch.cuda.nccl.version())" 2>/dev/null || true

# Build against the NCCL PyTorch loads (the nvidia-nccl wheel) so one process never holds two
# libnccl.so.2; fall back to the toolkit's. The wheel ships libnccl.so.2 only: link through a
# libnccl.so of our own.
nccl_args=()
nccl_dir=$(python3 -c "import nvidia.nccl as n; print(list(n.__path__)[0])" 2>/dev/null || true)
if [[ -n "$nccl_dir" && -f "$nccl_dir/include/nccl.h" && -f "$nccl_dir/lib/libnccl.so.2" ]]; then
  mkdir -p .gpu/nccl-link
  ln -sf "$nccl_dir/lib/libnccl.so.2" .gpu/nccl-link/libnccl.so
  nccl_args=(-DNCCL_INCLUDE_DIR="$nccl_dir/include" -DNCCL_LIBRARY="$root/.gpu/nccl-link/libnccl.so")
  export LD_LIBRARY_PATH=$nccl_dir/lib:${LD_LIBRARY_PATH:-}
  nccl_header=$nccl_dir/include/nccl.h
else
  nccl_header=/usr/local/cuda/include/nccl.h
fi
nccl_code=$(awk '/#define NCCL_VERSION_CODE/ {print $3}' "$nccl_header" 2>/dev/null)
nccl_code=${nccl_code:-0}
echo "NCCL headers: $nccl_header (version code $nccl_code)"

# --- configure and build ------------------------------------------------------------------
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
configure=(cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release
  -DHVD_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$torch_prefix" "${nccl_args[@]}")
torch_built=yes
if ! run_step configure 180 "${configure[@]}" -DHVD_WITH_TORCH=ON; then
  # Without LibTorch the NCCL tests and the allreduce benchmark can still run.
  torch_built=no
  rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
  mkdir -p "$logs"
  run_step configure-without-torch 180 "${configure[@]}" -DHVD_WITH_TORCH=OFF || { printf '%s\n' "${summary[@]}"; exit 1; }
fi
targets=(horovodcpp test_nccl_collectives nccl_allreduce_benchmark)
have_target() { grep -q "/$1.dir\$" "$build/CMakeFiles/TargetDirectories.txt" 2>/dev/null; }
for t in torch_step_benchmark mnist hvd_mnist test_torch; do have_target "$t" && targets+=("$t"); done
run_step build 360 cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
echo "elapsed $(elapsed)"

# --- GPU tests ----------------------------------------------------------------------------
run_step gpu-tests-np1 200 ctest --test-dir "$build" -R 'test_nccl_collectives_np1' --output-on-failure
mpirun_flags=(--oversubscribe --bind-to none)
[[ $(id -u) == 0 ]] && mpirun_flags+=(--allow-run-as-root)
if (( nccl_code >= 23000 )); then
  run_step gpu-tests-np2 200 ctest --test-dir "$build" -R 'test_nccl_collectives_np2' --output-on-failure
  run_step gpu-hierarchical-np4 200 env NCCL_MULTI_RANK_GPU_ENABLE=1 HVD_TEST_FAKE_LOCAL_SIZE=2 \
    HOROVOD_HIERARCHICAL_ALLREDUCE=1 mpirun "${mpirun_flags[@]}" -np 4 "$build/tests/gpu/test_nccl_collectives" \
    "NCCL allreduce*"
else
  note "gpu-tests-np2: not run (NCCL code $nccl_code < 23000 cannot put two ranks on one GPU)"
fi
# The LibTorch front end's CUDA test cases (ops and DistributedOptimizer on CUDA tensors).
if [[ -x "$build/tests/torch/test_torch" ]]; then
  run_step torch-cuda-np1 150 mpirun "${mpirun_flags[@]}" -np 1 "$build/tests/torch/test_torch" "[cuda]"
  if (( nccl_code >= 23000 )); then
    run_step torch-cuda-np2 150 env NCCL_MULTI_RANK_GPU_ENABLE=1 mpirun "${mpirun_flags[@]}" -np 2 \
      "$build/tests/torch/test_torch" "[cuda]"
  fi
else
  note "torch-cuda: not run (test_torch not built; LibTorch front end: $torch_built)"
fi
echo "elapsed $(elapsed)"

# --- MNIST on the GPU ---------------------------------------------------------------------
mnist=$(find "$build/examples" -maxdepth 2 -type f -perm -u+x -name '*mnist*' 2>/dev/null | head -n1)
if [[ -n "$mnist" ]]; then
  help=$("$mnist" --help 2>&1 || true)
  mnist_args=()
  grep -q -- '--cuda' <<<"$help" && mnist_args+=(--cuda)
  grep -q -- '--device' <<<"$help" && mnist_args+=(--device cuda)
  grep -q -- '--epochs' <<<"$help" && mnist_args+=(--epochs 1)
  if grep -q -- '--data-dir' <<<"$help" && [[ -d data/mnist ]]; then mnist_args+=(--data-dir data/mnist); fi
  run_step mnist-gpu 180 mpirun "${mpirun_flags[@]}" -np 1 "$mnist" "${mnist_args[@]}"
else
  note "mnist-gpu: not run (examples/mnist was not built)"
fi

# --- the table ----------------------------------------------------------------------------
export HOROVOD_CYCLE_TIME=${HOROVOD_CYCLE_TIME:-1}
run_step allreduce-bench-np1 150 mpirun "${mpirun_flags[@]}" -np 1 "$build/tests/gpu/nccl_allreduce_benchmark"
if (( nccl_code >= 23000 )); then
  run_step allreduce-bench-np2 150 env NCCL_MULTI_RANK_GPU_ENABLE=1 mpirun "${mpirun_flags[@]}" -np 2 \
    "$build/tests/gpu/nccl_allreduce_benchmark"
fi
if [[ -x "$build/tests/gpu/torch_step_benchmark" ]]; then
  run_step step-bench-np1 120 mpirun "${mpirun_flags[@]}" -np 1 "$build/tests/gpu/torch_step_benchmark"
else
  note "step-bench-np1: not run (torch_step_benchmark not built; LibTorch front end: $torch_built)"
fi

echo
echo "## horovodcpp GPU check ($(date -u +%FT%TZ), $(elapsed), HOROVOD_CYCLE_TIME=$HOROVOD_CYCLE_TIME ms)"
echo
echo "| measurement | horovodcpp | reference | reference is | ratio |"
echo "|---|---|---|---|---|"
cat "$logs"/step-bench-np1.log "$logs"/allreduce-bench-np*.log 2>/dev/null |
  grep '^| ' | grep -v -e '^| measurement' -e '^|---'
echo
printf '%s\n' "${summary[@]}"
if [[ -n "${OUT:-}" ]]; then
  tar -czf "$OUT/gpu-check-logs.tar.gz" -C "$build" logs 2>/dev/null || true
fi
grep -q -e 'FAILED' -e 'TIMED OUT' <<<"$(printf '%s\n' "${summary[@]}")" && exit 1
exit 0
