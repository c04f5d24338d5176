#!/usr/bin/env bash
# Timelines from real np=2 runs, opened in the viewers people use, in headless Chromium
# (tests/timeline/browser/view_trace.js: speedscope's web app and DevTools' Performance panel):
#   rank0, rank1  each rank's file of an MNIST run (HOROVOD_TIMELINE_ALL_RANKS=1, cycle marks;
#                 without LibTorch, a run of the allreduce app instead)
#   merged        hvd-timeline merge of the two
#   killed        rank 1's file of a run in which rank 1 was killed with kill -9 while it waited
#                 (rank 0 frozen) in a negotiation: that span is still open in the file
#   repaired      hvd-timeline merge of that file alone
# Needs Debian's chromium and the npm packages in tests/timeline/browser (scripts/setup.sh
# installs both); without them it is skipped (exit 77) with a message saying what is missing.
# usage: timeline_browser_test.sh MNIST|none DATA_DIR APP TOOL WORKDIR MPIRUN [MPIRUN_FLAGS...]
set -u
mnist=$1 data=$2 app=$3 tool=$4 dir=$5 mpirun=$6
shift 6
here="$(cd "$(dirname "$0")" && pwd)"
browser_dir="$here/browser"
skip() { echo "SKIP: $*"; exit 77; }
fail() {
  echo "FAIL: $*"
  if grep -q "^STUCK JOB" "$dir/mpirun.log" 2>/dev/null; then sed -n '/^STUCK JOB/,$p' "$dir/mpirun.log"
  else tail -20 "$dir/mpirun.log" 2>/dev/null; fi
  exit 1
}

[ -x /usr/bin/chromium ] || skip "no /usr/bin/chromium (scripts/setup.sh installs Debian's chromium)"
command -v node > /dev/null || skip "no node"
for package in puppeteer-core speedscope; do
  [ -d "$browser_dir/node_modules/$package" ] ||
    skip "no $package in $browser_dir/node_modules (run scripts/setup.sh, or npm ci there)"
done

start=$(date +%s)
rm -rf "$dir" && mkdir -p "$dir" || fail "cannot create $dir"
export HOROVOD_TIMELINE_ALL_RANKS=1 HOROVOD_TIMELINE_MARK_CYCLES=1

# A real training run: rank 0 and rank 1 each record.
if [ "$mnist" != none ] && [ -s "$data/train-images-idx3-ubyte" ]; then
  # A hang fails with the ranks' stacks in the log (bounded_run.sh).
  HOROVOD_TIMELINE="$dir/run.json" bash "$here/../common/bounded_run.sh" 300 "$mpirun" "$@" -np 2 "$mnist" --data "$data" \
    --epochs 1 --checkpoint '' > "$dir/mpirun.log" 2>&1 || fail "the MNIST run failed"
  grep -q "accuracy" "$dir/mpirun.log" || fail "the MNIST run did not finish"
  echo "traced: MNIST, 1 epoch on 2 ranks"
else
  echo "no MNIST (LibTorch or data/mnist missing): tracing the allreduce app instead"
  HOROVOD_TIMELINE="$dir/run.json" "$mpirun" "$@" -np 2 "$app" > "$dir/mpirun.log" 2>&1 &
  run=$!
  sleep 5
  kill -INT "$run"
  for _ in $(seq 1 600); do kill -0 "$run" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$run" 2>/dev/null && { kill -9 "$run"; fail "the app did not stop on SIGINT"; }
fi
"$tool" merge "$dir/run.json.rank0" "$dir/run.json.rank1" -o "$dir/merged.json" > /dev/null ||
  fail "merge failed"

# A run in which rank 1 dies while it waits: rank 0 is frozen, so rank 1 stalls in a negotiation
# or collective (written in its file's trailer as a begin event), then rank 1 is frozen (so its
# writer is between writes) and killed with kill -9.
HOROVOD_TIMELINE="$dir/killed.json" "$mpirun" "$@" -np 2 "$app" > "$dir/killed.log" 2>&1 &
run=$!
for _ in $(seq 1 600); do
  [ -s "$dir/killed.json.pid.rank1" ] && [ -f "$dir/killed.json.rank1" ] &&
    [ "$(grep -c '"MPI_ALLREDUCE"' "$dir/killed.json.rank1")" -ge 100 ] && break
  kill -0 "$run" 2>/dev/null || fail "the app ended before it was killed"
  sleep 0.1
done
victim=$(cat "$dir/killed.json.pid.rank1" 2>/dev/null) || { kill -9 "$run"; fail "rank 1 never started"; }
peer=$(cat "$dir/killed.json.pid.rank0" 2>/dev/null) || { kill -9 "$run"; fail "rank 0 never started"; }
kill -STOP "$peer" && sleep 2.5 && kill -STOP "$victim" && sleep 0.5 && kill -9 "$victim"
kill -CONT "$peer"
for _ in $(seq 1 600); do kill -0 "$run" 2>/dev/null || break; sleep 0.1; done
kill -0 "$run" 2>/dev/null && { kill -9 "$run"; fail "mpirun did not end after rank 1 was killed"; }
"$tool" merge "$dir/killed.json.rank1" -o "$dir/repaired.json" > /dev/null || fail "merge (repair) failed"
"$tool" check "$dir/killed.json.rank1" 2>&1 | grep -q "span(s) still open" ||
  fail "rank 1's file does not hold the negotiation it was killed in"

for f in run.json.rank0 run.json.rank1 merged.json killed.json.rank1 repaired.json; do
  "$tool" check "$dir/$f" > "$dir/check.log" 2>&1 || { cat "$dir/check.log"; fail "check failed on $f"; }
done
echo "recorded in $(( $(date +%s) - start )) s"
timeout 300 node "$browser_dir/view_trace.js" "$dir/screenshots" \
  rank0="$dir/run.json.rank0" rank1="$dir/run.json.rank1" merged="$dir/merged.json" \
  killed="$dir/killed.json.rank1:open" repaired="$dir/repaired.json:open" ||
  fail "a viewer did not draw a trace as the file says"
echo "PASS in $(( $(date +%s) - start )) s (screenshots in $dir/screenshots)"
