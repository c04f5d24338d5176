# Helpers for the elastic test scripts: sourced with HVDRUN and TRAIN set. Reuses the launcher
# tests' helpers (TMP, checks, time limits) and adds a discovery script that prints $TMP/hosts.
source "$(dirname "${BASH_SOURCE[0]}")/../launcher/common.sh"
CHECK_RUN="python3 $(dirname "${BASH_SOURCE[0]}")/check_run.py"
export OMP_NUM_THREADS=1
# Every launch's default commit store lands under $TMP (and goes with it).
export TMPDIR=$TMP
unset HOROVOD_ELASTIC_DIR
DISCOVER=$TMP/discover.sh
printf '#!/bin/sh\ncat %s/hosts\n' "$TMP" >"$DISCOVER"
chmod +x "$DISCOVER"
set_hosts() { echo "$1" >"$TMP/hosts.new" && mv "$TMP/hosts.new" "$TMP/hosts"; }

# Waits up to $3 seconds for a line matching regex $2 in file $1.
wait_for_line() {
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    grep -qE -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "note: no line matching '$2' in $1 after $3 s"
  return 1
}

# The pid of rank $2 in the first launch that printed START lines to file $1.
rank_pid() {
  grep -oE "START launch=[0-9]+ rank=$2 .* pid=[0-9]+" "$1" | head -1 | sed 's/.*pid=//'
}
