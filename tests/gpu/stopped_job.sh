#!/usr/bin/env bash
# Runs a multi-rank test program whose test case stops the job on purpose (a rank whose op threw:
# Note [An exception in the executor stops every rank]). The rank that stops cannot finalize MPI,
# so mpiexec exits non-zero however the test cases went. This passes when every rank's Catch
# session passed and the job ended by itself within SECONDS.
#   stopped_job.sh SECONDS NP MPIEXEC [FLAGS...] -- PROGRAM [ARGS...]
set -u
source "$(dirname "${BASH_SOURCE[0]}")/../common/bounded_job.sh"
seconds=$1 np=$2
shift 2
launcher=()
while [ "$1" != "--" ]; do launcher+=("$1"); shift; done
shift
dir=$(mktemp -d)
out=$dir/out
trap 'rm -rf "$dir"' EXIT
start=$(date +%s.%N)
# HVD_TEST_DIR: the ranks leave together (tests/common/rank_markers.h).
bounded_job "$seconds" "HVD_TEST_DIR=$dir" env HVD_TEST_DIR="$dir" "${launcher[@]}" -np "$np" -x HVD_TEST_DIR "$@" >"$out" 2>&1
rc=$?
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
cat "$out"
if [ $rc -eq 137 ]; then
  echo "FAIL: the job did not end within $seconds s"
  exit 1
fi
passed=$(grep -c "All tests passed" "$out")
if [ "$passed" -ne "$np" ]; then
  echo "FAIL: $passed of $np ranks passed their test cases (mpiexec exit status $rc)"
  exit 1
fi
echo "every rank passed; the job ended by itself in $elapsed s (mpiexec exit status $rc)"
