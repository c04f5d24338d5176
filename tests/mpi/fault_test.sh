#!/usr/bin/env bash
# Faults injected from outside or by one rank leaving; asserts the message on every surviving
# rank, the job's exit status, and that nothing is left running. Prints the time from the fault
# to the end of the job.
#   fault_test.sh MPIRUN_AND_FLAGS... -- PROGRAM NP SCENARIO
# SCENARIO: sigstop (the last rank is stopped with SIGSTOP), return, exit, throw, allocator
# (fault_rank.cc). allocator runs without a stall shutdown time: only the failing rank's own
# report can end the others' wait before the liveness timeout (1800 s). sigstop_shutdown: the
# last rank is stopped between operations and the others then call hvd::shutdown(), which must
# return at the liveness timeout (3 s), not wait for the frozen rank forever.
set -u
# Describes the ranks of a job that overruns its bound, then kills them.
bounded_run=$(dirname "${BASH_SOURCE[0]}")/../common/bounded_run.sh
args=(); while [ "$1" != "--" ]; do args+=("$1"); shift; done; shift
prog=$1 np=$2 scenario=$3
victim=$((np - 1))
dir=$(mktemp -d)
trap 'for f in "$dir"/pid.*; do [ -e "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null; done; [ -n "${KEEP:-}" ] || rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
now() { date +%s.%N; }
# Waits up to 20 s until every rank has written $dir/<prefix>.<rank>; fails with the words given.
wait_for_marks() {
  local prefix=$1 what=$2
  for _ in $(seq 200); do [ "$(ls "$dir" | grep -c "^$prefix\.")" -eq "$np" ] && return; sleep 0.1; done
  fail "not every rank $what"
}

case $scenario in sigstop) mode=loop ;; sigstop_shutdown) mode=shutdown ;; *) mode=$scenario ;; esac
stall_shutdown=${HOROVOD_STALL_SHUTDOWN_TIME_SECONDS:-3}; [ "$scenario" != allocator ] || stall_shutdown=0
HVD_TEST_DIR=$dir HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=$stall_shutdown \
  bash "$bounded_run" 90 "${args[@]}" -np "$np" -x HVD_TEST_DIR -x HOROVOD_STALL_SHUTDOWN_TIME_SECONDS \
  "$prog" "$mode" >"$dir/out" 2>&1 &
job=$!
wait_for_marks pid "started"
if [ "$scenario" = sigstop ]; then
  sleep 1
  kill -STOP "$(cat "$dir/pid.$victim")"
  fault=$(now)
elif [ "$scenario" = sigstop_shutdown ]; then
  wait_for_marks warm "finished its first steps"
  kill -STOP "$(cat "$dir/pid.$victim")"
  fault=$(now)
  touch "$dir/stopped"
else
  for _ in $(seq 200); do grep -q "rank $victim: leaving" "$dir/out" && break; sleep 0.05; done
  fault=$(now)
fi
wait $job
rc=$?
end=$(now)
cat "$dir/out"
echo "fault to end of job: $(echo "$end - $fault" | bc) s (exit status $rc)"
[ $rc -ne 0 ] || fail "the job exited 0"
[ $rc -ne 137 ] || fail "the job hung and was killed by the test's timeout"
case $scenario in
  sigstop) expect="liveness timeout (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=3): rank @R@ has waited 3 s in background cycle";
           who="for rank $victim, which stopped responding" ;;
  allocator) expect="rank $victim stopped: ALLGATHER of 'step.gather' failed on rank $victim: std::bad_alloc"; who="" ;;
  *) expect="rank $victim has shut down"; who="" ;;
esac
if [ "$scenario" = allocator ]; then  # the failing rank's own handle names the tensor and the reason
  line=$(grep "^rank $victim: caught after" "$dir/out" | head -1)
  [[ "$line" == *"ALLGATHER of 'step.gather' failed on rank $victim: std::bad_alloc"* ]] ||
    fail "rank $victim: its own error lacks the tensor or the reason: $line"
fi
for ((r = 0; r < victim; r++)); do
  if [ "$scenario" = sigstop_shutdown ]; then  # no operation failed: shutdown() must have returned
    took=$(sed -n "s/^rank $r: hvd::shutdown() took \([0-9.]*\) s$/\1/p" "$dir/out" | head -1)
    if [ -z "$took" ]; then
      fail "rank $r: hvd::shutdown() did not return beside the frozen rank"
    elif [ "$(echo "$took > 15" | bc)" -eq 1 ]; then
      fail "rank $r: hvd::shutdown() took $took s beside the frozen rank (the liveness timeout is 3 s)"
    fi
    continue
  fi
  line=$(grep "^rank $r: caught after" "$dir/out" | head -1)
  [ -n "$line" ] || { fail "rank $r reported no error"; continue; }
  [[ "$line" == *"${expect/@R@/$r}"* ]] || fail "rank $r: message lacks '${expect/@R@/$r}': $line"
  [ -z "$who" ] || [[ "$line" == *"$who"* ]] || fail "rank $r: message lacks '$who'"
  # (mpirun may end a rank before it prints this line; when printed, it must be prompt)
  ! grep -q "^rank $r: hvd::shutdown() took [1-9]" "$dir/out" || fail "rank $r: hvd::shutdown() was not prompt"
done
! grep -q "FAIL\|AddressSanitizer\|runtime error" "$dir/out" || fail "a rank reported a failure or a sanitizer error"
sleep 0.5
for f in "$dir"/pid.*; do
  pid=$(cat "$f")
  state=$(ps -o stat= -p "$pid" 2>/dev/null)
  if [ -n "$state" ] && [[ "$state" != Z* ]]; then  # a zombie has ended; its reaper may be slow
    fail "pid $pid ($f) is still running: $(ps -o stat=,wchan= -p "$pid")"
    [ -z "${DEBUG_LEFTOVER:-}" ] || gdb -p "$pid" -batch -ex "thread apply all bt 8" 2>/dev/null | grep -E "^#|^Thread" | head -60
  fi
done
[ $failures -eq 0 ] && echo "PASS" || exit 1
