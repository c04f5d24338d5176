# Real local launches: np 1, 2 and 4 give the right topology and allreduce, knob flags reach
# every rank, and arguments with spaces, quotes and ';' arrive unchanged.
HVDRUN=$1 RANK_PROGRAM=$2
source "$(dirname "$0")/common.sh"

for np in 1 2 4; do
  out=$TMP/info$np
  run_hvdrun -np $np --fusion-threshold-mb 64 "$RANK_PROGRAM" info np$np >"$out" 2>&1
  expect_eq "np=$np exit code" 0 $?
  expect_eq "np=$np one line per rank" $np "$(grep -c "RANKINFO tag=np$np" "$out")"
  for ((r = 0; r < np; r++)); do
    # Local ranks: local_rank == rank, one node; element 1 of the sum is size(size+1)/2.
    expect_contains "np=$np rank $r" "[1,$r]<stdout>:RANKINFO tag=np$np rank=$r size=$np local_rank=$r local_size=$np cross_rank=0 cross_size=1 " "$out"
    # Anchored on the tag: "rank=$r " alone also matches local_rank=/cross_rank=.
    expect_contains "np=$np rank $r knob and allreduce" "fusion=67108864 nccl_if=unset elements=16 allreduce=ok element1=$((np * (np + 1) / 2))" <(grep "RANKINFO tag=np$np rank=$r " "$out")
  done
done

out=$TMP/args
run_hvdrun -np 2 "$RANK_PROGRAM" args "a b" "it's" 'x;echo hacked' '$HOME' '"q"' '' '*' >"$out" 2>&1
expect_eq "args exit code" 0 $?
for r in 0 1; do
  n=1
  for a in "a b" "it's" 'x;echo hacked' '$HOME' '"q"' '' '*'; do
    expect_contains "rank $r argument $n unchanged" "ARG rank=$r $n=<$a>" "$out"
    n=$((n + 1))
  done
done
if grep -q '^hacked' "$out"; then fail "an argument was run by a shell"; fi

# Explicit -H localhost:N, --verbose and --output-filename.
out=$TMP/verbose
run_hvdrun -np 2 -H localhost:2 --verbose --output-filename "$TMP/logs" "$RANK_PROGRAM" info verbose >"$out" 2>&1
expect_eq "-H localhost:2 exit code" 0 $?
expect_contains "--verbose prints the command" "hvdrun: command: mpirun" "$out"
expect_contains "--output-filename reaches mpirun" "--output-filename $TMP/logs" "$out"
found=$(grep -rl "RANKINFO tag=verbose" "$TMP/logs" 2>/dev/null | wc -l)
expect_eq "--output-filename wrote one file per rank" 2 "$found"

# --dry-run prints the command and the added environment, and runs nothing.
out=$TMP/dry
run_hvdrun -np 3 --dry-run --cycle-time-ms 2 "$RANK_PROGRAM" info dry >"$out" 2>&1
expect_eq "--dry-run exit code" 0 $?
expect_contains "--dry-run command" "-np 3 -H localhost:3 -bind-to none -map-by slot --tag-output" "$out"
expect_contains "--dry-run environment" "hvdrun: environment added: HOROVOD_CYCLE_TIME=2" "$out"
if grep -q RANKINFO "$out"; then fail "--dry-run ran the program"; fi
if [ "$(id -u)" = 0 ]; then expect_contains "root gets --allow-run-as-root" "mpirun --allow-run-as-root -np 3" "$out"; fi

# --network-interfaces with interface names reaches every rank as NCCL_SOCKET_IFNAME too.
out=$TMP/nif
run_hvdrun -np 2 --network-interfaces lo "$RANK_PROGRAM" info nif >"$out" 2>&1
expect_eq "--network-interfaces lo: exit code" 0 $?
for r in 0 1; do
  expect_contains "--network-interfaces lo: rank $r has NCCL_SOCKET_IFNAME=lo" "nccl_if=lo " <(grep "RANKINFO tag=nif rank=$r " "$out")
done

# Inside Slurm (SLURM_JOB_ID set) hvdrun uses srun and says so; -np defaults to SLURM_NTASKS.
out=$TMP/slurm
SLURM_JOB_ID=991 run_hvdrun -np 6 --dry-run "$RANK_PROGRAM" info >"$out" 2>&1
expect_eq "Slurm --dry-run exit code" 0 $?
expect_contains "Slurm: says srun" "inside a Slurm allocation (SLURM_JOB_ID=991): running srun instead of mpirun" "$out"
expect_contains "Slurm: srun command" "hvdrun: command: srun --ntasks=6 --kill-on-bad-exit=1 --quit-on-interrupt --label --cpu-bind=none $RANK_PROGRAM info" "$out"
out=$TMP/slurm_ntasks
SLURM_JOB_ID=992 SLURM_NTASKS=5 run_hvdrun --dry-run "$RANK_PROGRAM" info >"$out" 2>&1
expect_eq "Slurm without -np: exit code" 0 $?
expect_contains "Slurm without -np: says where -np came from" "running srun instead of mpirun, -np 5 from SLURM_NTASKS" "$out"
expect_contains "Slurm without -np: srun command" "hvdrun: command: srun --ntasks=5 " "$out"
finish
