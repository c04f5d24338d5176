#!/usr/bin/env bash
# HOROVOD_TIMELINE naming a symlink another user put in a world-writable directory (made by uid
# 65534 through setpriv when run as root, as CI does; by this user otherwise): hvd::init() fails
# on every rank naming the path and saying it is a symbolic link, and the link's target keeps its
# contents (it used to be truncated and overwritten with the trace, as root).
#   timeline_symlink_test.sh PROGRAM MPIRUN_AND_FLAGS...
set -u
# Describes the ranks of a job that overruns its bound, then kills them.
bounded_run=$(dirname "${BASH_SOURCE[0]}")/../common/bounded_run.sh
prog=$1; shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
chmod 1777 "$dir"
echo "the job's own file" >"$dir/victim"
chmod 644 "$dir/victim"
planter=""
if [ "$(id -u)" = 0 ] && setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
  planter="setpriv --reuid=65534 --regid=65534 --clear-groups"
else
  echo "note: no second user here (not root, or setpriv fails): the link is made by this user"
fi
$planter ln -s "$dir/victim" "$dir/timeline.json" || { echo "FAIL: could not plant the link"; exit 1; }
HOROVOD_TIMELINE=$dir/timeline.json bash "$bounded_run" 60 "$@" -np 2 -x HOROVOD_TIMELINE "$prog" >"$dir/out" 2>&1
rc=$?
cat "$dir/out"
failures=0
[ $rc -eq 0 ] || { echo "FAIL: a rank did not fail init naming the path (exit $rc)"; failures=1; }
[ "$(grep -c "failed as it should (names the path).*'$dir/timeline.json' is a symbolic link" "$dir/out")" -eq 2 ] ||
  { echo "FAIL: not every rank said the path is a symbolic link"; failures=1; }
[ "$(cat "$dir/victim")" = "the job's own file" ] || { echo "FAIL: the link's target was written"; failures=1; }
[ $failures -eq 0 ] && echo PASS
exit $failures
