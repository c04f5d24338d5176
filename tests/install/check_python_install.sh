#!/usr/bin/env bash
# The Python package from cmake --install: importable from a scratch prefix with PYTHONPATH, and
# the README's Python section as written: its two commands (install into ~/.local, run train.py
# under hvdrun), with HOME in a scratch folder, and its train.py, which must train (loss halves)
# and save model.pt. The same train.py under a plain mpirun, importing from the prefix, and under
# the installed horovodrun with a Horovod launch command line as Horovod's docs write them; and
# horovod.run from the prefix, through the prefix's hvdrun.
#   check_python_install.sh BUILD_DIR SOURCE_DIR PYTHON PYTHON_INSTALL_DIR MPIEXEC [MPIEXEC FLAGS...]
set -euo pipefail
build_dir=$1; source_dir=$2; python=$3; pydir=$4; mpiexec=$5; shift 5
readme="$source_dir/../../README.md"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1

cmake --install "$build_dir" --prefix "$work/prefix" > "$work/install.log"
test -f "$work/prefix/$pydir/horovod/torch/__init__.py" ||
  { echo "check_python_install: no horovod/torch/__init__.py under $work/prefix/$pydir" >&2; exit 1; }
where=$(cd "$work" && PYTHONPATH="$work/prefix/$pydir" "$python" -c 'import horovod.torch, os; print(os.path.dirname(horovod.torch.__file__))')
[ "$where" = "$work/prefix/$pydir/horovod/torch" ] ||
  { echo "check_python_install: imported horovod.torch from $where, not the prefix" >&2; exit 1; }

# The fenced block right after a marker comment in README.md.
extract() {
  awk -v marker="<!-- $1" '
    index($0, marker) == 1 { found = 1; next }
    found && /^```/ { if (inside) exit; inside = 1; next }
    found && inside { print }' "$readme"
}
mkdir -p "$work/run" "$work/home"
extract "readme-project: train.py" > "$work/run/train.py"
extract "readme-python-commands" > "$work/run/commands.sh"
[ -s "$work/run/train.py" ] && [ "$(grep -c . "$work/run/commands.sh")" = 2 ] ||
  { echo "check_python_install: README.md lacks the Python program or its two commands" >&2; exit 1; }
ln -s "$build_dir" "$work/run/build"  # the commands name the build folder `build`

check_training() {  # LOG WHAT
  local first last
  first=$(awk '/^step 0 loss/ { print $4 }' "$1")
  last=$(awk '/^step 150 loss/ { print $4 }' "$1")
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(a != "" && b != "" && b < a / 2) }' ||
    { echo "check_python_install: $2: the loss went from '$first' to '$last'" >&2; exit 1; }
  test -s "$work/run/model.pt" || { echo "check_python_install: $2 wrote no model.pt" >&2; exit 1; }
  echo "check_python_install: $2 trained (loss $first -> $last) and saved model.pt"
  rm -f "$work/run/model.pt"
}

(cd "$work/run" && HOME="$work/home" bash -euo pipefail commands.sh) 2>&1 | sed 's/^\[1,0\]<stdout>://' | tee "$work/readme.log"
check_training "$work/readme.log" "the README's commands"

(cd "$work/run" && "$mpiexec" "$@" -np 2 -x PYTHONPATH="$work/prefix/$pydir" -x OMP_NUM_THREADS "$python" train.py) |
  tee "$work/mpirun.log"
check_training "$work/mpirun.log" "train.py under a plain mpirun"

# A Horovod user's launch line, unchanged: horovodrun with its MPI controller flag and hosts.
(cd "$work/run" && PYTHONPATH="$work/prefix/$pydir" "$work/prefix/bin/horovodrun" -np 2 -H localhost:2 --mpi \
   --log-level warning --no-autotune "$python" train.py) 2>&1 | sed 's/^\[1,0\]<stdout>://' | tee "$work/horovodrun.log"
check_training "$work/horovodrun.log" "train.py under the installed horovodrun"

# horovod.run from the installed package launches the installed hvdrun (found beside the
# package, not on PATH, which here has none) and returns each rank's value.
(cd "$work/run" && PATH=$(dirname "$(command -v mpirun)"):/usr/bin:/bin PYTHONPATH="$work/prefix/$pydir" \
  "$python" -c '
import os, sys, horovod
from horovod.runner.hvdrun_location import find_hvdrun
assert find_hvdrun() == sys.argv[1], (find_hvdrun(), sys.argv[1])
results = horovod.run(lambda: int(os.environ["OMPI_COMM_WORLD_RANK"]) * 10, num_proc=2)
assert results == [0, 10], results
print("check_python_install: horovod.run through", find_hvdrun(), "returned", results)' \
  "$work/prefix/bin/hvdrun")
