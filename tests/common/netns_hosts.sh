# Two hosts on one machine for the multi-host tests (tests/launcher/netns.sh, tests/elastic/netns.sh,
# tests/python_run/netns_run.sh): two network namespaces joined by a veth pair. Sourced.

# Exits 77 (ctest SKIP), saying why, where namespaces cannot be made: not root, no `ip netns`,
# no `unshare`.
require_netns() {
  if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root to create network namespaces"; exit 77; fi
  if ! command -v ip >/dev/null || ! ip netns list >/dev/null 2>&1; then
    echo "SKIP: 'ip netns' is not available (install iproute2)"; exit 77
  fi
  if ! command -v unshare >/dev/null; then echo "SKIP: 'unshare' is not available (util-linux)"; exit 77; fi
}

# link_namespaces NS_A NS_B VETH_A VETH_B IP_A IP_B: makes both namespaces and joins them with
# the veth pair VETH_A (in NS_A, address IP_A/24) - VETH_B (in NS_B, IP_B/24), every link up.
link_namespaces() {
  local ns_a=$1 ns_b=$2 veth_a=$3 veth_b=$4 ip_a=$5 ip_b=$6
  ip netns add "$ns_a" && ip netns add "$ns_b" &&
    ip link add "$veth_a" type veth peer name "$veth_b" &&
    ip link set "$veth_a" netns "$ns_a" && ip link set "$veth_b" netns "$ns_b" &&
    ip -n "$ns_a" addr add "$ip_a/24" dev "$veth_a" && ip -n "$ns_b" addr add "$ip_b/24" dev "$veth_b" &&
    ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up &&
    ip -n "$ns_a" link set "$veth_a" up && ip -n "$ns_b" link set "$veth_b" up
}

# unlink_namespaces NS_A NS_B VETH_A: removes what link_namespaces made, as far as it got (for an
# EXIT trap): deleting a namespace deletes its end of the veth pair; VETH_A is deleted only if
# the pair never moved into a namespace.
unlink_namespaces() {
  ip netns del "$1" 2>/dev/null
  ip netns del "$2" 2>/dev/null
  ip link del "$3" 2>/dev/null
  return 0
}
