#!/usr/bin/env bash
# The GPU check for horovodcpp (see docs/gpu.md, "The GPU check"). A session lent a GPU machine has
# 15 minutes of it, the machine's start included, and 10 minutes per command: so the check is ONE
# device command that ends within its own deadline, and everything that needs neither a GPU nor
# the machine's LibTorch is built here beforehand and carried.
#
#   scripts/gpu-check.sh prepare         HERE (reaches Debian's packages, the fetched NCCL mirror and
#                                        nvcc). Fills the git-ignored .gpu/; carry it, and data/ for
#                                        MNIST (scripts/fetch-mnist.sh):
#     debs/, unpack-debs.sh  Open MPI, spdlog, fmt, CLI11, Catch2 (the machine has no MPI)
#     nccl-src.tar.gz        NCCL v2.30.x source (NCCL_MIRROR=<git dir of a fetch of NVIDIA/nccl>)
#     nccl/lib/              that NCCL built here for sm_90, Ring/Simple kernels of the collectives
#                            the tests use: two ranks on one GPU need NCCL >= 2.30 (built once; the
#                            build is kept in build-gpu-nccl/ and resumes)
#     prebuilt/              the GPU programs that need no LibTorch (libhorovodcpp, test_nccl_collectives,
#                            test_nccl_process_sets, test_nccl_mixed_workload, nccl_allreduce_benchmark),
#                            Release, sm_90, against CUDA 13 and NCCL 2.28.9 (the NCCL PyTorch 2.11
#                            ships); they find each other through $ORIGIN and MPI, NCCL and the CUDA
#                            runtime through LD_LIBRARY_PATH
#     GPU_CHECK_PREBUILD=0 skips nccl/ and prebuilt/ (the machine then builds them: steps nccl, build).
#   scripts/gpu-check.sh STEP...         ON THE GPU MACHINE, in the repository root, in the order given:
#     configure  CMake with HVD_WITH_CUDA=ON, HVD_WITH_TORCH=ON against the LibTorch of the machine's
#                PyTorch; a configure failure is a FAIL (no fallback)
#     build      the LibTorch front end, its tests, MNIST and the step benchmark (and the GPU programs
#                when none were carried). With carried programs, configure and build run in the
#                background while the GPU steps run; the steps that need LibTorch wait for them.
#     tests      the GPU tests at np=1, also with HOROVOD_GPU_OPERATIONS=mpi (a GPU test that skips
#                itself there fails)
#     multirank  with NCCL >= 2.30, np=2 and np=4 on the one GPU (NCCL_MULTI_RANK_GPU_ENABLE=1,
#                NCCL_MAX_CTAS=2, NCCL_NVLS_ENABLE=0): collectives, hierarchical allreduce as 2x2,
#                process sets, and at np=3 a random mix of every collective in each rank's own order
#     torch      the LibTorch [cuda] cases at np=1 (they fail, not skip, when torch sees no GPU), and
#                at np=2 with NCCL >= 2.30
#     mnist      MNIST one epoch on the GPU (--device cuda) and on the CPU; both accuracies
#     bench      the table: allreduce through the runtime against raw ncclAllReduce (4 KB .. 256 MB,
#                np=1, and np=2 with NCCL >= 2.30), the DistributedOptimizer step against plain
#                LibTorch at np=1 on a small MLP (the runtime's fixed cost per step laid bare) and on
#                ResNet-50, batch 64 (the synthetic benchmark, --comm hvd,none)
#     sanitizer  compute-sanitizer memcheck and synccheck over the GPU tests at np=1
#     horovod    Horovod 0.28.1's test_torch.py, unmodified, through horovod.torch at np=2 on the one
#                GPU (NCCL >= 2.30; each rank its own node): its CUDA-tensor cases and GPU-only tests
#                (carried by prepare from a fetch of horovod: .gpu/horovod-tests)
#     nccl       builds NCCL >= 2.30 from .gpu/nccl-src.tar.gz on the machine (only when prepare
#                could not build it here); resumes when run again
#     all        configure build tests multirank torch horovod bench mnist sanitizer
#                (the steps never run on a GPU or not to the end before those that have: a
#                command cut short by the deadline loses what is known already)
# The device command: OUT=$OUT scripts/gpu-check.sh all   (docs/gpu.md), timeout_s=600.
# Deadline: the whole check ends within GPU_CHECK_SECONDS (default 540) of its start: every command's
# own limit is cut to what is left, and a command that cannot start in time is reported NOT RUN, a
# failure. When OUT is set, $OUT holds at most four files (the device tool returns 8): versions.log,
# summary.txt (a line per step as it ends), logs.tar.gz (every step's log, rewritten as each step
# ends) and table.md (bench); locally the logs are in build-gpu/logs. Exit status: 0 when every
# step asked for passed, 1 otherwise. GPU_CHECK_PYTHON names the Python with torch (default python3);
# GPU_CHECK_SYNTHETIC the synthetic benchmark's model and sizes (default ResNet-50, batch 64).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=$root/build-gpu
logs=$build/logs
nccl_tag=${NCCL_TAG:-v2.30.7-1}
python=${GPU_CHECK_PYTHON:-python3}
deadline=${GPU_CHECK_SECONDS:-540}
prebuilt=$root/.gpu/prebuilt
# Every collective NCCL has, Ring and Simple only: a fraction of its kernels, so the build fits
# (GPU_CHECK_NCCL_FULL=1 builds all; the runs then let NCCL choose). Every collective, not only
# those we call: NCCL runs one through another (2.30 turns grouped ncclBroadcasts, our uneven
# allgather, into AllGatherV) and runs a collective without kernels as a no-op, silently. NCCL's
# src/device/generate.py names a reduction "<coll> <redop> <type> <algo> <proto>" and the others
# "<coll> <algo> <proto>"; the build is checked for a kernel source of each (nccl_collectives_built).
nccl_only_funcs="AllReduce * * RING SIMPLE|Reduce * * RING SIMPLE|ReduceScatter * * RING SIMPLE|AllGather RING SIMPLE|AllGatherV RING SIMPLE|Broadcast RING SIMPLE|SendRecv"
nccl_kernel_sources=(all_reduce_sum_f32.cu reduce_sum_f32.cu reduce_scatter_sum_f32.cu all_gather.cu all_gather_v.cu broadcast.cu sendrecv.cu)

