# horovod.run across two hosts: two network namespaces joined by a veth pair, each with its own
# host name, reached through a plm_rsh_agent wrapper as in tests/launcher/netns.sh. The caller
# runs on the first. Results (3 MB each) and a failure come back from the second host through
# mpirun alone; a function too large for the environment travels as a file of the caller's host,
# which the second host (a private mount over the caller's TMPDIR) cannot see: its ranks say so.
# Needs root, `ip netns` and `unshare`; otherwise exits 77 (ctest SKIP).
#   netns_run.sh PYTHON PYTHONPATH
PYTHON=$1
export PYTHONPATH=$2
source "$(dirname "$0")/../launcher/common.sh"
source "$(dirname "$0")/../common/netns_hosts.sh"
CALLER="$(cd "$(dirname "$0")" && pwd)/two_hosts_caller.py"

require_netns

NS_A=hrunA-$$ NS_B=hrunB-$$ IP_A=10.213.0.1 IP_B=10.213.0.2
cleanup() {
  unlink_namespaces "$NS_A" "$NS_B" "hra$$"
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
if ! link_namespaces "$NS_A" "$NS_B" "hra$$" "hrb$$" $IP_A $IP_B 2>"$TMP/setup_err"; then
  echo "SKIP: cannot build the namespaces here: $(cat "$TMP/setup_err")"; exit 77
fi

# The caller's temporary folder: on host B an empty tmpfs hides it, as another machine's disk would.
export TMPDIR=$TMP/caller_tmp OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$TMPDIR"
cat >"$TMP/agent.sh" <<AGENT
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
case "\$1" in
  $IP_A) ns=$NS_A name=hvdA hide=true ;;
  $IP_B) ns=$NS_B name=hvdB hide="mount -t tmpfs none $TMPDIR" ;;
  *) echo "agent: unknown host \$1" >&2; exit 255 ;;
esac
shift
exec ip netns exec "\$ns" unshare --uts --mount sh -c "\$hide && hostname \$name && \$*"
AGENT
chmod +x "$TMP/agent.sh"
on_host_a() { limited ip netns exec "$NS_A" unshare --uts sh -c 'hostname hvdA && exec "$@"' sh "$@"; }

on_host_a "$PYTHON" "$CALLER" "$TMP/agent.sh" results "$IP_A:2,$IP_B:2" >"$TMP/results" 2>&1
expect_eq "results from both hosts: exit code" 0 $?
expect_contains "every rank's result, by rank, from its host (1+2+3+4 = 10; 3 MB each, intact)" \
  "RESULTS [(0, 'hvdA', 0, 10.0, True), (1, 'hvdA', 0, 10.0, True), (2, 'hvdB', 1, 10.0, True), (3, 'hvdB', 1, 10.0, True)]" "$TMP/results"

on_host_a "$PYTHON" "$CALLER" "$TMP/agent.sh" missing_file "$IP_A:2,$IP_B:2" >"$TMP/missing" 2>&1
expect_eq "a function in a file host B cannot see: exit code" 0 $?
if grep -qE "^ERROR horovod.run: rank [23] raised RuntimeError: cannot read the function from $TMPDIR/horovod-run-[^/]*/payload \(No such file or directory\): .* every host must see at the same path" "$TMP/missing"; then
  pass "a rank of host B names the file it cannot read"
else
  fail "no rank of host B named the missing file:"; sed 's/^/    /' "$TMP/missing"
fi
[ -z "$(ls -A "$TMPDIR")" ] && pass "the caller removed its payload file" || fail "left in TMPDIR: $(ls -A "$TMPDIR")"
finish
