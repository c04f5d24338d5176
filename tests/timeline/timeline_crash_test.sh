#!/usr/bin/env bash
# A run killed mid-way still leaves timelines that hvd-timeline reads: starts the crash app on
# NP ranks with every rank recording, waits until rank 1 has flushed allreduces, then either
# SIGKILLs rank 1 (MODE=kill9) or sends SIGINT to mpirun as Ctrl-C would (MODE=sigint), and runs
# `hvd-timeline check`, `summary` and `merge` on what was left.
# usage: timeline_crash_test.sh MODE NP APP TOOL WORKDIR MPIRUN [MPIRUN_FLAGS...]
set -u
mode=$1 np=$2 app=$3 tool=$4 dir=$5 mpirun=$6
shift 6
fail() { echo "FAIL: $*"; cat "$dir/mpirun.log" 2>/dev/null | tail -20; exit 1; }

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
  kill -9 "$(cat "$dir/trace.json.pid.rank1")" || fail "could not SIGKILL rank 1"
else
  kill -INT "$mpirun_pid" || fail "could not SIGINT mpirun"
fi
wait "$mpirun_pid"
status=$?
[ "$status" -ne 0 ] || fail "mpirun exited 0 although a rank was killed"
grep -q "finished without being killed" "$dir/mpirun.log" && fail "the app was not interrupted"

files=()
for r in $(seq 0 $((np - 1))); do
  f="$dir/trace.json.rank$r"
  [ -s "$f" ] || fail "rank $r left no timeline"
  "$tool" check "$f" > "$dir/check.$r" 2>&1 || { cat "$dir/check.$r"; fail "check failed on $f"; }
  grep -q ": OK:" "$dir/check.$r" || fail "check printed no OK for $f"
  "$tool" summary "$f" > "$dir/summary.$r" 2>&1 || { cat "$dir/summary.$r"; fail "summary failed on $f"; }
  # What was flushed is read: many allreduces on the crash.grad row.
  count=$(awk '$1 == "MPI_ALLREDUCE" { print $2 }' "$dir/summary.$r")
  [ -n "$count" ] && [ "$count" -ge 50 ] || { cat "$dir/summary.$r"; fail "rank $r: summary shows ${count:-no} MPI_ALLREDUCE spans"; }
  files+=("$f")
done
"$tool" merge "${files[@]}" -o "$dir/merged.json" > /dev/null || fail "merge failed"
"$tool" check "$dir/merged.json" > "$dir/check.merged" 2>&1 || { cat "$dir/check.merged"; fail "check failed on the merged trace"; }
echo "rank 1 after $mode:"
cat "$dir/check.1"
echo "PASS ($mode, np $np)"
rm -rf "$dir"
