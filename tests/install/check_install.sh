#!/usr/bin/env bash
# Installs the build into a scratch prefix, builds a separate project with
# find_package(horovodcpp), and runs it on 2 ranks.
set -euo pipefail
build_dir=$1; source_dir=$2; mpiexec=$3; shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" > "$work/install.log"
test -f "$work/prefix/include/horovodcpp/horovod.h"
cmake -S "$source_dir/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log"
cmake --build "$work/consumer" > "$work/build.log"
LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" "$mpiexec" "$@" -np 2 -x LD_LIBRARY_PATH "$work/consumer/consumer"