# nccl_collectives_built DIR: every collective has kernels in the NCCL built in DIR/out.
nccl_collectives_built() {
  local source missing=0
  for source in "${nccl_kernel_sources[@]}"; do
    if [[ ! -f $1/out/obj/device/gensrc/$source ]]; then
      echo "NCCL was built without $source (ONLY_FUNCS='$nccl_only_funcs' matches none of its kernels)" >&2
      missing=1
    fi
  done
  return $missing
}
gpu_programs=(test_nccl_collectives test_nccl_process_sets test_nccl_mixed_workload nccl_allreduce_benchmark)

# build_nccl SRC_TARBALL DIR: NCCL for sm_90 in DIR/out (resumes a build that stopped).
build_nccl() {
  local tarball=$1 dir=$2
  if [[ ! -d $dir/src ]]; then
    mkdir -p "$dir/src"
    tar -xzf "$tarball" -C "$dir/src" --strip-components=1
  fi
  local only=() cuda=${CUDA_HOME:-/usr/local/cuda} include=$dir/cuda-include entry
  [[ -z "${GPU_CHECK_NCCL_FULL:-}" ]] && only=("ONLY_FUNCS=$nccl_only_funcs")
  # NCCL regenerates its kernel sources only when generate.py changes: a build resumed with another
  # function set must drop them.
  local wanted="${only[*]:-all}"
  if [[ -f $dir/only-funcs && $(cat "$dir/only-funcs") != "$wanted" ]]; then
    rm -rf "$dir/out/obj/device/gensrc" "$dir/out/obj/device/genobj"
  fi
  mkdir -p "$dir" && echo "$wanted" > "$dir/only-funcs"
  # The toolkit's headers without the NCCL that may be installed beside them (here 2.28.9 in
  # /usr/local/cuda/include): NCCL puts the toolkit's include first, so its own device headers
  # would otherwise come from the older release.
  if [[ ! -d $include ]]; then
    mkdir -p "$include"
    for entry in "$cuda"/include/*; do
      [[ ${entry##*/} == nccl* ]] || ln -s "$entry" "$include/"
    done
  fi
  make -C "$dir/src" -j "$(nproc)" src.build BUILDDIR="$dir/out" CUDA_HOME="$cuda" CUDA_INC="$include" \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" "${only[@]}" || return 1
  nccl_collectives_built "$dir"
}

