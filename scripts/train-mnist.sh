#!/usr/bin/env bash
# The main job: installs dependencies, fetches 10,000 real MNIST digits, builds what it runs (the
# library, hvdrun and the MNIST example; scripts/test.sh builds the tests), and trains the LibTorch
# example on 2 ranks under hvdrun. Extra arguments go to the example (e.g. --epochs 5).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/fetch-mnist.sh
BUILD_TARGETS="hvdrun mnist" bash scripts/build.sh
build=${BUILD_DIR:-build}
exec "$build/launcher/hvdrun" -np "${NP:-2}" "$build/examples/mnist/mnist" --data data/mnist "$@"
