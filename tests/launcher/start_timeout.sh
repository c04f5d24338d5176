# --start-timeout: a host whose agent never answers fails the launch within the timeout, naming
# the host, and the agent is ended; an answering agent lets the launch go on.
HVDRUN=$1 RANK_PROGRAM=$2
source "$(dirname "$0")/common.sh"

cp "$(command -v sleep)" "$TMP/hvd_hung_agent_$$"
printf '#!/bin/sh\nexec %s 600\n' "$TMP/hvd_hung_agent_$$" >"$TMP/hung_agent.sh"
chmod +x "$TMP/hung_agent.sh"
start=$SECONDS
# 192.0.2.0/24 is TEST-NET-1: never this machine, and the agent never contacts it anyway.
run_hvdrun -np 1 -H 192.0.2.10:1 --start-timeout 2 --mpi-args "-mca plm_rsh_agent $TMP/hung_agent.sh" \
  "$RANK_PROGRAM" info >"$TMP/out" 2>&1
expect_eq "hung host: exit code" 2 $?
took=$((SECONDS - start))
[ $took -le 5 ] && pass "hung host: gave up in $took s" || fail "hung host: took $took s"
expect_contains "hung host: names the host" "--start-timeout: cannot reach 192.0.2.10 (no answer in 2 s)" "$TMP/out"
wait_gone "hvd_hung_agent_$$" 2 && pass "hung host: agent ended" || fail "hung host: agent left running"

printf '#!/bin/sh\nexit 255\n' >"$TMP/refusing_agent.sh"
chmod +x "$TMP/refusing_agent.sh"
run_hvdrun -np 1 -H 192.0.2.11:1 --start-timeout 5 --mpi-args "-mca plm_rsh_agent $TMP/refusing_agent.sh" \
  "$RANK_PROGRAM" info >"$TMP/out" 2>&1
expect_eq "refusing host: exit code" 2 $?
expect_contains "refusing host: names the host" "cannot reach 192.0.2.11 (the check failed)" "$TMP/out"

# Local hosts are not checked: mpirun starts those ranks itself.
run_hvdrun -np 2 -H localhost:2 --start-timeout 5 "$RANK_PROGRAM" info st >"$TMP/out" 2>&1
expect_eq "localhost with --start-timeout: exit code" 0 $?
expect_eq "localhost with --start-timeout: ranks ran" 2 "$(grep -c 'RANKINFO tag=st' "$TMP/out")"
finish