prepare() {
  set -e
  mkdir -p .gpu
  cp /work/shared/gpu/fetch-debs.sh /work/shared/gpu/unpack-debs.sh .gpu/
  bash .gpu/fetch-debs.sh .gpu/debs
  # PMIx's headers beside the carried libpmix: the machine's own (older) pmix.h compiled calls to
  # functions the carried library lacks, and the LibTorch build failed to link (first device run).
  (cd .gpu/debs && apt-get download libpmix-dev > /dev/null 2>&1 || apt-get download libpmix-dev)
  local mirror=${NCCL_MIRROR:-/work/.mirror/NVIDIA+nccl/repo}
  if [[ -d "$mirror" ]]; then
    git -C "$mirror" archive --format=tar.gz --prefix=nccl/ "$nccl_tag" > .gpu/nccl-src.tar.gz
    echo "NCCL $nccl_tag source: .gpu/nccl-src.tar.gz ($(du -h .gpu/nccl-src.tar.gz | cut -f1))"
  else
    echo "no NCCL mirror at $mirror (fetch github:NVIDIA/nccl, then NCCL_MIRROR=<its git dir>):" \
         "no NCCL >= 2.30: the multirank step will not run" >&2
  fi
  # Horovod 0.28.1's own test_torch.py, for the horovod step (read from the fetched copy, carried,
  # never committed).
  local horovod=${HOROVOD_MIRROR:-/work/.mirror/horovod+horovod/repo}
  if [[ -d "$horovod" ]]; then
    mkdir -p .gpu/horovod-tests/parallel .gpu/horovod-tests/utils
    git -C "$horovod" show v0.28.1:test/parallel/test_torch.py > .gpu/horovod-tests/parallel/test_torch.py
    git -C "$horovod" show v0.28.1:test/utils/common.py > .gpu/horovod-tests/utils/common.py
    # common.py imports the `mock` backport, which the GPU machine's Python lacks (the device
    # tool's KINDS.md lists its packages): Debian's pure-Python package (python3-mock, setup.sh)
    # travels beside the suite, on PYTHONPATH there only if that Python cannot import its own.
    rm -rf .gpu/horovod-tests/pylib && mkdir -p .gpu/horovod-tests/pylib
    cp -r "$(/usr/bin/python3 -c 'import mock, os; print(os.path.dirname(mock.__file__))')" .gpu/horovod-tests/pylib/ \
      || echo "no python3-mock here (scripts/setup.sh): the horovod step needs mock on the GPU machine" >&2
    find .gpu/horovod-tests/pylib -name __pycache__ -prune -exec rm -rf {} +
  else
    echo "no Horovod mirror at $horovod (fetch github:horovod/horovod): the horovod step will not run" >&2
  fi
  if [[ ${GPU_CHECK_PREBUILD:-1} == 0 ]]; then du -sh .gpu; return; fi
  command -v nvcc > /dev/null || PATH=/usr/local/cuda/bin:$PATH
  if [[ -f .gpu/nccl-src.tar.gz ]]; then
    local t0=$SECONDS
    mkdir -p build-gpu-nccl
    build_nccl .gpu/nccl-src.tar.gz "$root/build-gpu-nccl" > build-gpu-nccl/build.log 2>&1 \
      || { echo "NCCL build failed: see build-gpu-nccl/build.log" >&2; return 1; }
    mkdir -p .gpu/nccl/lib
    cp -L build-gpu-nccl/out/lib/libnccl.so.2 .gpu/nccl/lib/
    strip --strip-unneeded .gpu/nccl/lib/libnccl.so.2
    echo "NCCL $nccl_tag for sm_90: .gpu/nccl/lib ($(du -h .gpu/nccl/lib/libnccl.so.2 | cut -f1), $((SECONDS - t0)) s)"
  fi
  # The GPU programs: one CUDA runtime each (gpu_link_one_cuda_runtime), checked here.
  local pre_build=$root/build-gpu-prebuilt launcher=()
  command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache \
    -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  cmake -S "$root" -B "$pre_build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHVD_WITH_CUDA=ON -DHVD_WITH_TORCH=OFF \
    -DHVD_BUILD_EXAMPLES=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON "${launcher[@]}" > /dev/null
  cmake --build "$pre_build" -j "$(nproc)" --target horovodcpp "${gpu_programs[@]}"
  rm -rf "$prebuilt"
  mkdir -p "$prebuilt/horovodcpp" "$prebuilt/tests/gpu" "$prebuilt/include"
  # The NCCL header the programs were built with, for a machine whose wheel and toolkit have none.
  cp "$(awk -F= '/^NCCL_INCLUDE_DIR:/ {print $2}' "$pre_build/CMakeCache.txt")/nccl.h" "$prebuilt/include/"
  cp -P "$pre_build"/horovodcpp/libhorovodcpp.so* "$prebuilt/horovodcpp/"
  local p
  for p in "${gpu_programs[@]}"; do cp "$pre_build/tests/gpu/$p" "$prebuilt/tests/gpu/"; done
  ctest --test-dir "$pre_build" -R '^gpu_link_one_cuda_runtime$' --output-on-failure
  strip --strip-unneeded "$prebuilt"/horovodcpp/libhorovodcpp.so.*.* "$prebuilt"/tests/gpu/*
  echo "$(git rev-parse HEAD)$( [[ -n $(git status --porcelain --untracked-files=no) ]] && echo ' with uncommitted changes')" \
    > "$prebuilt/commit"
  echo "GPU programs for sm_90 at $(git rev-parse --short HEAD): .gpu/prebuilt ($(du -sh "$prebuilt" | cut -f1))"
  du -sh .gpu
}

if [[ "${1:-}" == "prepare" || "${1:-}" == "--prepare" ]]; then
  prepare
  exit $?
fi
if [[ "${1:-}" == "build-nccl" ]]; then  # the nccl step's command (it runs under a time limit)
  build_nccl "$2" "$3"
  exit $?
fi
if (( $# == 0 )); then
  sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  exit 2
fi

mkdir -p "$logs"
rm -f "$logs"/*.rc
failed=0
started=$(date +%s)
elapsed() { echo "$(( $(date +%s) - started ))s"; }
left() { echo $(( deadline - ($(date +%s) - started) )); }
# record STEP RESULT: one summary line, here and in $OUT.
record() {
  echo "== $1: $2 ($(elapsed))" | tee -a "$logs/summary.txt"
  if [[ -n "${OUT:-}" ]]; then echo "$1: $2" >> "$OUT/summary.txt"; fi
}
# run LOG SECONDS COMMAND...: appends the command's output to the step's log, with a limit cut to
# the check's deadline; a command that cannot start in time is NOT RUN (exit 125).
run() {
  local log=$1 limit=$2; shift 2
  local remaining
  remaining=$(left)
  if (( remaining < 15 )); then
    echo "NOT RUN (the check's deadline of ${deadline}s): $*" >> "$log"
    return 125
  fi
  (( limit > remaining - 5 )) && limit=$(( remaining - 5 ))
  echo "\$ $*" >> "$log"
  timeout --kill-after=5 "$limit" "$@" >> "$log" 2>&1
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
  torch_prefix=$("$python" -c "import torch; print(torch.utils.cmake_prefix_path)" 2>/dev/null || true)
  # Build against the NCCL PyTorch loads (the nvidia-nccl wheel), so one process never holds two
  # libnccl.so.2; the wheel ships libnccl.so.2 only: link through a libnccl.so of our own. Where
  # the wheel keeps it (nvidia/nccl/lib, nvidia/cu13/lib, ...) is searched for; its nccl.h beside
  # it, else the toolkit's, else the one prepare carried (the release the programs were built with).
  nccl_args=()
  nccl_header=/usr/local/cuda/include/nccl.h
  [[ -f $nccl_header ]] || nccl_header=$prebuilt/include/nccl.h
  local nccl_lib
  nccl_lib=$("$python" -c "import glob, nvidia; hits=[h for p in nvidia.__path__ for h in sorted(glob.glob(p + '/**/libnccl.so.2', recursive=True))]; print(hits[0].rsplit('/', 1)[0] if hits else '')" 2>/dev/null || true)
  if [[ -n $nccl_lib ]]; then
    [[ -f $nccl_lib/../include/nccl.h ]] && nccl_header=$(cd "$nccl_lib/../include" && pwd)/nccl.h
    mkdir -p .gpu/nccl-link
    ln -sf "$nccl_lib/libnccl.so.2" .gpu/nccl-link/libnccl.so
    nccl_args=(-DNCCL_INCLUDE_DIR="${nccl_header%/nccl.h}" -DNCCL_LIBRARY="$root/.gpu/nccl-link/libnccl.so")
    export LD_LIBRARY_PATH=$nccl_lib:${LD_LIBRARY_PATH:-}
  fi
  # The carried programs load the CUDA runtime of the machine's toolkit, else the one of PyTorch's
  # nvidia wheels.
  local cuda_lib=${CUDA_HOME:-/usr/local/cuda}/lib64
  if [[ ! -f $cuda_lib/libcudart.so.13 ]]; then
    cuda_lib=$("$python" -c "import glob, nvidia; hits=[h for p in nvidia.__path__ for h in glob.glob(p + '/**/libcudart.so.13', recursive=True)]; print(hits[0].rsplit('/', 1)[0] if hits else '')" 2>/dev/null || true)
  fi
  [[ -n $cuda_lib && -d $cuda_lib ]] && export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:$cuda_lib
  # NCCL >= 2.30 (same soname, loaded instead of the wheel's by the multirank runs): built here by
  # prepare and carried, or built on the machine by the nccl step.
  built_nccl=""
  local dir
  for dir in "$build/nccl/lib" "$root/.gpu/nccl/lib"; do
    if [[ -f $dir/libnccl.so.2 ]]; then built_nccl=$dir; break; fi
  done
  carried=no
  if [[ -x $prebuilt/tests/gpu/test_nccl_collectives ]]; then carried=yes; fi
  # The PMIx start check against the PMIx that the carried Open MPI loads, never the machine's
  # headers with the carried library; without the carried headers, no start check.
  pmix_args=()
  if [[ -n ${OPAL_PREFIX:-} ]]; then
    local pmix=$OPAL_PREFIX/lib/x86_64-linux-gnu/pmix2
    if [[ -f $pmix/include/pmix.h && -e $pmix/lib/libpmix.so ]]; then
      pmix_args=(-DPMIX_INCLUDE_DIR="$pmix/include" -DPMIX_LIBRARY="$pmix/lib/libpmix.so")
    else
      pmix_args=(-DPMIX_INCLUDE_DIR=PMIX_INCLUDE_DIR-NOTFOUND -DPMIX_LIBRARY=PMIX_LIBRARY-NOTFOUND)
    fi
  fi
}

