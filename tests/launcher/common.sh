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

# Processes whose command line contains $1 (not this script's own pgrep).
alive() { pgrep -f -- "$1" | grep -vx "$$" || true; }

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
