#!/usr/bin/env bash
# Runs the Python front end's pytest suite under hvdrun, as ctest registers it (and as a user runs
# it by hand): every rank runs the same tests in the same order. A fresh commit store per run for
# the elastic tests; HOROVOD_TIMELINE=DYNAMIC and dynamic process sets, as Horovod's suite sets.
#   run_pytest.sh BUILD_DIR PYTHON NP [pytest arguments...]
set -euo pipefail
build=$1; python=$2; np=$3; shift 3
here=$(cd "$(dirname "$0")" && pwd)
store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
export HOROVOD_ELASTIC_DIR="$store" HOROVOD_TIMELINE=DYNAMIC HOROVOD_DYNAMIC_PROCESS_SETS=1
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$store"  # where a file named after HOROVOD_TIMELINE would appear
exec "$build/launcher/hvdrun" -np "$np" "$python" -m pytest -q -p no:cacheprovider -o console_output_style=classic \
  --rootdir "$here" "$@"
