# Helpers for the hvdrun test scripts: sourced with HVDRUN and RANK_PROGRAM set.
set -u
TMP=$(mktemp -d /tmp/hvdrun-test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
FAILURES=0

fail() { echo "FAIL: $*"; FAILURES=$((FAILURES + 1)); }
pass() { echo "ok: $*"; }

# expect_eq WHAT EXPECTED ACTUAL
expect_eq() { if [ "$2" == "$3" ]; then pass "$1"; else fail "$1: expected '$2', got '$3'"; fi; }
# expect_contains WHAT NEEDLE FILE
expect_contains() {
  if grep -qF -- "$2" "$3"; then pass "$1"; else fail "$1: '$2' not in output:"; sed 's/^/    /' "$3"; fi
}

# hvdrun under a time limit, so a hang fails its check (exit code 124) within a minute and the
# script's EXIT trap still cleans up. timeout forwards SIGTERM to hvdrun, which ends the ranks.
HVD_CMD_LIMIT=${HVD_CMD_LIMIT:-60}
limited() { timeout -k 5 "$HVD_CMD_LIMIT" "$@"; }
run_hvdrun() { limited "$HVDRUN" "$@"; }

# Waits for background job $1 at most $2 seconds, SIGKILLing it then; returns its exit status.
wait_at_most() {
  timeout "$2" tail --pid="$1" -s 0.1 -f /dev/null
  kill -9 "$1" 2>/dev/null && echo "note: pid $1 still running after $2 s: killed"
  wait "$1"
}

# Processes whose command line contains $1 (not this script's own pgrep).
alive() { pgrep -f -- "$1" | grep -vx "$$" || true; }

# Ends what a failed check left running: the processes whose command line has the unique tag $1.
end_leftovers() { local p; for p in $(alive "$1"); do kill -KILL "$p" 2>/dev/null; done; }

# Waits up to $2 seconds for no process to match $1; prints what is left otherwise.
wait_gone() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    [ -z "$(alive "$1")" ] && return 0
    sleep 0.1
  done
  pgrep -af -- "$1"
  return 1
}

finish() {
  if [ "$FAILURES" -ne 0 ]; then echo "$FAILURES check(s) failed"; exit 1; fi
  echo "all checks passed"
  exit 0
}