# program NAME: the GPU program built on the machine, else the carried one.
program() {
  if [[ -x $build/tests/gpu/$1 ]]; then echo "$build/tests/gpu/$1"; else echo "$prebuilt/tests/gpu/$1"; fi
}

versions() {
  {
    date -u +%FT%TZ
    # The device tool's machines run under Firecracker or gVisor (kernel 4.4.0): compute-sanitizer
    # and ncu refuse the GPU under gVisor, so the runtime is part of what a result means.
    echo "kernel: $(uname -sr)$([[ $(uname -r) == 4.4.0 ]] && echo " (gVisor)")"
    command -v nvidia-smi > /dev/null && nvidia-smi -L && nvidia-smi --query-gpu=driver_version --format=csv,noheader
    "$python" -c "import torch; c = torch.cuda.is_available(); print('PyTorch', torch.__version__, 'CUDA', torch.version.cuda, 'NCCL', torch.cuda.nccl.version() if c else None, 'devices', torch.cuda.device_count())" 2>&1
    nvcc --version 2>/dev/null | tail -n 2
    echo "NCCL headers: $nccl_header ($(awk '/#define NCCL_VERSION_CODE/ {print $3}' "$nccl_header" 2>/dev/null))"
    echo "NCCL >= 2.30 for several ranks per GPU: ${built_nccl:-none}"
    echo "carried GPU programs: $carried$( [[ $carried == yes ]] && echo " (built at $(cat "$prebuilt/commit" 2>/dev/null))")"
    [[ $carried == yes ]] && ldd "$prebuilt/tests/gpu/test_nccl_collectives" | grep -E "not found|libnccl|libcudart|libmpi"
    mpirun --version 2>/dev/null | head -n 1
    command -v compute-sanitizer > /dev/null && compute-sanitizer --version | tail -n 1
  } 2>&1
}

# finish STEP RC: records the outcome and puts the logs so far in $OUT at once.
finish() {
  local step=$1 rc=$2
  if (( rc == 0 )); then
    record "$step" ok
  elif (( rc == 125 )) || grep -q "^NOT RUN (the check's deadline" "$logs/$step.log"; then
    failed=1
    record "$step" "NOT RUN or cut short by the deadline (see $step.log)"
  else
    failed=1
    record "$step" "FAILED (exit $rc; see $step.log)"
  fi
  if [[ -n "${OUT:-}" ]]; then tar -czf "$OUT/logs.tar.gz.part" -C "$logs" . && mv "$OUT/logs.tar.gz.part" "$OUT/logs.tar.gz"; fi
}

