# A failing rank's exit code becomes hvdrun's, the message names the rank, the other ranks end.
HVDRUN=$1 RANK_PROGRAM=$2
source "$(dirname "$0")/common.sh"

check_failure() {  # np rank code
  local np=$1 rank=$2 code=$3 out=$TMP/exit_$1_$2_$3 start=$SECONDS
  "$HVDRUN" -np "$np" "$RANK_PROGRAM" exit "$rank" "$code" >"$out" 2>&1
  expect_eq "np=$np: rank $rank exit($code) -> hvdrun exit code" "$code" $?
  expect_contains "np=$np: message names rank $rank" "hvdrun: rank $rank exited with code $code" "$out"
  [ $((SECONDS - start)) -lt 30 ] && pass "np=$np: ended in $((SECONDS - start)) s" || fail "np=$np: took $((SECONDS - start)) s"
  wait_gone "$RANK_PROGRAM exit $rank $code" 5 && pass "np=$np: no rank left" || fail "np=$np: ranks left behind"
}
check_failure 2 1 3
check_failure 4 2 7
check_failure 1 0 5

out=$TMP/kill
"$HVDRUN" -np 3 "$RANK_PROGRAM" kill 2 >"$out" 2>&1
expect_eq "a rank killed by SIGKILL -> 128+9" 137 $?
expect_contains "message names the killed rank" "rank 2 (node" "$out"
expect_contains "message names the signal" "was killed by signal 9" "$out"
wait_gone "$RANK_PROGRAM kill 2" 5 && pass "no rank left after a kill" || fail "ranks left after a kill"

"$HVDRUN" -np 2 /bin/false >"$TMP/false" 2>&1
expect_eq "a plain failing program -> its exit code" 1 $?
finish
