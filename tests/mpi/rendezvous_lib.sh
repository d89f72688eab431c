# Shared by the membership's multi-process scripts (tests/mpi/*.sh,
# bench/faults.sh), sourced after they set SITES_PATTERN, an extended regex
# of the command lines of their own processes: a scratch folder ($work),
# one ompi-server for the sites (its URI in $work/uri), a cleanup that ends
# that server and this script's processes only (so scripts can run side by
# side), and wait_for.
work=$(mktemp -d)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null
  pkill -9 -f "$SITES_PATTERN" 2>/dev/null
  if [[ -n ${KEEP_WORK:-} ]]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
ompi-server --no-daemonize -r "$work/uri" &
server_pid=$!
for _ in $(seq 50); do [[ -s $work/uri ]] && break; sleep 0.1; done
[[ -s $work/uri ]] || { echo "FAIL: ompi-server wrote no URI" >&2; exit 1; }

wait_for() {  # wait_for FILE PATTERN SECONDS [FROM_LINE]: PATTERN in FILE (from that line) within SECONDS
  for _ in $(seq $(($3 * 10))); do tail -n "+${4:-1}" "$1" 2>/dev/null | grep -q "$2" && return 0; sleep 0.1; done
  return 1
}
