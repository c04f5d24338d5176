#!/usr/bin/env bash
# Configures and builds horovodcpp into ${BUILD_DIR:-build} (extra arguments go to cmake).
# BUILD_TARGETS (space-separated target names) builds only those and what they need; unset, it
# builds everything: the library, hvdrun, every test, benchmark and example.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
# shellcheck disable=SC2086  # one word per target
cmake --build "$build" -j"$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
