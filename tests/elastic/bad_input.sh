# Bad input: a discovery script that fails, hangs, prints garbage or is missing gets an error
# naming the script (and the line); --min-np > --max-np is refused. Nothing is launched. Also
# --dry-run in elastic mode: discovery runs once and the first command is printed.
HVDRUN=$1 TRAIN=$2
source "$(dirname "$0")/common.sh"
HVD_CMD_LIMIT=40
printf '#!/bin/sh\necho "no cluster credentials" >&2\nexit 3\n' >"$TMP/fails.sh"
printf '#!/bin/sh\necho localhost:2\necho "Traceback (most recent call last):"\n' >"$TMP/garbage.sh"
printf '#!/bin/sh\nsleep 300\n' >"$TMP/hangs.sh"
chmod +x "$TMP"/*.sh

expect_error() {  # WHAT EXPECTED_TEXT ARGS...
  local what=$1 text=$2
  shift 2
  run_hvdrun "$@" >"$TMP/o" 2>&1
  expect_eq "$what: exit code 2" 2 $?
  expect_contains "$what: message" "$text" "$TMP/o"
}
expect_error "failing script" "hvdrun: error: host discovery script '$TMP/fails.sh' exited with code 3; its last error line: 'no cluster credentials'" \
  -np 2 --host-discovery-script "$TMP/fails.sh" "$TRAIN" 1 8 4 2 0
expect_error "garbage" "host discovery script '$TMP/garbage.sh' line 2: 'Traceback (most recent call last):': expected HOST or HOST:SLOTS" \
  -np 2 --host-discovery-script "$TMP/garbage.sh" "$TRAIN" 1 8 4 2 0
start=$(date +%s)
expect_error "hanging script" "host discovery script '$TMP/hangs.sh' did not finish within 10 s (killed)" \
  -np 2 --host-discovery-script "$TMP/hangs.sh" "$TRAIN" 1 8 4 2 0
took=$(($(date +%s) - start))
if [ "$took" -le 20 ]; then pass "hang detected in $took s"; else fail "hang took $took s"; fi
expect_error "missing script" "host discovery script '$TMP/nope.sh' exited with code 127" \
  -np 2 --host-discovery-script "$TMP/nope.sh" "$TRAIN" 1 8 4 2 0
expect_error "--min-np > --max-np" "hvdrun: error: --min-np 4 is greater than --max-np 2" \
  --min-np 4 --max-np 2 --host-discovery-script "$DISCOVER" "$TRAIN" 1 8 4 2 0
expect_error "elastic flag without discovery" "--max-np needs --host-discovery-script" \
  -np 2 --max-np 4 "$TRAIN" 1 8 4 2 0
set_hosts "localhost:3"
run_hvdrun --dry-run -np 2 --max-np 2 --host-discovery-script "$DISCOVER" "$TRAIN" 1 8 4 2 0 >"$TMP/o" 2>&1
expect_eq "--dry-run exit code" 0 $?
expect_contains "--dry-run shows discovery" "hvdrun: elastic: discovery offers localhost:3" "$TMP/o"
expect_contains "--dry-run caps at --max-np" "-np 2 -H localhost:2 " "$TMP/o"
expect_contains "--dry-run names the job variable" "hvdrun: environment added: HOROVOD_ELASTIC_JOB=" "$TMP/o"
if grep -q "START" "$TMP/o"; then fail "--dry-run ran the program"; else pass "--dry-run ran nothing"; fi
# Discovery output goes through the same host-name check as -H, --dry-run included.
printf '#!/bin/sh\necho localhost:1\necho "\\$(id):2"\n' >"$TMP/shell.sh"
chmod +x "$TMP/shell.sh"
expect_error "shell syntax from discovery, --dry-run" "host discovery script '$TMP/shell.sh' line 2: '\$(id):2': expected HOST or HOST:SLOTS; bad host name '\$(id)'" \
  --dry-run -np 1 --host-discovery-script "$TMP/shell.sh" "$TRAIN" 1 8 4 2 0
if wait_gone "$TMP/hangs.sh" 5; then pass "the hung script was killed"; else fail "the hung script was left running"; fi
finish
