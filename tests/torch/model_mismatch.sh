#!/usr/bin/env bash
# A model that differs between ranks, and a collective one rank refuses before submitting it,
# fail on every rank at once (tests/torch/model_mismatch.cc), caught or not.
#   model_mismatch.sh MPIRUN_AND_FLAGS... -- PROGRAM NP caught|uncaught [SCENARIO]
set -u
# Describes the ranks of a job that overruns its bound, then kills them.
bounded_run=$(dirname "${BASH_SOURCE[0]}")/../common/bounded_run.sh
args=(); while [ "$1" != "--" ]; do args+=("$1"); shift; done; shift
prog=$1 np=$2 mode=$3 scenario=${4:-}
dir=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
start=$(date +%s.%N)
HVD_TEST_DIR=$dir OMP_NUM_THREADS=1 bash "$bounded_run" 100 "${args[@]}" -np "$np" -x HVD_TEST_DIR -x OMP_NUM_THREADS \
  "$prog" "$mode" $scenario >"$dir/out" 2>&1
rc=$?
took=$(echo "$(date +%s.%N) - $start" | bc)
cat "$dir/out"
echo "job took $took s (exit status $rc)"
[ $rc -ne 137 ] || fail "the job hung and was killed by the test's timeout"
if [ "$mode" = caught ]; then
  [ $rc -eq 0 ] || fail "exit status $rc"
  for ((r = 0; r < np; r++)); do
    grep -q "^PASS rank $r$" "$dir/out" || fail "rank $r did not pass"
  done
else
  [ $rc -ne 0 ] || fail "the job exited 0"
  case $scenario in
    extra_layer) expect="parameter 'fc3.weight' (Float [4, 4]) exists on rank $((np - 1)) but not on rank 0" ;;
    unfrozen) expect="parameter 'fc1.weight' is frozen (requires_grad false) on rank 0 but requires grad on rank $((np - 1))" ;;
    alltoall) expect="alltoall of 'mismatch.alltoall': splits sum to $((2 * np + 1))" ;;
    *) expect="?" ;;
  esac
  for ((r = 0; r < np; r++)); do
    line=$(grep "UNCAUGHT rank $r:" "$dir/out" | head -1)
    [ -n "$line" ] || { fail "rank $r reported no error"; continue; }
    [[ "$line" == *"$expect"* ]] || fail "rank $r: message lacks \"$expect\": $line"
  done
fi
! grep -q "^FAIL rank\|AddressSanitizer\|runtime error" "$dir/out" || fail "a rank reported a failure"
[ $failures -eq 0 ] && echo "PASS" || echo "$failures failure(s)"
[ $failures -eq 0 ]
