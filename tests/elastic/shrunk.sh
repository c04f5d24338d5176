# Discovery drops a slot of the host a rank then fails on (a health check that drops a dead GPU):
# the dropped slot is taken as the failed one (Note [A slot discovery dropped after a failure is
# the failed one]), so the job goes on at np=1 from its newest commit and finishes. Before,
# hvdrun counted the failure again and waited for slots ("0 usable slot(s)") until
# --elastic-timeout. Discovery changes just before the kill, so the relaunch reads it.
HVDRUN=$1 TRAIN=$2
source "$(dirname "$0")/common.sh"
HVD_CMD_LIMIT=100
EPOCHS=2 SAMPLES=64
set_hosts localhost:2
out=$TMP/out err=$TMP/err
run_hvdrun -np 2 --min-np 1 --max-np 2 --host-discovery-script "$DISCOVER" --elastic-timeout 5 \
  "$TRAIN" $EPOCHS $SAMPLES 4 2 250 >"$out" 2>"$err" &
job=$!
wait_for_line "$out" "COMMIT launch=[0-9]+ id=2 " 90
set_hosts localhost:1
kill -9 "$(rank_pid "$out" 1)"
wait_at_most $job 80
expect_eq "hvdrun exit code" 0 $?
grep "^hvdrun" "$err"
expect_contains "the kill is named" "rank 1 (node" "$err"
expect_contains "its slot is out" "on host localhost; one slot of localhost left out for good" "$err"
expect_contains "relaunch at 1 on the slot discovery still offers" "): np 1 on localhost:1" "$err"
$CHECK_RUN "$out" $EPOCHS $SAMPLES --launches 2 --sizes 2,1 | tee "$TMP/check"
expect_eq "cross-launch checks" 0 "${PIPESTATUS[0]}"
finish