# --- steps (each STEP LOG; returns 0 when it passed) ----------------------------------------------
step_configure() {
  local log=$1
  if [[ -z "$torch_prefix" ]]; then echo "$python has no torch: no LibTorch to build against" >> "$log"; return 1; fi
  local generator=()
  command -v ninja > /dev/null && generator=(-G Ninja)
  run "$log" 240 cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DHVD_WITH_CUDA=ON -DHVD_WITH_TORCH=ON -DHVD_BUILD_EXAMPLES=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_PREFIX_PATH="$torch_prefix" "${nccl_args[@]}" "${pmix_args[@]}"
}

torch_targets=(horovodcpp horovodcpp_torch test_torch mnist torch_step_benchmark)  # then synthetic_benchmark
step_build() {
  local log=$1 targets=("${torch_targets[@]}") jobs
  [[ -f $build/CMakeCache.txt ]] || { echo "run the configure step first" >> "$log"; return 1; }
  [[ $carried == no ]] && targets+=("${gpu_programs[@]}")
  # The Python front end, when configure found a Python with torch, its headers and pybind11.
  grep -q '^build python/horovod/_horovodcpp' "$build/build.ninja" 2>/dev/null && targets+=(hvd_python)
  jobs=$(nproc)
  # Beside the GPU steps, leave their ranks a few cores.
  [[ ${beside_gpu_steps:-} == yes ]] && (( jobs > 8 )) && jobs=$(( jobs - 4 ))
  run "$log" 480 cmake --build "$build" -j "$jobs" --target "${targets[@]}"
  local rc=$?
  put_rc build $rc  # what the steps waiting for the build need is there (or not) now
  # The synthetic benchmark (ResNet-50, bench) after them, so that a failure to build it (its c10d
  # Gloo peer needs LibTorch's Gloo headers) fails only its row.
  if (( rc == 0 )); then
    run "$log" 240 cmake --build "$build" -j "$jobs" --target synthetic_benchmark
    put_rc synthetic $?
  fi
  return $rc
}

# put_rc NAME RC: NAME.rc in the logs, whole when it appears (steps in the foreground wait for it).
put_rc() {
  echo "$2" > "$logs/$1.rc.part" && mv "$logs/$1.rc.part" "$logs/$1.rc"
}

# With carried GPU programs, configure and build run in the background; await_build waits for them
# (within the deadline) and records both. Returns 0 when the build is there.
background_build=""
start_background_build() {
  : > "$logs/configure.log"; : > "$logs/build.log"
  beside_gpu_steps=yes
  (
    step_configure "$logs/configure.log"; rc=$?
    put_rc configure $rc
    if (( rc == 0 )); then step_build "$logs/build.log"
    else echo "configure failed" >> "$logs/build.log"; put_rc build 1; fi
  ) &
  background_build=$!
  echo "== configure, build: in the background (pid $background_build) beside the GPU steps"
}
# wait_for NAME: until the background build has written NAME.rc (or has ended).
wait_for() {
  while [[ -n $background_build && ! -f $logs/$1.rc ]] && kill -0 "$background_build" 2> /dev/null; do sleep 1; done
}
await_build() {
  if [[ -n $background_build && $build_recorded == no ]]; then
    wait_for build
    build_recorded=yes
    finish configure "$(cat "$logs/configure.rc" 2>/dev/null || echo 1)"
    finish build "$(cat "$logs/build.rc" 2>/dev/null || echo 1)"
  fi
  [[ -x $build/tests/torch/test_torch ]] && [[ $(cat "$logs/build.rc" 2>/dev/null || echo 1) == 0 ]]
}

# A GPU test that skips itself on a GPU machine is a failure.
no_skips() {
  if grep -qE "SKIPPED|\*\*\*Skipped" "$1"; then echo "FAIL: a GPU test skipped itself on a GPU machine" >> "$1"; return 1; fi
}

step_tests() {
  local log=$1 rc=0
  [[ $carried == no ]] && { await_build || { echo "no build: the build step failed" >> "$log"; return 1; }; }
  run "$log" 120 mpirun "${mpirun_flags[@]}" -np 1 "$(program test_nccl_collectives)" || rc=1
  # HOROVOD_GPU_OPERATIONS=mpi: the MPI ops on device tensors, staged through host memory.
  run "$log" 90 env HOROVOD_GPU_OPERATIONS=mpi mpirun "${mpirun_flags[@]}" -np 1 "$(program test_nccl_collectives)" \
    || rc=1
  # Carried programs passed the link check where prepare built them; the machine's at the torch step.
  [[ $carried == no ]] && { link_check "$log" || rc=1; }
  no_skips "$log" || rc=1
  return $rc
}

step_nccl() {
  local log=$1
  [[ -f .gpu/nccl-src.tar.gz ]] || { echo "no .gpu/nccl-src.tar.gz: run prepare here and carry .gpu" >> "$log"; return 1; }
  local t0=$SECONDS
  run "$log" 540 bash "$0" build-nccl .gpu/nccl-src.tar.gz "$build/nccl-build"
  local rc=$?
  echo "nccl build: $((SECONDS - t0)) s this run" >> "$log"
  if [[ -f $build/nccl-build/out/lib/libnccl.so.2 ]]; then
    mkdir -p "$build/nccl/lib"
    cp -L "$build/nccl-build/out/lib/libnccl.so.2" "$build/nccl/lib/"
    ls -l "$build/nccl/lib" >> "$log"
  fi
  return $rc
}

