# Input errors: clear message, exit code 2, nothing launched. --version and --check-build.
HVDRUN=$1 RANK_PROGRAM=$2
source "$(dirname "$0")/common.sh"

expect_error() {  # what, expected message; then the command
  local what=$1 message=$2
  shift 2
  limited "$@" >"$TMP/out" 2>&1
  expect_eq "$what: exit code" 2 $?
  expect_contains "$what: message" "$message" "$TMP/out"
}

printf 'a slots=2\n# comment\n\nb slots=two\n' >"$TMP/bad_hosts"
printf 'a slots=1\nb slots=1\n' >"$TMP/hosts"
expect_error "unknown flag" "hvdrun: error: unknown flag '--frobnicate'" "$HVDRUN" --frobnicate -np 2 "$RANK_PROGRAM"
expect_error "np 0" "hvdrun: error: -np '0': expected a whole number >= 1" "$HVDRUN" -np 0 "$RANK_PROGRAM"
expect_error "np -3" "hvdrun: error: -np '-3': expected a whole number >= 1" "$HVDRUN" -np -3 "$RANK_PROGRAM"
expect_error "np abc" "hvdrun: error: -np 'abc': expected a whole number >= 1" "$HVDRUN" -np abc "$RANK_PROGRAM"
expect_error "empty -H" "hvdrun: error: -H/--hosts: empty host list (expected host:slots,...)" "$HVDRUN" -H "" "$RANK_PROGRAM"
expect_error "-i with a space" "hvdrun: error: -i/--ssh-identity-file '/k/my key': the path contains whitespace" "$HVDRUN" -np 2 -H n1:2 -i "/k/my key" "$RANK_PROGRAM"
expect_error "--mpi-args unclosed quote" "hvdrun: error: --mpi-args '-x \"A=b': an unclosed double quote" "$HVDRUN" -np 2 --mpi-args '-x "A=b' "$RANK_PROGRAM"
expect_error "no -np" "-np is required" "$HVDRUN" "$RANK_PROGRAM"
expect_error "slots fewer than np" "-np 3 needs 3 slots but the hosts give 2 (a:1,b:1)" "$HVDRUN" -np 3 -H a:1,b:1 "$RANK_PROGRAM"
expect_error "hostfile slots fewer than np" "-np 4 needs 4 slots but the hosts give 2" "$HVDRUN" -np 4 --hostfile "$TMP/hosts" "$RANK_PROGRAM"
expect_error "missing program" "missing program to run" "$HVDRUN" -np 2
expect_error "program not found" "program 'no-such-program-hvd' not found" "$HVDRUN" -np 2 no-such-program-hvd
printf '#!/bin/sh\n' >"$TMP/not_executable" && chmod -x "$TMP/not_executable"
expect_error "program without execute permission" "program '$TMP/not_executable' '$TMP/not_executable' is not executable (no execute permission: chmod +x)" "$HVDRUN" -np 2 "$TMP/not_executable"
expect_error "more ranks than this machine can start" "-np 99999 on this machine needs at least 399996 threads (4 per rank) but kernel." "$HVDRUN" -np 99999 "$RANK_PROGRAM"
# Hosts that are all this machine: the program is checked too (mpirun would start it here).
printf 'localhost slots=2\n' >"$TMP/local_hosts"
expect_error "program not found, -H localhost:2" "program 'no-such-program-hvd' not found" "$HVDRUN" -H localhost:2 no-such-program-hvd
expect_error "program not found, local hostfile" "program 'no-such-program-hvd' not found" "$HVDRUN" --hostfile "$TMP/local_hosts" no-such-program-hvd
expect_error "malformed hostfile" "hostfile $TMP/bad_hosts line 4: bad slot count 'two'" "$HVDRUN" -np 2 --hostfile "$TMP/bad_hosts" "$RANK_PROGRAM"
expect_error "missing hostfile" "cannot read hostfile $TMP/none" "$HVDRUN" -np 2 --hostfile "$TMP/none" "$RANK_PROGRAM"
expect_error "bad -H" "bad slot count 'x' for host 'a'" "$HVDRUN" -np 2 -H a:x "$RANK_PROGRAM"
# Shell syntax in a host name is refused in every mode, --dry-run included (the line it prints
# is one a user pastes into a shell), from -H and from a hostfile alike.
for host in 'a;b' '$(id)' '`id`'; do
  expect_error "-H '$host' --dry-run" "bad host name '$host': a host name has only letters" "$HVDRUN" --dry-run -np 2 -H "$host:2" "$RANK_PROGRAM"
  expect_error "-H '$host'" "bad host name '$host'" "$HVDRUN" -np 2 -H "$host:2" "$RANK_PROGRAM"
  printf '%s slots=2\n' "$host" >"$TMP/shell_hosts"
  expect_error "hostfile '$host' --dry-run" "hostfile $TMP/shell_hosts line 1: bad host name '$host'" "$HVDRUN" --dry-run -np 2 --hostfile "$TMP/shell_hosts" "$RANK_PROGRAM"
