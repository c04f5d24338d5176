# Too few hosts: a job at --min-np 2 on localhost:2 loses a rank (its slot is out for good), so
# only 1 slot is left; after --elastic-timeout hvdrun ends with a clear error, the newest commit
# is intact in HOROVOD_ELASTIC_DIR, and a new hvdrun pointed at it resumes from it and finishes.
HVDRUN=$1 TRAIN=$2
source "$(dirname "$0")/common.sh"
HVD_CMD_LIMIT=100
export HOROVOD_ELASTIC_DIR=$TMP/store
set_hosts localhost:2
out=$TMP/out err=$TMP/err
run_hvdrun -np 2 --host-discovery-script "$DISCOVER" --elastic-timeout 3 "$TRAIN" 2 64 4 2 300 \
  >"$out" 2>"$err" &
job=$!
wait_for_line "$out" "COMMIT launch=[0-9]+ id=2 " 90
kill -9 "$(rank_pid "$out" 1)"
start=$(date +%s)
wait_at_most $job 60
expect_eq "hvdrun exit code" 1 $?
took=$(($(date +%s) - start))
grep "^hvdrun" "$err"
expect_contains "clear error" "hvdrun: elastic: error: only 1 usable slot(s) (localhost:1; left out after failures: localhost (1 slot for good)) for longer than --elastic-timeout 3 s, fewer than --min-np 2; giving up" "$err"
if [ "$took" -le 30 ]; then pass "gave up within 30 s ($took s)"; else fail "took $took s to give up"; fi
newest=$(grep -oE "COMMIT launch=[0-9]+ id=[0-9]+" "$out" | tail -1 | sed 's/.*id=//')
file=$(printf '%s/commit-%012d.hvdc' "$HOROVOD_ELASTIC_DIR" "$newest")
expect_eq "the newest commit ($newest) is on disk" "HVDCOMMIT1 id=$newest size=2" "$(head -1 "$file" 2>/dev/null | cut -d' ' -f1-3)"
# The commit is usable: a new hvdrun on the same store resumes from it.
set_hosts localhost:2
run_hvdrun -np 2 --host-discovery-script "$DISCOVER" "$TRAIN" 2 64 4 2 0 >"$out.2" 2>"$err.2"
expect_eq "resumed job exit code" 0 $?
expect_contains "resumed from the kept commit" "resumed from commit $newest (taken at size 2" "$err.2"
expect_contains "resumed at its step" "commit=$newest step=$((newest * 2))" "$out.2"
finish