# The environment of several ranks on one GPU, with NCCL >= 2.30 (only Ring and Simple kernels
# unless GPU_CHECK_NCCL_FULL is set: NCCL must then choose them).
# Set by the multirank step when two ranks pass only without CUDA IPC (see there).
nccl_fallback=""
multirank_env() {
  local forced="NCCL_ALGO=Ring NCCL_PROTO=Simple"
  [[ -n "${GPU_CHECK_NCCL_FULL:-}" ]] && forced=""
  echo env LD_LIBRARY_PATH="$built_nccl:$LD_LIBRARY_PATH" NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_MAX_CTAS=2 \
    NCCL_NVLS_ENABLE=0 $forced $nccl_fallback
}

step_multirank() {
  local log=$1 rc=0
  if [[ -z $built_nccl ]]; then echo "no NCCL >= 2.30: carry .gpu/nccl (prepare) or run the nccl step first" >> "$log"; return 1; fi
  [[ $carried == no ]] && { await_build || { echo "no build: the build step failed" >> "$log"; return 1; }; }
  local env_cmd collectives processes mixed
  read -r -a env_cmd <<< "$(multirank_env)"
  collectives=$(program test_nccl_collectives)
  processes=$(program test_nccl_process_sets)
  mixed=$(program test_nccl_mixed_workload)
  "${env_cmd[@]}" "$python" -c "import ctypes; v=ctypes.c_int(); ctypes.CDLL('libnccl.so.2').ncclGetVersion(ctypes.byref(v)); print('NCCL loaded:', v.value)" >> "$log" 2>&1
  if ! run "$log" 120 "${env_cmd[@]}" mpirun "${mpirun_flags[@]}" -np 2 "$collectives"; then
    # Under gVisor (versions.log's kernel 4.4.0) CUDA IPC between processes may be refused: once
    # more through host shared memory, and if that passes, every later multi-rank run goes so.
    echo "np=2 failed: once more with NCCL_P2P_DISABLE=1 (no CUDA IPC between the ranks)" >> "$log"
    nccl_fallback=NCCL_P2P_DISABLE=1
    read -r -a env_cmd <<< "$(multirank_env)"
    if run "$log" 120 "${env_cmd[@]}" mpirun "${mpirun_flags[@]}" -np 2 "$collectives"; then
      echo "== note: two ranks on the GPU passed only with NCCL_P2P_DISABLE=1; later multi-rank runs use it" |
        tee -a "$logs/summary.txt"
      [[ -n "${OUT:-}" ]] && echo "note: multi-rank runs from here on with NCCL_P2P_DISABLE=1" >> "$OUT/summary.txt"
    else
      nccl_fallback=""
      read -r -a env_cmd <<< "$(multirank_env)"
    fi
    rc=1
  fi
  run "$log" 150 "${env_cmd[@]}" mpirun "${mpirun_flags[@]}" -np 4 "$collectives" || rc=1
  # 2 nodes x 2 ranks: hierarchical allreduce, and device Adasum on one chunk per local rank.
  run "$log" 90 "${env_cmd[@]}" HVD_TEST_FAKE_LOCAL_SIZE=2 HOROVOD_HIERARCHICAL_ALLREDUCE=1 \
    mpirun "${mpirun_flags[@]}" -np 4 "$collectives" "[allreduce],[adasum]" || rc=1
  # The same with the ranks dealt to the nodes round robin (mpirun --map-by node): node-major
  # order is then a real permutation of the ranks.
  run "$log" 90 "${env_cmd[@]}" HVD_TEST_FAKE_LOCAL_SIZE=2 HVD_TEST_FAKE_PLACEMENT=round_robin \
    HOROVOD_HIERARCHICAL_ALLREDUCE=1 mpirun "${mpirun_flags[@]}" -np 4 "$collectives" "[allreduce],[adasum]" || rc=1
  run "$log" 90 "${env_cmd[@]}" HOROVOD_DYNAMIC_PROCESS_SETS=1 mpirun "${mpirun_flags[@]}" -np 4 "$processes" || rc=1
  # A random mix of every collective, in each rank's own order, a set of ranks 0 and 1 beside.
  run "$log" 90 "${env_cmd[@]}" HOROVOD_DYNAMIC_PROCESS_SETS=1 HVD_TEST_ROUNDS=20 mpirun "${mpirun_flags[@]}" -np 3 \
    "$mixed" || rc=1
  no_skips "$log" || rc=1
  return $rc
}

# link_check LOG: one CUDA runtime in every GPU program of the machine's build.
link_check() {
  run "$1" 60 ctest --test-dir "$build" -R '^gpu_link_one_cuda_runtime$' --output-on-failure
}

step_torch() {
  local log=$1 rc=0
  await_build || { echo "no LibTorch build: the configure or build step failed" >> "$log"; return 1; }
  link_check "$log" || rc=1
  run "$log" 150 env HVD_TEST_EXPECT_CUDA=1 OMP_NUM_THREADS=4 mpirun "${mpirun_flags[@]}" -np 1 \
    "$build/tests/torch/test_torch" "[cuda]" || rc=1
  if [[ -n $built_nccl ]]; then
    local env_cmd
    read -r -a env_cmd <<< "$(multirank_env)"
    run "$log" 150 "${env_cmd[@]}" HVD_TEST_EXPECT_CUDA=1 OMP_NUM_THREADS=4 mpirun "${mpirun_flags[@]}" -np 2 \
      "$build/tests/torch/test_torch" "[cuda]" || rc=1
  fi
  no_skips "$log" || rc=1
  return $rc
}

