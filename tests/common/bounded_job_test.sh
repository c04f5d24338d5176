#!/usr/bin/env bash
# bounded_job.sh: a job that ends in time returns its own exit status and prints nothing more; a
# job that overruns returns 137, after describing each of its ranks, and leaves no process behind.
#   bounded_job_test.sh MPIEXEC [FLAGS...]
set -u
source "$(dirname "${BASH_SOURCE[0]}")/bounded_job.sh"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
out=$(mktemp)
trap 'rm -f "$out"' EXIT

tag="HVD_BOUNDED_JOB_TEST=$$.ends"
bounded_job 30 "$tag" env "$tag" "$@" -np 2 sh -c 'exit 3' >"$out" 2>&1
rc=$?
[ $rc -eq 3 ] || fail "a job that ended in time returned $rc, not its own status 3"
grep -q "STUCK JOB" "$out" && fail "a job that ended in time was described as stuck"

tag="HVD_BOUNDED_JOB_TEST=$$.hangs"
start=$(date +%s)
bounded_job 2 "$tag" env "$tag" "$@" -np 2 sleep 120 >"$out" 2>&1
rc=$?
elapsed=$(($(date +%s) - start))
cat "$out"
[ $rc -eq 137 ] || fail "an overrun job returned $rc, not 137"
[ $elapsed -lt 60 ] || fail "an overrun job with a 2 s bound took $elapsed s"
grep -q "^STUCK JOB: not ended within 2 s" "$out" || fail "no STUCK JOB line"
for rank in 0 1; do
  grep -q "^  process [0-9]*, sleep, rank $rank:" "$out" || fail "rank $rank's process is not described"
done
grep -q "thread sleep: state S, waits in" "$out" || fail "no thread's state and kernel wait"
if command -v gdb >/dev/null; then
  [ "$(grep -c '^    Thread 1 ' "$out")" -eq 2 ] || fail "gdb is here, but not both ranks' stacks were printed"
fi
sleep 1
left=$(job_pids "$tag")
[ -z "$left" ] || fail "processes of the overrun job are left: $left"

[ $failures -eq 0 ] && echo "bounded_job: both cases passed"
exit $((failures > 0))
