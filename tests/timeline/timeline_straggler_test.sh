#!/usr/bin/env bash
# The straggler report names the rank that made the others wait, by time, as a user would find
# it: every rank records (HOROVOD_TIMELINE_ALL_RANKS=1, with cycle marks) while this script,
# from outside the processes, freezes one rank with SIGSTOP for PAUSE_MS every PERIOD_MS
# (SIGCONT in between), as a descheduled or swapping host would. After a few seconds it stops
# the run with SIGINT (the app stops its timeline on SIGTERM from mpirun), merges the rank
# files and runs `hvd-timeline summary`, which must name the paused rank as the straggler by
# time lost. It does so RUNS times, pausing rank 1, then rank 0, alternately, and once more
# without pausing anybody: the control, where no rank may be named.
# usage: timeline_straggler_test.sh RUNS APP TOOL WORKDIR MPIRUN [MPIRUN_FLAGS...]
set -u
runs=$1 app=$2 tool=$3 dir=$4 mpirun=$5
shift 5
readonly kPauseMs=80 kPeriodMs=100 kPausedSeconds=4
fail() { echo "FAIL: $*"; tail -20 "$run_dir/mpirun.log" 2>/dev/null; cleanup; exit 1; }
mpirun_pid=""
cleanup() {
  for f in "$run_dir"/trace.json.pid.rank*; do
    [ -f "$f" ] && kill -CONT "$(cat "$f")" 2>/dev/null
  done
  [ -n "$mpirun_pid" ] && kill -9 "$mpirun_pid" 2>/dev/null
}

# record_run VICTIM LABEL MPIRUN_FLAGS...: one recorded run, pausing rank VICTIM (or nobody for
# "none"); leaves the merged trace and its summary in $run_dir.
record_run() {
  local victim=$1 label=$2 pid r
  shift 2
  run_dir="$dir/run_$label"
  rm -rf "$run_dir" && mkdir -p "$run_dir" || fail "cannot create $run_dir"
  HOROVOD_TIMELINE="$run_dir/trace.json" HOROVOD_TIMELINE_ALL_RANKS=1 HOROVOD_TIMELINE_MARK_CYCLES=1 \
    "$mpirun" "$@" -np 2 "$app" > "$run_dir/mpirun.log" 2>&1 &
  mpirun_pid=$!
  for _ in $(seq 1 600); do
    [ -s "$run_dir/trace.json.pid.rank0" ] && [ -s "$run_dir/trace.json.pid.rank1" ] &&
      [ -f "$run_dir/trace.json.rank1" ] &&
      [ "$(grep -c '"MPI_ALLREDUCE"' "$run_dir/trace.json.rank1")" -ge 20 ] && break
    kill -0 "$mpirun_pid" 2>/dev/null || fail "the run ended before it was paused"
    sleep 0.1
  done
  [ -s "$run_dir/trace.json.pid.rank1" ] || fail "the ranks did not start within 60 s"
  local cycles=$((kPausedSeconds * 1000 / kPeriodMs))
  if [ "$victim" = none ]; then
    sleep "$kPausedSeconds"
  else
    pid=$(cat "$run_dir/trace.json.pid.rank$victim")
    for _ in $(seq 1 "$cycles"); do
      kill -STOP "$pid" || fail "could not SIGSTOP rank $victim"
      sleep "0.0$kPauseMs"
      kill -CONT "$pid" || fail "could not SIGCONT rank $victim"
      sleep "0.0$((kPeriodMs - kPauseMs))"
    done
  fi
  kill -INT "$mpirun_pid" || fail "could not SIGINT mpirun"
  for _ in $(seq 1 600); do kill -0 "$mpirun_pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$mpirun_pid" 2>/dev/null && fail "mpirun did not end within 60 s of SIGINT"
  wait "$mpirun_pid"
  mpirun_pid=""
  # (mpirun may kill one rank before it completed its file: merge reads it up to the cut.)
  "$tool" merge "$run_dir/trace.json.rank0" "$run_dir/trace.json.rank1" -o "$run_dir/merged.json" \
    > /dev/null || fail "merge failed"
  "$tool" check "$run_dir/merged.json" > "$run_dir/check" 2>&1 || { cat "$run_dir/check"; fail "check failed on the merged trace"; }
  timeout 60 "$tool" summary "$run_dir/merged.json" > "$run_dir/summary" 2>&1 ||
    { cat "$run_dir/summary"; fail "summary failed"; }
  echo "--- run $label, paused: rank $victim"
  sed -n '/^Last rank ready/,/^Errors/p' "$run_dir/summary" | grep -v '^Errors'
}

rm -rf "$dir" && mkdir -p "$dir" || { echo "FAIL: cannot create $dir"; exit 1; }
for k in $(seq 1 "$runs"); do
  victim=$((k % 2))
  record_run "$victim" "$k" "$@"
  grep -q "straggler (most time lost): rank $victim " "$run_dir/summary" ||
    fail "run $k: rank $victim was paused, but the summary names another straggler (or none)"
done
record_run none control "$@"
grep -q "straggler: none stands out" "$run_dir/summary" ||
  fail "control run: nobody was paused, yet the summary names a straggler"
echo "PASS: the paused rank was named in $runs of $runs runs; none in the control"
rm -rf "$dir"