# Horovod 0.28.1's test_torch.py, unmodified, through our horovod.torch at np=2 (the suite assumes
# two ranks or more: at np=1 its process-set and join tests fail under Horovod itself too). Where
# torch sees a GPU its tests add CUDA tensors to their dtypes and run the GPU-only cases; they put
# them on device hvd.local_rank(), so on one GPU each rank is its own node (HVD_TEST_FAKE_LOCAL_SIZE=1:
# local rank 0) and NCCL >= 2.30 lets both ranks use it.
step_horovod() {
  local log=$1 suite=$root/.gpu/horovod-tests/parallel
  [[ -f $suite/test_torch.py ]] || { echo "no .gpu/horovod-tests: run prepare here (with a fetch of horovod) and carry .gpu" >> "$log"; return 1; }
  if [[ -z $built_nccl ]]; then echo "no NCCL >= 2.30: two ranks cannot share the GPU" >> "$log"; return 1; fi
  await_build
  ls "$build"/python/horovod/_horovodcpp*.so > /dev/null 2>&1 || {
    echo "no Python front end in the build (configure: $(grep -h 'Python front end\|python3-dev\|pybind11' "$logs/configure.log" 2>/dev/null | head -n 3))" >> "$log"; return 1; }
  local env_cmd rc pythonpath=$build/python
  "$python" -c 'import mock' 2> /dev/null || pythonpath+=:$root/.gpu/horovod-tests/pylib
  read -r -a env_cmd <<< "$(multirank_env)"
  # `import torch` loads libnccl.so.2 before horovod's extension does; should that be the wheel's
  # NCCL (2.28.9: one rank per GPU; torch may load its CUDA libraries by path), both would use it.
  # Preloaded, the NCCL >= 2.30 built for two ranks on the GPU serves both; the log shows which.
  env_cmd+=(LD_PRELOAD="$built_nccl/libnccl.so.2")
  "${env_cmd[@]}" PYTHONPATH="$pythonpath" "$python" -c "import torch, horovod.torch as hvd
print('libnccl in the Python process:', sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libnccl' in l}))
print('hvd.nccl_built():', hvd.nccl_built(), ' torch.cuda.nccl.version():', torch.cuda.nccl.version())" >> "$log" 2>&1
  (cd "$suite" && run "$log" 240 "${env_cmd[@]}" HVD_TEST_FAKE_LOCAL_SIZE=1 mpirun "${mpirun_flags[@]}" -np 2 \
     env PYTHONPATH="$pythonpath" PYTHONUNBUFFERED=1 "$python" -m pytest -q -rs --color=no -p no:cacheprovider test_torch.py)
  rc=$?
  grep -E "^[0-9]+ (passed|failed)" "$log" | tail -n 2 | tee -a "$logs/summary.txt" > /dev/null
  return $rc
}

# only_nccl_kernel_probes LOG: the tests passed and every error compute-sanitizer counted is an API
# error NCCL's kernel setup (ncclInitKernelsForDevice) hit and handles: the wheel's NCCL asks for
# the attributes of kernels it has no image for on this GPU (first seen on the H200, 2.28.9).
only_nccl_kernel_probes() {
  awk '
    /========= Program hit cudaErrorNoKernelImageForDevice/ { pending = 1; next }
    pending && /Host Frame:/ { if ($0 ~ /ncclInitKernelsForDevice/) probes++; pending = 0 }
    /ERROR SUMMARY: [0-9]+ error/ { match($0, /[0-9]+ error/); total += substr($0, RSTART, RLENGTH) + 0 }
    /All tests passed/ { passed = 1 }
    END { exit !(passed && total > 0 && total == probes) }' "$1"
}

step_sanitizer() {
  local log=$1 rc=0 tool
  command -v compute-sanitizer > /dev/null || { echo "compute-sanitizer is not on the PATH" >> "$log"; return 1; }
  [[ $carried == no ]] && { await_build || { echo "no build: the build step failed" >> "$log"; return 1; }; }
  for tool in memcheck synccheck; do
    local tool_log=$logs/sanitizer-$tool.log tool_rc
    : > "$tool_log"
    run "$tool_log" 180 mpirun "${mpirun_flags[@]}" -np 1 compute-sanitizer --tool "$tool" --error-exitcode 3 \
      "$(program test_nccl_collectives)" "~[readiness]"
    tool_rc=$?
    cat "$tool_log" >> "$log"
    if (( tool_rc != 0 )) && only_nccl_kernel_probes "$tool_log"; then
      echo "$tool: every error reported is NCCL's own probe of a kernel this GPU has no image for" \
        "(cudaErrorNoKernelImageForDevice in ncclInitKernelsForDevice, which NCCL handles): none is ours" >> "$log"
      tool_rc=0
    fi
    (( tool_rc == 0 )) || rc=1
  done
  if grep -q "Device not supported" "$log"; then
    echo "compute-sanitizer refused this GPU ('Device not supported', as under gVisor): nothing was checked" >> "$log"
  fi
  return $rc
}

step_mnist() {
  local log=$1 rc=0
  local mnist=$build/examples/mnist/mnist
  [[ -d data/mnist ]] || { echo "no data/mnist: run scripts/fetch-mnist.sh here and carry data" >> "$log"; return 1; }
  await_build || { echo "no LibTorch build: the configure or build step failed" >> "$log"; return 1; }
  run "$log" 150 mpirun "${mpirun_flags[@]}" -np 1 "$mnist" --device cuda --epochs 1 --checkpoint '' \
    --data data/mnist || rc=1
  run "$log" 150 env OMP_NUM_THREADS=8 mpirun "${mpirun_flags[@]}" -np 1 "$mnist" --device cpu --epochs 1 \
    --checkpoint '' --data data/mnist || rc=1
  grep -E "^mnist:|test: " "$log" | tee -a "$logs/summary.txt" > /dev/null
  return $rc
}

# synthetic_row FILE: our table's row from the synthetic benchmark's table in FILE: images per
# second with DistributedOptimizer (hvd) and plain SGD (none), and the step-time ratio hvd/none
# from the median of the per-iteration ratios (pairs that ran side by side).
synthetic_row() {
  awk -F'|' '
    /^### synthetic benchmark/ { table = 1; split($0, head, ", "); model = head[1]; sub(/.*: /, "", model); batch = head[2] }
    table && NF > 7 {
      mode = $2; gsub(/ /, "", mode)
      if (mode == "hvd") { split($4, h, "±"); hvd = h[1] }
      if (mode == "none") { split($4, n, "±"); none = n[1]; paired = $7; gsub(/[ x]/, "", paired) }
    }
    END {
      if (hvd == "" || none == "" || paired + 0 <= 0) exit 1
      gsub(/ /, "", hvd); gsub(/ /, "", none)
      printf "| training step (%s, %s, synthetic benchmark), np=1 | %s img/s | %s img/s | plain LibTorch SGD (`--comm none`), iterations alternating | %.3fx |\n", model, batch, hvd, none, 1 / paired
    }' "$1"
}

step_bench() {
  local log=$1 rc=0
  export HOROVOD_CYCLE_TIME=${HOROVOD_CYCLE_TIME:-1}
  [[ $carried == no ]] && { await_build || { echo "no build: the build step failed" >> "$log"; return 1; }; }
  local benchmark
  benchmark=$(program nccl_allreduce_benchmark)
  run "$log" 120 mpirun "${mpirun_flags[@]}" -np 1 "$benchmark" || rc=1
  if [[ -n $built_nccl ]]; then
    local env_cmd
    read -r -a env_cmd <<< "$(multirank_env)"
    run "$log" 120 "${env_cmd[@]}" mpirun "${mpirun_flags[@]}" -np 2 "$benchmark" || rc=1
  fi
  if await_build; then
    # Nine rounds in rotating order, the median of each round's ratio, and a control row (plain
    # SGD again on its own copy of the model: the noise floor): one round, plain first, read
    # 1.051x on the H200 where the optimizer at np=1 reduces nothing.
    run "$log" 120 mpirun "${mpirun_flags[@]}" -np 1 "$build/tests/gpu/torch_step_benchmark" 200 --rounds 9 || rc=1
  else
    echo "no LibTorch build: no DistributedOptimizer step rows" >> "$log"; rc=1
  fi
  {
    echo "| measurement | horovodcpp | reference | reference is | ratio |"
    echo "|---|---|---|---|---|"
    grep '^| ' "$log" | grep -v -e '^| measurement' -e '^|---'
  } > "$logs/table.md"
  # ResNet-50 through the synthetic benchmark: DistributedOptimizer (hvd) and plain SGD (none)
  # iteration by iteration in one launch; its own table goes below ours.
  local synthetic=$build/examples/synthetic_benchmark/synthetic_benchmark out=$logs/synthetic.md
  wait_for synthetic
  if [[ -x $synthetic ]]; then
    : > "$out"
    local options
    read -r -a options <<< "${GPU_CHECK_SYNTHETIC:-"--model resnet50 --batch-size 64 --num-warmup-batches 10 --num-batches-per-iter 10 --num-iters 6"}"
    run "$out" 240 mpirun "${mpirun_flags[@]}" -np 1 "$synthetic" "${options[@]}" --comm hvd,none || rc=1
    cat "$out" >> "$log"
    synthetic_row "$out" >> "$logs/table.md" || rc=1
    { echo; sed -n '/^### synthetic benchmark/,$p' "$out"; } >> "$logs/table.md"
  else
    echo "no synthetic_benchmark (its build failed: see build.log): no ResNet-50 row" >> "$log"; rc=1
  fi
  cat "$logs/table.md" >> "$log"
  if [[ -n "${OUT:-}" ]]; then cp "$logs/table.md" "$OUT/table.md"; fi
  return $rc
}

setup
steps=("$@")
if [[ " ${steps[*]} " == *" all "* ]]; then steps=(configure build tests multirank torch horovod bench mnist sanitizer); fi
for step in "${steps[@]}"; do
  if ! declare -F "step_$step" > /dev/null; then
    echo "unknown step '$step' (run without arguments for the list)" >&2
    exit 2
  fi
done
: > "$logs/summary.txt"
versions | tee "$logs/versions.log"
[[ -n "${OUT:-}" ]] && cp "$logs/versions.log" "$OUT/versions.log"
# Carried programs: configure and build need not hold up the GPU steps.
if [[ $carried == yes && " ${steps[*]} " == *" configure "* && " ${steps[*]} " == *" build "* ]]; then
  build_recorded=no
  start_background_build
  kept=()
  for step in "${steps[@]}"; do [[ $step == configure || $step == build ]] || kept+=("$step"); done
  steps=("${kept[@]}")
fi
for step in "${steps[@]}"; do
  : > "$logs/$step.log"
  echo "== $step ..."
  "step_$step" "$logs/$step.log"
  rc=$?
  # Reread the machine after a step that may have produced what later steps use.
  [[ $step == nccl ]] && setup
  finish "$step" $rc
  tail -n 15 "$logs/$step.log"
done
await_build > /dev/null
[[ -n $background_build ]] && wait "$background_build"
exit $failed
