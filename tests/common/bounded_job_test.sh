#!/usr/bin/env bash
# bounded_job.sh: a job that ends in time returns its own exit status and prints nothing more; a
# job that overruns returns 137, after describing each of its ranks, and leaves no process behind.
# The same through bounded_run.sh (ctest's runner, which tags the job itself).
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

# bounded_run.sh, as ctest runs it: its own status, or 137 with the ranks described; no process left.
run=$(dirname "${BASH_SOURCE[0]}")/bounded_run.sh
bash "$run" 30 "$@" -np 2 sh -c 'exit 5' >"$out" 2>&1
rc=$?
[ $rc -eq 5 ] || fail "bounded_run.sh: a job that ended in time returned $rc, not its own status 5"
grep -q "STUCK JOB" "$out" && fail "bounded_run.sh: a job that ended in time was described as stuck"
BOUNDED_JOB_DESCRIBE_SECONDS=30 bash "$run" 2 "$@" -np 2 sleep 121 >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 137 ] || fail "bounded_run.sh: an overrun job returned $rc, not 137"
for rank in 0 1; do
  grep -q "^  process [0-9]*, sleep, rank $rank:" "$out" || fail "bounded_run.sh: rank $rank's process is not described"
done
run_tag=$(sed -n 's/^STUCK JOB: not ended within 2 s; its processes (\(HVD_BOUNDED_RUN=[0-9.]*\)):$/\1/p' "$out")
[ -n "$run_tag" ] || fail "bounded_run.sh: no STUCK JOB line naming its tag"
sleep 1
[ -z "$run_tag" ] || [ -z "$(job_pids "$run_tag")" ] || fail "bounded_run.sh: processes of the overrun job are left"
pgrep -f "sleep 121" >/dev/null && fail "bounded_run.sh: a rank (sleep 121) is left"

[ $failures -eq 0 ] && echo "bounded_job: all four cases passed"
exit $((failures > 0))
