#!/usr/bin/env bash
# The test command: installs dependencies, builds everything, and runs every test with ctest
# (multi-process tests run under mpirun at several sizes, each with a timeout), then the
# sanitizer builds.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/fetch-mnist.sh   # the real digits the MNIST test trains on
bash scripts/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI's shared-memory transport wants its session directory on a writable tmpfs or /tmp.
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure --timeout 600 "$@")
# Then the lean sanitizer builds of the core, the unit tests, the np=2 MPI tests and the codec
# fuzz test: ASan+UBSan and TSan (scripts/sanitize.sh; HVD_SKIP_SANITIZERS=1 skips them).
[ -n "${HVD_SKIP_SANITIZERS:-}" ] || bash scripts/sanitize.sh
