# SIGINT, SIGTERM and SIGQUIT (Ctrl-\) to hvdrun end every rank within a few seconds and leave
# no process behind; so does SIGKILL to hvdrun (mpirun gets SIGTERM as hvdrun dies); a launcher
# that ignores the signal is SIGKILLed with its whole tree after the grace period; processes a
# launcher leaves behind are ended.
HVDRUN=$1 RANK_PROGRAM=$2
source "$(dirname "$0")/common.sh"

for sig in INT TERM QUIT; do
  tag=hvd-signal-$sig-$$
  out=$TMP/$sig
  : >"$out"  # created here: the backgrounded shell may open it after the first grep below
  "$HVDRUN" -np 2 "$RANK_PROGRAM" sleep 120 "$tag" >"$out" 2>&1 &
  pid=$!
  for ((i = 0; i < 300 && $(grep -c SLEEPING "$out") < 2; i++)); do sleep 0.1; done
  expect_eq "SIG$sig: both ranks started" 2 "$(grep -c SLEEPING "$out")"
  expect_eq "SIG$sig: hvdrun, mpirun and 2 ranks running" 4 "$(alive "$tag" | wc -l)"
  start=$(date +%s%N)
  kill -$sig $pid
  wait_at_most $pid 20
  rc=$?
  took_ms=$((($(date +%s%N) - start) / 1000000))
  expected=$((128 + $(kill -l $sig)))
  expect_eq "SIG$sig: hvdrun exit code" $expected $rc
  [ $took_ms -lt 5000 ] && pass "SIG$sig: hvdrun ended in $took_ms ms" || fail "SIG$sig: took $took_ms ms"
  wait_gone "$tag" 3 && pass "SIG$sig: no process left" || { fail "SIG$sig: processes left behind"; end_leftovers "$tag"; }
  expect_contains "SIG$sig: hvdrun says it forwarded" "received SIG$sig, forwarding it to mpirun" "$out"
done
expect_contains "SIGQUIT reaches mpirun as SIGTERM" "received SIGQUIT, forwarding it to mpirun as SIGTERM" "$TMP/QUIT"

# SIGKILL cannot be caught: mpirun dies with hvdrun (PR_SET_PDEATHSIG) and ends the ranks.
tag=hvd-signal-KILL-$$
out=$TMP/KILL
: >"$out"
"$HVDRUN" -np 2 "$RANK_PROGRAM" sleep 120 "$tag" >"$out" 2>&1 &
pid=$!
for ((i = 0; i < 300 && $(grep -c SLEEPING "$out") < 2; i++)); do sleep 0.1; done
expect_eq "SIGKILL: hvdrun, mpirun and 2 ranks running" 4 "$(alive "$tag" | wc -l)"
kill -KILL $pid
wait_at_most $pid 5
expect_eq "SIGKILL: hvdrun killed" 137 $?
wait_gone "$tag" 5 && pass "SIGKILL to hvdrun: mpirun and the ranks ended" || { fail "SIGKILL to hvdrun: processes left behind"; end_leftovers "$tag"; }

# Ctrl-C at a terminal reaches hvdrun alone (mpirun runs in its own process group); hvdrun
# forwards it once. Needs python3 for the pseudo-terminal.
if command -v python3 >/dev/null; then
  tag=hvd-ctrl-c-$$
  read -r rc took < <(python3 "$(dirname "$0")/ctrl_c_tty.py" "$HVDRUN" "$RANK_PROGRAM" "$tag")
  expect_eq "Ctrl-C at a terminal: exit code" 130 "$rc"
  [ "${took%.*}" -lt 5 ] && pass "Ctrl-C at a terminal: ended in $took s" || fail "Ctrl-C: took $took s"
  wait_gone "$tag" 3 && pass "Ctrl-C at a terminal: no process left" || { fail "Ctrl-C: processes left"; end_leftovers "$tag"; }
else
  echo "note: python3 not found, the terminal Ctrl-C check is skipped"
fi

# A stand-in mpirun that ignores SIGTERM and SIGINT, with two children that do too.
mkdir -p "$TMP/bin"
cp "$(command -v sleep)" "$TMP/bin/hvd_stubborn_$$"
cat >"$TMP/bin/mpirun" <<STUB
#!/bin/bash
trap '' INT TERM
(trap '' INT TERM; exec "$TMP/bin/hvd_stubborn_$$" 300) &
(trap '' INT TERM; exec "$TMP/bin/hvd_stubborn_$$" 301) &
echo started >&2
wait
STUB
chmod +x "$TMP/bin/mpirun"
out=$TMP/stubborn
PATH="$TMP/bin:$PATH" "$HVDRUN" -np 1 /bin/true >"$out" 2>&1 &
pid=$!
for ((i = 0; i < 100 && $(alive "hvd_stubborn_$$" | wc -l) < 2; i++)); do sleep 0.1; done
expect_eq "stubborn: two children running" 2 "$(alive "hvd_stubborn_$$" | wc -l)"
start=$(date +%s%N)
kill -TERM $pid
wait_at_most $pid 20
rc=$?
took_ms=$((($(date +%s%N) - start) / 1000000))
expect_eq "stubborn: exit code" 143 $rc
[ $took_ms -ge 2500 ] && [ $took_ms -lt 8000 ] && pass "stubborn: killed after the grace period ($took_ms ms)" || fail "stubborn: took $took_ms ms"
expect_contains "stubborn: says so" "mpirun did not exit within 3000 ms; killing it and every rank" "$out"
wait_gone "hvd_stubborn_$$" 2 && pass "stubborn: no process left" || fail "stubborn: processes left"

# A stand-in mpirun that leaves a child in its own session behind and exits 0.
cat >"$TMP/bin/mpirun" <<STUB
#!/bin/bash
setsid "$TMP/bin/hvd_stubborn_$$" 302 </dev/null >/dev/null 2>&1 &
sleep 0.3
exit 0
STUB
out=$TMP/orphan
PATH="$TMP/bin:$PATH" run_hvdrun -np 1 /bin/true >"$out" 2>&1
expect_eq "orphan: exit code" 0 $?
expect_contains "orphan: reported" "ended 1 process(es) left behind by the launcher" "$out"
wait_gone "hvd_stubborn_$$ 302" 2 && pass "orphan: ended" || fail "orphan: still running"
finish
