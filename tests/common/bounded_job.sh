# Sourced by test scripts that run a whole multi-rank job and must fail fast when it hangs.
#
#   bounded_job SECONDS TAG COMMAND [ARGS...]
#
# Runs COMMAND (an mpiexec and its ranks) in the background and returns its exit status, or 137
# when it has not ended within SECONDS. TAG ("NAME=VALUE") is a variable in the environment of
# every process of the job, and of no other process: COMMAND must set it (mpiexec hands its
# environment to the ranks it starts here). Before an overrun job is killed, every process that
# carries TAG is described (each thread's name, state and kernel wait, and with gdb where the
# image has it, each rank's stacks), and that is printed after the job's output, under a "STUCK
# JOB" line: a hang that happens once in hundreds of runs is then explained by the run it
# happened in.

# The pids of the processes whose environment holds TAG.
job_pids() {
  local tag=$1 environ pid
  for environ in /proc/[0-9]*/environ; do
    pid=${environ#/proc/}
    pid=${pid%/environ}
    { tr '\0' '\n' <"$environ"; } 2>/dev/null | grep -qxF -- "$tag" && echo "$pid"
  done
}

# The stacks take a few seconds a rank (gdb reads the binary's symbols): they stop after
# BOUNDED_JOB_DESCRIBE_SECONDS (60) in all, so that an outer bound (ctest's TIMEOUT) can allow for them.
describe_stuck_job() {
  local seconds=$1 tag=$2 pid rank thread left
  local until=$(($(date +%s) + ${BOUNDED_JOB_DESCRIBE_SECONDS:-60}))
  echo "STUCK JOB: not ended within $seconds s; its processes ($tag):"
  for pid in $(job_pids "$tag"); do
    [ -d "/proc/$pid" ] || continue  # ended since
    rank=$({ tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    echo "  process $pid, $(cat "/proc/$pid/comm" 2>/dev/null)${rank:+, rank $rank}:"
    for thread in /proc/"$pid"/task/*; do
      # stat's third field is the state (R running, S sleeping, D uninterruptible, T stopped).
      echo "    thread $(cat "$thread/comm" 2>/dev/null): state $(cut -d' ' -f3 "$thread/stat" 2>/dev/null), waits in $(cat "$thread/wchan" 2>/dev/null)"
    done
    # The ranks' stacks (mpiexec's own only show its event loop).
    if [ -n "$rank" ] && command -v gdb >/dev/null; then
      left=$((until - $(date +%s)))
      if ((left < 2)); then
        echo "    (no stacks: the description's ${BOUNDED_JOB_DESCRIBE_SECONDS:-60} s are spent)"
      else
        timeout $((left < 20 ? left : 20)) gdb -p "$pid" -batch -nx -ex "thread apply all bt 20" 2>/dev/null |
          grep -E "^(Thread|#)" | sed 's/^/    /'
      fi
    fi
  done
}

bounded_job() {
  local seconds=$1 tag=$2
  shift 2
  "$@" &
  local job=$!
  # Every multi-rank test polls here: the clock (EPOCHREALTIME, in microseconds) and the pause
  # (read -t on a pipe that nobody writes) are builtins, so a look starts no process.
  local deadline=$((${EPOCHREALTIME/./} + seconds * 1000000)) pause
  exec {pause}<> <(:)
  while kill -0 "$job" 2>/dev/null; do
    if ((${EPOCHREALTIME/./} >= deadline)); then
      # Printed after the job's own output, which its processes go on writing meanwhile.
      local report pid
      report=$(describe_stuck_job "$seconds" "$tag")
      for pid in $(job_pids "$tag"); do kill -KILL "$pid" 2>/dev/null; done
      wait "$job" 2>/dev/null
      exec {pause}<&-
      echo "$report"
      return 137
    fi
    read -r -t 0.1 -u "$pause" || true
  done
  exec {pause}<&-
  wait "$job"
}
