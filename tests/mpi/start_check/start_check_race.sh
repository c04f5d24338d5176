#!/usr/bin/env bash
# The start check's lookup callback (PMIx's progress thread) must not touch the round's state
# after the waiting thread has seen every answer and freed it: that broadcast on freed memory
# once hung PMIx's progress thread, and with it MPI_Init on every rank (a fault-sweep job in
# ctest). late_notify_shim.so widens the window on every rank: the answer arrives before the
# waiter looks (on most ranks: an answer may also come only after it looks), and the last
# callback's notify waits 500 ms. Every rank must come up, every rank's last notify must have been
# the late one (the shim engaged), and none of them may be on freed memory.
#   start_check_race.sh SHIM MPIEXEC [FLAGS...] -- PROGRAM NP
set -u
shim=$1; shift
args=(); while [ "$1" != "--" ]; do args+=("$1"); shift; done; shift
prog=$1 np=$2
bounded_run=$(dirname "${BASH_SOURCE[0]}")/../../common/bounded_run.sh
out=$(mktemp)
trap 'rm -f "$out"' EXIT
bash "$bounded_run" 60 "${args[@]}" -np "$np" -x LD_PRELOAD="$shim" "$prog" >"$out" 2>&1
rc=$?
cat "$out"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
[ $rc -eq 0 ] || fail "exit status $rc"
[ "$(grep -c '^rank [0-9]*: up$' "$out")" -eq "$np" ] || fail "not every rank came up"
[ "$(grep -c '^late_notify_shim: ' "$out")" -eq "$np" ] ||
  fail "not every rank's last lookup answer was notified late (the shim did not engage)"
! grep -q 'USE AFTER FREE' "$out" || fail "a lookup callback notified on memory its waiter had freed"
[ $failures -eq 0 ] && echo PASS || exit 1
