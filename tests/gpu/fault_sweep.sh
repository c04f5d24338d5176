#!/usr/bin/env bash
# Runs every case of test_nccl_fault_sweep.cc, each as its own job (a fault may abort the
# communicators or stop the job), and passes when every case passed: each rank printed
# "SWEEP rank R: ok" and the job ended by itself within SECONDS. A job that a case stops (an
# output allocator that throws) cannot finalize MPI on the stopping rank, so mpiexec's exit
# status counts only for the cases that do not stop it.
#   fault_sweep.sh SECONDS MPIEXEC [FLAGS...] -- PROGRAM
# HVD_TEST_SWEEP_FILTER (an extended regex) runs only the cases whose names match.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/../common/bounded_job.sh"
seconds=$1
shift
launcher=()
while [ "$1" != "--" ]; do launcher+=("$1"); shift; done
shift
program=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failed=()
count=0
sweep_start=$(date +%s.%N)
while read -r name np vars; do
  [[ "$name" =~ ${HVD_TEST_SWEEP_FILTER:-.} ]] || continue
  count=$((count + 1))
  rm -f "$dir"/left.*
  out=$dir/out
  start=$(date +%s.%N)
  # The case's variables reach every rank through mpiexec's environment.
  bounded_job "$seconds" "HVD_TEST_DIR=$dir" env $vars HVD_TEST_SWEEP_CASE="$name" HVD_TEST_DIR="$dir" \
    "${launcher[@]}" -np "$np" "$program" </dev/null >"$out" 2>&1
  rc=$?
  elapsed=$(echo "$(date +%s.%N) - $start" | bc)
  ok=$(grep -c "^SWEEP rank [0-9]*: ok" "$out")
  verdict=pass
  if [ $rc -eq 137 ]; then
    verdict="FAIL: the job did not end within $seconds s"
  elif [ "$ok" -ne "$np" ]; then
    verdict="FAIL: $ok of $np ranks passed"
  elif [ $rc -ne 0 ] && [[ "$name" != *:alloc:* ]]; then
    verdict="FAIL: every rank passed, but mpiexec exited with $rc"
  fi
  printf '%-28s np=%d %6.1f s  %s\n' "$name" "$np" "$elapsed" "$verdict"
  if [ "$verdict" != pass ]; then
    failed+=("$name")
    grep "^SWEEP\|failed:\|EMULATED\|terminate\|Abort\|error" "$out" | head -20 | sed 's/^/    /'
    sed -n '/^STUCK JOB/,$p' "$out" | sed 's/^/    /'  # where an overrun job's processes were
  fi
done < <("$program" --list)
total=$(echo "$(date +%s.%N) - $sweep_start" | bc)
if [ "$count" -eq 0 ]; then
  echo "FAIL: no case matched HVD_TEST_SWEEP_FILTER='${HVD_TEST_SWEEP_FILTER:-}'"
  exit 1
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAIL: ${#failed[@]} of $count cases failed (${failed[*]}) in $total s"
  exit 1
fi
echo "all $count cases passed in $total s"