done
expect_error "mpirun not found" "mpirun not found in PATH" env PATH="$TMP/empty" "$HVDRUN" -np 2 "$RANK_PROGRAM"
expect_error "bad knob flag" "--cycle-time-ms 'soon': HOROVOD_CYCLE_TIME='soon' is not valid" "$HVDRUN" -np 2 --cycle-time-ms soon "$RANK_PROGRAM"
expect_error "bad inherited knob" "HOROVOD_CACHE_CAPACITY='many' is not valid" env HOROVOD_CACHE_CAPACITY=many "$HVDRUN" -np 2 "$RANK_PROGRAM"

for flag in --version -v; do
  run_hvdrun $flag >"$TMP/version" 2>&1
  expect_eq "$flag exit code" 0 $?
  expect_eq "$flag" "hvdrun (horovodcpp) ${HVD_EXPECT_VERSION}" "$(cat "$TMP/version")"
done

run_hvdrun -cb >"$TMP/build_short" 2>&1
expect_eq "-cb exit code" 0 $?
run_hvdrun --check-build >"$TMP/build" 2>&1
expect_eq "--check-build exit code" 0 $?
expect_eq "-cb prints what --check-build prints" "$(cat "$TMP/build")" "$(cat "$TMP/build_short")"
mark() { [ "$1" = ON ] && echo "[X]" || echo "[ ]"; }
expect_contains "--check-build MPI" "[X] MPI" "$TMP/build"
expect_contains "--check-build NCCL" "$(mark "$HVD_EXPECT_CUDA") NCCL" "$TMP/build"
expect_contains "--check-build CUDA" "$(mark "$HVD_EXPECT_CUDA") CUDA" "$TMP/build"
expect_contains "--check-build LibTorch" "$(mark "$HVD_EXPECT_TORCH") LibTorch" "$TMP/build"
expect_contains "--check-build timeline" "[X] Timeline" "$TMP/build"

run_hvdrun --help >"$TMP/help" 2>&1
expect_eq "--help exit code" 0 $?
for flag in fusion-threshold-mb cycle-time-ms cache-capacity timeline-filename timeline-mark-cycles \
  no-stall-check stall-check-warning-time-seconds stall-check-shutdown-time-seconds \
  hierarchical-allreduce autotune autotune-log-file autotune-warmup-samples autotune-steps-per-sample \
  autotune-bayes-opt-max-samples autotune-gaussian-process-noise log-level; do
  expect_contains "--help lists --$flag" "--$flag" "$TMP/help"
done
# Started as horovodrun (the symlink beside hvdrun), it speaks under that name: errors, warnings,
# the printed plan, --version and the usage line.
HOROVODRUN="$(dirname "$HVDRUN")/horovodrun"
if [ -x "$HOROVODRUN" ]; then
  expect_error "horovodrun: unknown flag" "horovodrun: error: unknown flag '--frobnicate' (see horovodrun --help)" "$HOROVODRUN" --frobnicate -np 2 "$RANK_PROGRAM"
  limited "$HOROVODRUN" --version >"$TMP/hr_version" 2>&1
  expect_eq "horovodrun --version" "horovodrun (horovodcpp) ${HVD_EXPECT_VERSION}" "$(cat "$TMP/hr_version")"
  limited "$HOROVODRUN" --dry-run --gloo -np 2 "$RANK_PROGRAM" >"$TMP/hr_plan" 2>&1
  expect_contains "horovodrun --dry-run prints its plan under its name" "horovodrun: command: " "$TMP/hr_plan"
  expect_contains "horovodrun warns under its name" "horovodrun: warning: " "$TMP/hr_plan"
  limited "$HOROVODRUN" --help >"$TMP/hr_help" 2>&1
  expect_contains "horovodrun --help usage line" "Usage: horovodrun " "$TMP/hr_help"
  limited "$HVDRUN" --dry-run -np 2 "$RANK_PROGRAM" >"$TMP/plan" 2>&1
  expect_contains "hvdrun --dry-run keeps its own name" "hvdrun: command: " "$TMP/plan"
else
  fail "horovodrun symlink missing beside $HVDRUN"
fi
finish
