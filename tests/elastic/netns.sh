# Multi-host: two network-namespace hosts (hvdA, hvdB; as in tests/launcher/netns.sh) run the job
# at np 4, two ranks each. After some commits host B's whole namespace is torn down (every
# process in it killed, the namespace and its link deleted). mpirun loses B's daemon; hvdrun
# leaves B out and relaunches on A alone (np 2, --min-np 2), which resumes from the newest commit
# and finishes. The namespaces share one file system, so here both hosts' commit stores are one
# directory. Needs root, `ip netns` and `unshare`; otherwise exits 77 (ctest SKIP).
HVDRUN=$1 TRAIN=$2
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/../common/netns_hosts.sh"
HVD_CMD_LIMIT=200

require_netns

NS_A=hvdeA-$$ NS_B=hvdeB-$$
IP_A=10.214.0.1 IP_B=10.214.0.2 SUBNET=10.214.0.0/24
kill_namespace() { local p; for p in $(ip netns pids "$1" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done; }
cleanup() {
  kill_namespace "$NS_A"
  kill_namespace "$NS_B"
  unlink_namespaces "$NS_A" "$NS_B" "hea$$"
  ip link del "hec$$" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

setup() {
  link_namespaces "$NS_A" "$NS_B" "hea$$" "heb$$" $IP_A $IP_B &&
    # A keeps an address in the subnet once B (and with it the veth pair) is gone.
    ip link add "hec$$" type veth peer name "hed$$" &&
    ip link set "hec$$" netns "$NS_A" && ip link set "hed$$" netns "$NS_A" &&
    ip -n "$NS_A" addr add 10.214.0.11/24 dev "hec$$" &&
    ip -n "$NS_A" link set "hec$$" up && ip -n "$NS_A" link set "hed$$" up
}
if ! setup 2>"$TMP/setup_err"; then
  echo "SKIP: cannot build the namespaces here: $(cat "$TMP/setup_err")"; exit 77
fi

# Hosts are named by their host names; the agent maps a name to its namespace (no DNS needed:
# MPI's own traffic uses the addresses of --network-interfaces).
cat >"$TMP/agent.sh" <<AGENT
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
case "\$1" in
  hvdA) ns=$NS_A ;;
  hvdB) ns=$NS_B ;;
  *) echo "agent: unknown host \$1" >&2; exit 255 ;;
esac
name=\$1
shift
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$name && \$*"
AGENT
chmod +x "$TMP/agent.sh"
set_hosts "$(printf 'hvdA:2\nhvdB:2')"

out=$TMP/out err=$TMP/err
limited ip netns exec "$NS_A" unshare --uts sh -c 'hostname hvdA && exec "$@"' sh \
  "$HVDRUN" -np 2 --max-np 4 --host-discovery-script "$DISCOVER" --network-interfaces $SUBNET \
  --mpi-args "--mca btl tcp,self --mca plm_rsh_agent $TMP/agent.sh" \
  "$TRAIN" 3 96 4 2 250 >"$out" 2>"$err" &
job=$!
wait_for_line "$out" "COMMIT launch=[0-9]+ id=3 " 150
kill_time=$(date +%s.%N)
kill_namespace "$NS_B"
ip netns del "$NS_B"
set_hosts "hvdA:2"
echo "tore down host B ($NS_B) at $kill_time"
wait_at_most $job 200
expect_eq "hvdrun exit code" 0 $?
grep "^hvdrun" "$err"
expect_contains "first launch on both hosts" "elastic: launch 1 (first launch): np 4 on hvdA:2,hvdB:2" "$err"
# Open MPI reports either the lost daemon of B, or only that daemons failed (then B's absence
# from discovery names it).
if grep -qE "mpirun lost the daemon of host\(s\) hvdB \(2 slot\(s\) left out for good\)|the launch failed and discovery no longer offers host\(s\) hvdB" "$err"; then
  pass "host B's loss is named"
else
  fail "host B's loss is not named"
fi
expect_contains "relaunch on A alone" "elastic: launch 2 (" "$err"
expect_contains "relaunch np" "np 2 on hvdA:2" "$err"
expect_contains "the relaunch logs its commit" "elastic: launch 2 resumed from commit" "$err"
$CHECK_RUN "$out" 3 96 --launches 2 --sizes 4,2 --kill-time "$kill_time" | tee "$TMP/check"
expect_eq "cross-launch checks" 0 "${PIPESTATUS[0]}"
if [ "$FAILURES" -ne 0 ]; then
  echo "--- stderr"; grep -v "<stdout>" "$err" | tail -40
  mkdir -p /tmp/hvd-elastic-netns-last && cp "$out" "$err" /tmp/hvd-elastic-netns-last/
fi
finish
