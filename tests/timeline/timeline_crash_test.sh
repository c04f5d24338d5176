#!/usr/bin/env bash
# A run interrupted mid-way still leaves timelines that hvd-timeline reads: starts the crash app
# on NP ranks with every rank recording and waits until rank 1 has flushed allreduces. Then:
#   kill9:  freezes rank 1 (SIGSTOP: its writer is then between writes), counts the events in
#           its file with a strict JSON parser (python3), SIGKILLs it, and checks that the file
#           still parses strictly with exactly that count -- everything flushed, nothing torn --
#           and that `hvd-timeline check` reads the same count. (A kill inside a write, which
#           leaves a cut-short tail, is covered by the unit tests.)
#   sigint: sends SIGINT to mpirun as Ctrl-C would; mpirun passes SIGTERM to the ranks, which
#           the app handles by calling hvd::stop_timeline(). What kill9 cannot give: on every
#           rank the file is complete, strictly valid, and has no span left open.
# Both modes then run `check`, `summary` and `merge` on every rank's file.
# usage: timeline_crash_test.sh MODE NP APP TOOL WORKDIR MPIRUN [MPIRUN_FLAGS...]
set -u
mode=$1 np=$2 app=$3 tool=$4 dir=$5 mpirun=$6
shift 6
fail() { echo "FAIL: $*"; tail -20 "$dir/mpirun.log" 2>/dev/null; exit 1; }
command -v python3 > /dev/null || fail "python3 is needed for the strict JSON parse"

# Events in a file by a strict parse (invalid UTF-8, a trailing comma, a torn tail all fail).
strict_count() {
  python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1], encoding="utf-8"))))' "$1"
}
# True when every thread of process $1 is stopped.
all_stopped() {
  local t state
  for t in /proc/"$1"/task/*; do
    state=$(sed 's/.*) //' "$t/stat" 2>/dev/null | cut -d' ' -f1)
    [ "$state" = T ] || [ "$state" = t ] || return 1
  done
}

rm -rf "$dir" && mkdir -p "$dir" || fail "cannot create $dir"
export HOROVOD_TIMELINE="$dir/trace.json" HOROVOD_TIMELINE_ALL_RANKS=1 HOROVOD_TIMELINE_MARK_CYCLES=1
"$mpirun" "$@" -np "$np" "$app" > "$dir/mpirun.log" 2>&1 &
mpirun_pid=$!

flushed=0
for _ in $(seq 1 600); do
  if [ -s "$dir/trace.json.pid.rank1" ] && [ -f "$dir/trace.json.rank1" ] &&
     [ "$(grep -c '"MPI_ALLREDUCE"' "$dir/trace.json.rank1")" -ge 100 ]; then
    flushed=1
    break
  fi
  kill -0 "$mpirun_pid" 2>/dev/null || fail "the run ended before it was killed"
  sleep 0.1
done
[ "$flushed" = 1 ] || { kill -9 "$mpirun_pid"; fail "rank 1 flushed no allreduces within 60 s"; }

if [ "$mode" = kill9 ]; then
  victim=$(cat "$dir/trace.json.pid.rank1")
  kill -STOP "$victim" || fail "could not SIGSTOP rank 1"
  for _ in $(seq 1 100); do all_stopped "$victim" && break; sleep 0.05; done
  all_stopped "$victim" || fail "rank 1 did not stop"
  before=$(strict_count "$dir/trace.json.rank1") || fail "rank 1's file is not strict JSON while stopped"
  kill -9 "$victim" || fail "could not SIGKILL rank 1"
else
  kill -INT "$mpirun_pid" || fail "could not SIGINT mpirun"
fi
wait "$mpirun_pid"
status=$?
[ "$status" -ne 0 ] || fail "mpirun exited 0 although the run was interrupted"
grep -q "finished without being killed" "$dir/mpirun.log" && fail "the app was not interrupted"

if [ "$mode" = kill9 ]; then
  after=$(strict_count "$dir/trace.json.rank1") || fail "rank 1's file is not strict JSON after kill -9"
  [ "$after" -eq "$before" ] || fail "rank 1: $before events flushed before kill -9, $after after"
  "$tool" check "$dir/trace.json.rank1" 2>&1 | grep -q ": OK: $before events" ||
    fail "check does not read the $before events flushed before kill -9"
  echo "rank 1: $before events flushed before kill -9; strict parse and check read all of them"
fi

files=()
for r in $(seq 0 $((np - 1))); do
  f="$dir/trace.json.rank$r"
  [ -s "$f" ] || fail "rank $r left no timeline"
  "$tool" check "$f" > "$dir/check.$r" 2>&1 || { cat "$dir/check.$r"; fail "check failed on $f"; }
  grep -q ": OK:" "$dir/check.$r" || fail "check printed no OK for $f"
  if [ "$mode" = sigint ]; then
    grep -q "rank $r stopped its timeline on signal" "$dir/mpirun.log" ||
      fail "rank $r did not stop its timeline on the signal"
    strict_count "$f" > /dev/null || fail "rank $r: not strict JSON after Ctrl-C"
    if grep -q "warning" "$dir/check.$r"; then
      cat "$dir/check.$r"; fail "rank $r: the file is not complete and closed after Ctrl-C"
    fi
  fi
  "$tool" summary "$f" > "$dir/summary.$r" 2>&1 || { cat "$dir/summary.$r"; fail "summary failed on $f"; }
  # What was flushed is read: many allreduces on the crash.grad row.
  count=$(awk '$1 == "MPI_ALLREDUCE" { print $2 }' "$dir/summary.$r")
  [ -n "$count" ] && [ "$count" -ge 50 ] || { cat "$dir/summary.$r"; fail "rank $r: summary shows ${count:-no} MPI_ALLREDUCE spans"; }
  files+=("$f")
done
"$tool" merge "${files[@]}" -o "$dir/merged.json" > /dev/null || fail "merge failed"
"$tool" check "$dir/merged.json" > "$dir/check.merged" 2>&1 || { cat "$dir/check.merged"; fail "check failed on the merged trace"; }
strict_count "$dir/merged.json" > /dev/null || fail "the merged trace is not strict JSON"
echo "rank 1 after $mode:"
cat "$dir/check.1"
echo "PASS ($mode, np $np)"
rm -rf "$dir"
