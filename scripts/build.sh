#!/usr/bin/env bash
# Configures and builds horovodcpp into ${BUILD_DIR:-build} (extra arguments go to cmake).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
cmake --build "$build" -j"$(nproc)"
