#!/usr/bin/env bash
# Runs an MPI job whose ranks may not be able to finalize MPI (one is left inside a collective
# when the runtime ends it), so mpirun's exit status means nothing: passes when every rank
# 0..NP-1 printed "rank R: passed".
#   every_rank_passes.sh NP MPIRUN_AND_ARGS...
# The ranks leave together (HVD_TEST_DIR for tests/common/rank_markers.h).
set -u
np=$1; shift
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
out=$(HVD_TEST_DIR=$dir "$@" 2>&1)
echo "$out"
missing=""
for ((r = 0; r < np; r++)); do
  grep -qx "rank $r: passed" <<<"$out" || missing+=" $r"
done
[ -z "$missing" ] || { echo "FAIL: no pass from rank(s)$missing"; exit 1; }
echo "every rank of $np passed"
