#!/usr/bin/env bash
# An elastic horovod.torch job across a relaunch, as hvdrun's elastic driver runs it: launch 1 at
# np=2 stops after commit 3 because rank 0 got the "hosts changed" notice (every rank exits 75);
# launch 2 at np=1 resumes from commit 3 (the reset callbacks run: the size changed), finishes,
# and ends with the weights of one process trained on every step's union batch.
#   elastic_relaunch.sh BUILD_DIR PYTHON
set -uo pipefail
build=$1; python=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" HOROVOD_ELASTIC_DIR="$work/store"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$build/launcher/hvdrun" -np 2 "$python" "$here/elastic_job.py" 3 "$work/out.json"
code=$?
[ "$code" = 75 ] || { echo "elastic_relaunch: launch 1 exited $code, want 75 (stopped for a change of hosts)"; exit 1; }
ls "$work/store"/commit-*3.hvdc > /dev/null || { echo "elastic_relaunch: no commit 3 in the store"; exit 1; }
[ ! -e "$work/out.json" ] || { echo "elastic_relaunch: launch 1 ran to the end"; exit 1; }
"$build/launcher/hvdrun" -np 1 "$python" "$here/elastic_job.py" 0 "$work/out.json" ||
  { echo "elastic_relaunch: launch 2 failed"; exit 1; }
"$python" - "$work/out.json" <<'PY'
import json, sys
out = json.load(open(sys.argv[1]))
assert out['launches'] == [[2, 0], [1, 3]], out['launches']   # (size, step) at each start
assert out['resets'] == [1], out['resets']                     # restored at another size
assert out['step'] == 6
for got, want in zip(out['weights'], out['reference']):
    assert all(abs(a - b) <= 1e-12 for a, b in zip(got, want)), (got, want)
print("elastic_relaunch: stopped at commit 3 on 2 ranks, resumed on 1, weights equal the reference")
PY
