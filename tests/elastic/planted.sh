# What another local user plants is refused at the scale of a job (tests/elastic/elastic_counter
# under mpirun, np=2, as root): a store directory that user made first (with a commit 1000 and a
# symlink inside), refused on every rank naming its path, owner and mode, with nothing of it
# read or written through; then, in the job's own store, that user's commit 1000 and a damaged
# newest commit (bytes=99999999999999), both skipped with a warning naming the file and what was
# wrong, and the job resumes from its own commit before them, promptly and with the right state.
# The other user is uid 65534 through setpriv; without root or setpriv the test skips (77).
#   planted.sh MPIRUN_AND_FLAGS... -- PROGRAM
args=(); while [ "$1" != "--" ]; do args+=("$1"); shift; done; shift
PROGRAM=$1
source "$(dirname "$0")/../launcher/common.sh"
bounded_run=$(dirname "$0")/../common/bounded_run.sh
NOBODY="setpriv --reuid=65534 --regid=65534 --clear-groups"
if [ "$(id -u)" != 0 ]; then echo "skipped: not root, so no second user can be simulated with setpriv"; exit 77; fi
if ! $NOBODY true 2>/dev/null; then echo "skipped: '$NOBODY true' fails here (no setpriv or no CAP_SETUID)"; exit 77; fi
chmod 1777 "$TMP"  # like /tmp: every user may create entries, none may remove another's
export TMPDIR=$TMP HOROVOD_ELASTIC_JOB=planted-job HVD_TEST_DIR=$TMP/markers
mkdir -p "$HVD_TEST_DIR"
unset HOROVOD_ELASTIC_DIR
run_job() {
  rm -f "$HVD_TEST_DIR"/*
  local exports=(-x TMPDIR -x HOROVOD_ELASTIC_JOB -x HVD_TEST_DIR)
  [ -z "${HOROVOD_ELASTIC_DIR:-}" ] || exports+=(-x HOROVOD_ELASTIC_DIR)
  # A hang ends in 137 after the ranks' stacks are printed (bounded_run.sh).
  bash "$bounded_run" 50 "${args[@]}" -np 2 "${exports[@]}" "$PROGRAM" "$@"
}
# A commit file's header for this payload file and id: "HVDCOMMIT1 id=ID size=2 bytes=N fnv1a=X".
header() {
  python3 - "$1" "$2" <<'PY'
import sys
data = open(sys.argv[1], 'rb').read()
h = 1469598103934665603
for b in data:
    h = ((h ^ b) * 1099511628211) % (1 << 64)
print(f"HVDCOMMIT1 id={sys.argv[2]} size=2 bytes={len(data)} fnv1a={h:016x}")
PY
}

# 1. The other user made the per-user store directory before any job ran.
mine=$TMP/horovodcpp-elastic-0
victim=$TMP/victim
echo "the job's own file" >"$victim"
chmod 644 "$victim"
printf 'state' >"$TMP/payload"
chmod 644 "$TMP/payload"
$NOBODY sh -c "mkdir -m 0755 $mine && mkdir -m 0777 $mine/planted-job && \
  { echo '$(header "$TMP/payload" 1000)'; cat $TMP/payload; } >$mine/planted-job/commit-000000001000.hvdc && \
  for i in 1 2 3 4 5 6; do ln -s $victim $mine/planted-job/.tmp-\$i; done" || fail "could not plant as uid 65534"
start=$(date +%s)
run_job 6 2 >"$TMP/out1" 2>&1
rc=$?
cat "$TMP/out1"
[ $rc -ne 0 ] && pass "the job refused to run on the planted directory (exit $rc)" || fail "the job exited 0"
[ $rc -ne 124 ] && [ $rc -ne 137 ] || fail "the job hung"
expect_contains "the planted directory is named with its owner and mode" \
  "elastic commit store: '$mine' belongs to another user (owner uid 65534, mode 0755; this user is uid 0)" "$TMP/out1"
for r in 0 1; do
  expect_contains "rank $r fails with it" "ERROR rank $r: elastic restore failed on rank $r: elastic commit store: '$mine'" "$TMP/out1"
done
if grep -q "resumed from commit 1000\|START" "$TMP/out1"; then fail "the job used the planted store"; else pass "nothing planted was used"; fi
expect_eq "the symlinks' target is untouched" "the job's own file" "$(cat "$victim")"
expect_eq "nothing of the job's was written there" "" "$(find "$mine" -user 0 | head -1)"
echo "refused within $(($(date +%s) - start)) s"

# 2. The job's own store; the other user's commit 1000 put in it, and the newest own commit damaged.
export HOROVOD_ELASTIC_DIR=$TMP/own
run_job 6 2 >"$TMP/out2" 2>&1
expect_eq "the first run" 0 $?
expect_contains "the first run finishes" "DONE rank 0 step 6 sum 63" "$TMP/out2"
own2=$HOROVOD_ELASTIC_DIR/commit-000000000002.hvdc
own3=$HOROVOD_ELASTIC_DIR/commit-000000000003.hvdc
[ -f "$own2" ] && [ -f "$own3" ] || { fail "commits 2 and 3 are not in the store"; ls -la "$HOROVOD_ELASTIC_DIR"; }
# The other user writes a well-formed commit 1000 (commit 3's state) in a directory of its own;
# it lands in the store as it is, owner included (a move, or a mode once too open).
tail -c +$(( $(head -1 "$own3" | wc -c) + 1 )) "$own3" >"$TMP/state3"
chmod 644 "$TMP/state3"
$NOBODY sh -c "mkdir $TMP/theirs && { echo '$(header "$TMP/state3" 1000)'; cat $TMP/state3; } >$TMP/theirs/c" ||
  fail "could not write as uid 65534"
mv "$TMP/theirs/c" "$HOROVOD_ELASTIC_DIR/commit-000000001000.hvdc"
# Commit 3's header now claims 99999999999999 bytes (this used to abort every rank with bad_alloc).
sed -i '1s/bytes=[0-9]*/bytes=99999999999999/' "$own3"
start=$(date +%s.%N)
run_job 10 2 >"$TMP/out3" 2>&1
rc=$?
took=$(echo "$(date +%s.%N) - $start" | bc)
cat "$TMP/out3"
expect_eq "the second run" 0 $rc
expect_contains "the foreign commit is skipped, naming it" \
  "skipped '$HOROVOD_ELASTIC_DIR/commit-000000001000.hvdc': it belongs to uid 65534, not to this user (uid 0)" "$TMP/out3"
expect_contains "the damaged commit is skipped, naming it and the field" \
  "skipped '$own3': bytes=99999999999999 but the file holds" "$TMP/out3"
expect_contains "the job resumes from its own commit 2" "horovodcpp elastic: resumed from commit 2" "$TMP/out3"
expect_contains "with commit 2's state" "START rank 1 step 4 commit 2" "$TMP/out3"
expect_contains "and ends with the same result" "DONE rank 1 step 10 sum 165" "$TMP/out3"
if grep -q "resumed from commit 1000\|bad_alloc" "$TMP/out3"; then fail "a planted or damaged commit was used"; else pass "neither was used"; fi
echo "second run took $took s"
finish
