# The emulation reclaims the shared memory of killed runs and never a live run's (Note
# [Reclaiming the emulation's shared memory], shared_rendezvous.h). Under a prefix of its own, so
# that the emulated tests ctest runs beside it neither see nor reclaim its segments:
#   1. job C (np=2, slowed down) runs throughout, holding segments of its own;
#   2. job A (np=2) starts, and is killed with SIGKILL, both ranks, once both hold data segments:
#      those stay;
#   3. job B (np=2) starts: it must pass, and remove exactly A's segments, saying so;
#   4. C, alive while A and B started, must pass too; nothing of the prefix is left at the end.
#   reclaim_segments.sh MPIRUN_AND_FLAGS... -- SLOW_PROGRAM ARG -- QUICK_PROGRAM
set -u
args=(); while [ "$1" != "--" ]; do args+=("$1"); shift; done; shift
SLOW=$1 SLOW_ARG=$2; shift 3
QUICK=$1
export HVD_EMU_SHM_PREFIX=hvdemureclaim$$ OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TMP=$(mktemp -d)
a_ranks="" c_ranks=""
cleanup() {  # on any exit: timeout hands SIGTERM to mpirun, which ends its ranks
  local j p
  for j in $(jobs -p); do kill -TERM "$j" 2>/dev/null; done
  sleep 1
  for p in $a_ranks $c_ranks; do kill -9 "$p" 2>/dev/null; done
  rm -f /dev/shm/"$HVD_EMU_SHM_PREFIX"-*
  rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
segments() { ls /dev/shm | grep "^$HVD_EMU_SHM_PREFIX-" | sort; }
# Data segments' stamps' pids: <prefix>-<pid>.<start>.<ns>-<key>-<rank>-<generation>.
data_pids() { segments | grep -E -- '-[0-9]+-[0-9]+$' | sed -E "s/^$HVD_EMU_SHM_PREFIX-([0-9]+)\..*/\1/" | sort -u; }
parent_of() { ps -o ppid= -p "$1" 2>/dev/null | tr -d ' '; }
# Waits up to 40 s (a loaded machine can take tens of seconds to start a job) until the two ranks
# of job $1 (timeout > mpirun > ranks) hold data segments; prints their pids.
ranks_with_segments() {
  for _ in $(seq 400); do
    local pids=() p
    for p in $(data_pids); do [ "$(parent_of "$(parent_of "$p")")" = "$1" ] && pids+=("$p"); done
    [ ${#pids[@]} -eq 2 ] && { echo "${pids[@]}"; return 0; }
    sleep 0.1
  done
  return 1
}
[ -z "$(segments)" ] || fail "segments of prefix $HVD_EMU_SHM_PREFIX exist before the test"

# 1. C, live (slowed down) until the end.
HVD_EMU_MAX_DELAY_US=20000 timeout -k 5 90 "${args[@]}" -np 2 "$SLOW" "$SLOW_ARG" >"$TMP/c.log" 2>&1 &
c=$!
c_ranks=$(ranks_with_segments $c) || { cat "$TMP/c.log"; fail "job C's ranks never held data segments"; }
c_live() { local p; for p in $c_ranks; do kill -0 "$p" 2>/dev/null || return 1; done; }

# 2. A, killed.
HVD_EMU_MAX_DELAY_US=20000 timeout -k 5 90 "${args[@]}" -np 2 "$SLOW" "$SLOW_ARG" >"$TMP/a.log" 2>&1 &
a=$!
a_ranks=$(ranks_with_segments $a) || { cat "$TMP/a.log"; fail "job A's ranks never held data segments"; }
kill -9 $a_ranks
wait $a
for p in $a_ranks; do segments | grep -- "-$p\." ; done >"$TMP/left"
[ -s "$TMP/left" ] || fail "job A's ranks ($a_ranks) were killed but left no segment: nothing to reclaim"
echo "job A's ranks ($a_ranks) killed; left behind:"; sed 's/^/  /' "$TMP/left"

# 3. B, while C runs.
timeout -k 5 90 "${args[@]}" -np 2 "$QUICK" >"$TMP/b.log" 2>&1 || { cat "$TMP/b.log"; fail "job B failed"; }
c_live || fail "job C ended before job B did: C was not live all along (too slow a machine?)"
removed=$(sed -nE 's/.*EMULATED NCCL: removed ([0-9]+) shared-memory segment.*/\1/p' "$TMP/b.log" | awk '{s += $1} END {print s + 0}')
expected=$(wc -l <"$TMP/left")
for f in $(cat "$TMP/left"); do [ ! -e "/dev/shm/$f" ] || fail "job B passed but $f (job A's) is still there"; done
[ "$removed" = "$expected" ] || { cat "$TMP/b.log"; fail "job B removed $removed segment(s), job A left $expected"; }
echo "job B passed and removed job A's $removed segment(s) while job C (ranks $c_ranks) ran"

# 4. C unharmed.
wait $c || { cat "$TMP/c.log"; fail "job C failed"; }
left=$(segments)
[ -z "$left" ] || fail "segments left after every job ended: $left"
echo "job C passed; no segment of the prefix left"
