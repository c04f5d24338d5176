# kill -9 one rank of four mid-epoch after some commits: hvdrun relaunches at 3 (the failed slot
# is out for a 3 s cooldown), the job resumes from the newest commit, grows back to 4 once the
# cooldown has passed, and finishes. Checks that no committed step is redone or skipped, that
# every epoch used each sample once, that every rank ends with identical parameters, and prints
# the time from the kill to the first step after the restore.
HVDRUN=$1 TRAIN=$2
source "$(dirname "$0")/common.sh"
HVD_CMD_LIMIT=200
EPOCHS=4 SAMPLES=128
set_hosts localhost:4
out=$TMP/out err=$TMP/err
run_hvdrun -np 4 --min-np 2 --max-np 4 --host-discovery-script "$DISCOVER" \
  --blacklist-cooldown-range 3 3 "$TRAIN" $EPOCHS $SAMPLES 4 2 250 >"$out" 2>"$err" &
job=$!
wait_for_line "$out" "COMMIT launch=[0-9]+ id=3 " 150
victim=$(rank_pid "$out" 2)
kill_time=$(date +%s.%N)
kill -9 "$victim"
echo "killed rank 2 (pid $victim) at $kill_time"
wait_at_most $job 200
expect_eq "hvdrun exit code after the relaunches" 0 $?
grep "^hvdrun" "$err"
expect_contains "the kill is named" "rank 2 (node" "$err"
expect_contains "its slot is out for the cooldown" "on host localhost; one slot of localhost left out for 3 s" "$err"
expect_contains "relaunch at 3" "elastic: launch 2 (rank 2" "$err"
expect_contains "relaunch at 3 on the rest" "np 3 on localhost:3; left out: localhost (1 slot for" "$err"
expect_contains "the relaunch logs its commit" "elastic: launch 2 resumed from commit" "$err"
expect_contains "the cooldown ends: back to 4" "hosts changed: localhost:3 -> localhost:4" "$err"
expect_contains "relaunch at 4" "elastic: launch 3 (hosts changed): np 4 on localhost:4" "$err"
expect_contains "on_reset ran at the new size" "RESET launch=" "$out"
$CHECK_RUN "$out" $EPOCHS $SAMPLES --launches 3 --sizes 4,3,4 --kill-time "$kill_time" | tee "$TMP/check"
expect_eq "cross-launch checks" 0 "${PIPESTATUS[0]}"
# The default store is per user: $TMPDIR/horovodcpp-elastic-<uid>/<job> (the per-user directory stays).
[ -d "$TMP/horovodcpp-elastic-$(id -u)" ] && pass "the per-user store directory" || fail "no $TMP/horovodcpp-elastic-$(id -u)"
left=$(find "$TMP/horovodcpp-elastic-$(id -u)" -name 'commit-*' 2>/dev/null | wc -l)
expect_eq "the job-named commit store is removed after success" 0 "$left"
finish
