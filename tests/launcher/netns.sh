# Many hosts on one machine: two network namespaces joined by a veth pair act as two hosts
# (10.213.0.1 and 10.213.0.2, addresses that exist only inside them). hvdrun runs in the first;
# Open MPI reaches the second through a plm_rsh_agent wrapper that enters its namespace, over
# TCP only. Checks local/cross ranks per host, an 8 MiB allreduce whose bytes must cross the link,
# and that --hierarchical-allreduce really takes the hierarchical path (the timeline names it).
# Each host also gets its own UTS namespace and host name (hvdA, hvdB), as real hosts have: with
# one shared host name, Open MPI 4.1.4 crashes (SIGSEGV in ob1) in MPI_Comm_split_type(SHARED).
# Needs root, `ip netns` and `unshare`; otherwise exits 77 (ctest SKIP).
HVDRUN=$1 RANK_PROGRAM=$2
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/../common/netns_hosts.sh"

require_netns

NS_A=hvdA-$$ NS_B=hvdB-$$
IP_A=10.213.0.1 IP_B=10.213.0.2 SUBNET=10.213.0.0/24
cleanup() {
  unlink_namespaces "$NS_A" "$NS_B" "hva$$"
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

if ! link_namespaces "$NS_A" "$NS_B" "hva$$" "hvb$$" $IP_A $IP_B 2>"$TMP/setup_err"; then
  echo "SKIP: cannot build the namespaces here: $(cat "$TMP/setup_err")"; exit 77
fi

# Runs a command on host A (its network namespace, its own host name) under a time limit, so a
# hang fails its check and the EXIT trap still removes the namespaces.
on_host_a() { limited ip netns exec "$NS_A" unshare --uts sh -c 'hostname hvdA && exec "$@"' sh "$@"; }

# Open MPI runs AGENT [args] HOST COMMAND...; the wrapper runs COMMAND in HOST's namespace.
cat >"$TMP/netns_agent.sh" <<AGENT
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
case "\$1" in
  $IP_A) ns=$NS_A name=hvdA ;;
  $IP_B) ns=$NS_B name=hvdB ;;
  *) echo "netns_agent: unknown host \$1" >&2; exit 255 ;;
esac
shift
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$name && \$*"
AGENT
chmod +x "$TMP/netns_agent.sh"

NETNS_A=$(ip netns exec "$NS_A" readlink /proc/self/ns/net)
NETNS_B=$(ip netns exec "$NS_B" readlink /proc/self/ns/net)
rx_bytes() { ip netns exec "$NS_B" cat "/sys/class/net/hvb$$/statistics/rx_bytes"; }

ELEMENTS=1048576              # float64: an 8 MiB tensor
TENSOR_BYTES=$((ELEMENTS * 8))

run_job() {  # tag, extra hvdrun flags...; every job writes a timeline to $TMP/TAG.json
  local tag=$1
  shift
  on_host_a "$HVDRUN" -H $IP_A:2,$IP_B:2 --network-interfaces $SUBNET --start-timeout 20 \
    --mpi-args "--mca btl tcp,self --mca plm_rsh_agent $TMP/netns_agent.sh" \
    --timeline-filename "$TMP/$tag.json" "$@" "$RANK_PROGRAM" info "$tag" $ELEMENTS >"$TMP/$tag" 2>&1
}

before=$(rx_bytes)
run_job two-hosts --verbose
expect_eq "hvdrun -H $IP_A:2,$IP_B:2: exit code" 0 $?
after=$(rx_bytes)
expect_eq "four ranks reported" 4 "$(grep -c 'RANKINFO tag=two-hosts' "$TMP/two-hosts")"
for r in 0 1 2 3; do
  host=$((r / 2))
  netns=$([ $host = 0 ] && echo "$NETNS_A host=hvdA" || echo "$NETNS_B host=hvdB")
  expect_contains "rank $r: local_rank $((r % 2)) of 2, cross_rank $host of 2, on host $host" \
    "RANKINFO tag=two-hosts rank=$r size=4 local_rank=$((r % 2)) local_size=2 cross_rank=$host cross_size=2 netns=$netns " "$TMP/two-hosts"
  # 1 + 2 + 3 + 4: ranks 2 and 3 only reach ranks 0 and 1 through the veth link.
  # Anchored on the tag: "rank=$r " alone also matches local_rank=/cross_rank=.
  expect_contains "rank $r: 8 MiB allreduce across both hosts" "elements=$ELEMENTS allreduce=ok element1=10" <(grep "RANKINFO tag=two-hosts rank=$r " "$TMP/two-hosts")
done
[ "$NETNS_A" != "$NETNS_B" ] && pass "the two hosts are different namespaces" || fail "same namespace"
# Host B's ranks need host A's contribution: at least the tensor's size must enter B (wire-up
# alone is a few KB).
received=$((after - before))
[ $received -gt $TENSOR_BYTES ] && pass "the link carried $received bytes into $NS_B (tensor: $TENSOR_BYTES)" ||
  fail "the link carried only $received bytes into $NS_B, less than the $TENSOR_BYTES-byte tensor"
expect_contains "plain run: the timeline shows MPI_ALLREDUCE" '"MPI_ALLREDUCE"' "$TMP/two-hosts.json"
if grep -q HIERARCHICAL "$TMP/two-hosts.json"; then fail "plain run: took the hierarchical path"; fi

run_job hierarchical --hierarchical-allreduce
expect_eq "--hierarchical-allreduce on two hosts: exit code" 0 $?
expect_eq "--hierarchical-allreduce: every rank's sum is right" 4 "$(grep -c "elements=$ELEMENTS allreduce=ok element1=10" "$TMP/hierarchical")"
# The path taken, from rank 0's timeline: the hierarchical op names its phase so.
expect_contains "--hierarchical-allreduce: the timeline shows MPI_HIERARCHICAL_ALLREDUCE" '"MPI_HIERARCHICAL_ALLREDUCE"' "$TMP/hierarchical.json"
if grep -q '"MPI_ALLREDUCE"' "$TMP/hierarchical.json"; then fail "--hierarchical-allreduce: the flat MPI_ALLREDUCE ran"; fi

# A rank failing on the second host: its code and its rank come back through the link.
on_host_a "$HVDRUN" -H $IP_A:2,$IP_B:2 --network-interfaces $SUBNET \
  --mpi-args "--mca btl tcp,self --mca plm_rsh_agent $TMP/netns_agent.sh" \
  "$RANK_PROGRAM" exit 3 6 >"$TMP/remote_fail" 2>&1
expect_eq "rank 3 on $NS_B exits 6: hvdrun exit code" 6 $?
expect_contains "the message names rank 3" "hvdrun: rank 3 exited with code 6" "$TMP/remote_fail"
wait_gone "$RANK_PROGRAM exit 3 6" 5 && pass "no rank left on either host" || fail "ranks left behind"

if [ "$FAILURES" -ne 0 ]; then for f in "$TMP"/two-hosts "$TMP"/hierarchical; do echo "--- $f"; cat "$f"; done; fi
finish
