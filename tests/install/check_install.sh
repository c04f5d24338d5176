#!/usr/bin/env bash
# Installs the build into a scratch prefix and builds two separate projects with
# find_package(horovodcpp): the core-only consumer here (horovodcpp::horovodcpp), and, when
# LibTorch was built, the README's own train.cc and CMakeLists.txt, extracted from README.md as
# written (horovodcpp::torch). Runs both on 2 ranks.
#   check_install.sh BUILD_DIR SOURCE_DIR WITH_TORCH MPIEXEC [MPIEXEC FLAGS...]
set -euo pipefail
build_dir=$1; source_dir=$2; with_torch=$3; mpiexec=$4; shift 4
readme="$source_dir/../../README.md"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" > "$work/install.log"
test -f "$work/prefix/include/horovodcpp/horovod.h"
export LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}"

build() {  # build SOURCE BINARY
  cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH="$work/prefix" > "$2.configure.log" 2>&1 || { cat "$2.configure.log"; exit 1; }
  cmake --build "$2" > "$2.build.log" 2>&1 || { cat "$2.build.log"; exit 1; }
}

build "$source_dir/consumer" "$work/consumer"
"$mpiexec" "$@" -np 2 -x LD_LIBRARY_PATH "$work/consumer/consumer"

[ "$with_torch" = ON ] || { echo "check_install: LibTorch not built; README project skipped"; exit 0; }

# The fenced block right after the marker comment "<!-- readme-project: NAME ...".
extract() {
  awk -v marker="<!-- readme-project: $1" '
    index($0, marker) == 1 { found = 1; next }
    found && /^```/ { if (inside) exit; inside = 1; next }
    found && inside { print }' "$readme"
}
mkdir -p "$work/readme"
for file in train.cc CMakeLists.txt; do
  extract "$file" > "$work/readme/$file"
  [ -s "$work/readme/$file" ] || { echo "check_install: README.md has no readme-project block for $file" >&2; exit 1; }
done
build "$work/readme" "$work/readme-build"
cd "$work"
OMP_NUM_THREADS=1 "$mpiexec" "$@" -np 2 -x LD_LIBRARY_PATH -x OMP_NUM_THREADS "$work/readme-build/train" | tee "$work/train.log"
test -s "$work/model.pt" || { echo "check_install: the README program wrote no model.pt" >&2; exit 1; }
first=$(awk '/^step 0 loss/ { print $4 }' "$work/train.log")
last=$(awk '/^step 150 loss/ { print $4 }' "$work/train.log")
awk -v a="$first" -v b="$last" 'BEGIN { exit !(a != "" && b != "" && b < a / 2) }' ||
  { echo "check_install: the README program's loss went from '$first' to '$last'" >&2; exit 1; }
echo "check_install: README program trained (loss $first -> $last) and saved model.pt"
