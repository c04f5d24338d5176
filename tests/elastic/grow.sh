# Scale up: discovery offers 2 slots, then 6; the job (--max-np 4) stops at its next commit and
# is relaunched at 4, resuming from that commit with on_reset run at the new size.
HVDRUN=$1 TRAIN=$2
source "$(dirname "$0")/common.sh"
HVD_CMD_LIMIT=150
EPOCHS=3 SAMPLES=96
set_hosts localhost:2
out=$TMP/out err=$TMP/err
run_hvdrun -np 2 --max-np 4 --host-discovery-script "$DISCOVER" "$TRAIN" $EPOCHS $SAMPLES 4 2 150 \
  >"$out" 2>"$err" &
job=$!
wait_for_line "$out" "COMMIT launch=[0-9]+ id=2 " 120
set_hosts localhost:6
wait_at_most $job 150
expect_eq "hvdrun exit code" 0 $?
grep "^hvdrun" "$err"
expect_contains "the change is noticed, capped at --max-np" "hosts changed: localhost:2 -> localhost:4 (np 2 -> 4)" "$err"
expect_contains "relaunch at 4" "elastic: launch 2 (hosts changed): np 4 on localhost:4" "$err"
expect_contains "on_reset rescaled the learning rate" "RESET launch=" "$out"
expect_contains "lr follows the size" "size=4 lr=0.08" "$out"
if grep -q "was killed by signal" "$err"; then fail "a rank was killed: $(grep 'killed by' "$err")"; else pass "no rank failed"; fi
$CHECK_RUN "$out" $EPOCHS $SAMPLES --launches 2 --sizes 2,4 | tee "$TMP/check"
expect_eq "cross-launch checks" 0 "${PIPESTATUS[0]}"
finish
