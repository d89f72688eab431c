#!/usr/bin/env bash
# Membership between separately launched mpirun jobs through a real
# ompi-server: three sites join and agree every round; kill -9 of one, the
# two others go on (a strict majority) and the killed site, launched again,
# is admitted; a frozen site (SIGSTOP) is dropped the same way and, woken,
# finds itself expelled (exit 4); with two sites a loss leaves no majority
# (exit 4); a site with another model is refused (exit 2).
#   run_membership.sh MPIRUN SITE_PROGRAM
set -uo pipefail
MPIRUN=$1
SITE=$2
work=$(mktemp -d)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null || true
  pkill -9 -f "^$SITE " 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ompi-server --no-daemonize -r "$work/uri" &
server_pid=$!
for _ in $(seq 50); do [[ -s $work/uri ]] && break; sleep 0.1; done
[[ -s $work/uri ]] || { echo "FAIL: ompi-server wrote no URI"; exit 1; }

fail() { echo "FAIL: $*"; for f in "$work"/*.log; do echo "== $f"; grep -v '^ \|^--\|^$' "$f" | head -40; done; exit 1; }

# site RUN INDEX EXPECTED ROUNDS [SIGNATURE]: one site in the background,
# deadline 3 s, rounds of 0.3 s; its log is $work/RUN-INDEX[-n].log.
site() {
  local log=$work/$1-$2.log
  [[ -e $log ]] && log=$work/$1-$2-again.log
  ( timeout 120 "$MPIRUN" --ompi-server "file:$work/uri" -np 1 "$SITE" "$1" "$2" "$3" "$4" 0.3 3 ${5:-} >"$log" 2>&1
    echo "exit $?" >>"$log" ) &
  sites+=($!)
}
sites=()
wait_sites() { wait "${sites[@]}"; sites=(); }
pid_of() { pgrep -f "^$SITE $1 $2 " | head -1; }
wait_for() {  # wait_for FILE PATTERN SECONDS
  for _ in $(seq $(( $3 * 10 ))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}

# 1. Three sites; site 2 killed at round 5, launched again; all finish.
site kill 0 3 40; site kill 1 3 40; site kill 2 3 40
wait_for "$work/kill-2.log" "round 5 " 30 || fail "three sites did not train together"
kill -9 "$(pid_of kill 2)"
killed_at=$(date +%s.%N)
wait_for "$work/kill-0.log" "sites 2 sum 3" 15 || fail "the survivors did not go on after kill -9"
recovered=$(echo "$(date +%s.%N) - $killed_at" | bc)
site kill 2 3 40
wait_for "$work/kill-2-again.log" "joined late" 30 || fail "the relaunched site was not admitted"
wait_sites
for i in 0 1; do
  grep -q "exit 0" "$work/kill-$i.log" || fail "site $i did not finish"
  grep -q "lost site-2 epoch" "$work/kill-$i.log" || fail "site $i recorded no loss"
  grep -q "round 40 epoch .* sites 3 sum 6" "$work/kill-$i.log" || fail "site $i did not end with three sites"
done
grep -q "exit 0" "$work/kill-2-again.log" || fail "the relaunched site did not finish"
if grep -h MISMATCH "$work"/kill-*.log; then fail "sites disagreed on the round"; fi
echo "kill -9: survivors training again after ${recovered} s (deadline 3 s); rejoined"

# 2. A frozen site is dropped like a dead one; woken, it is a minority of one.
site stop 0 3 40; site stop 1 3 40; site stop 2 3 40
wait_for "$work/stop-2.log" "round 5 " 30 || fail "three sites did not train together (stop)"
kill -STOP "$(pid_of stop 2)"
wait_for "$work/stop-0.log" "sites 2 sum 3" 15 || fail "the survivors did not go on after SIGSTOP"
kill -CONT "$(pid_of stop 2)"
wait_sites
grep -q "exit 0" "$work/stop-0.log" || fail "site 0 did not finish (stop)"
grep -q "minority" "$work/stop-2.log" || fail "the woken site did not find itself expelled"
grep -q "exit 4" "$work/stop-2.log" || fail "the woken site did not exit 4"
echo "SIGSTOP: dropped; woken, it stopped as a minority (exit 4)"

# 3. Two sites: losing one leaves no majority.
site pair 0 2 40; site pair 1 2 40
wait_for "$work/pair-1.log" "round 3 " 30 || fail "two sites did not train together"
kill -9 "$(pid_of pair 1)"
wait_sites
grep -q "minority" "$work/pair-0.log" || fail "the survivor of two went on without a majority"
grep -q "exit 4" "$work/pair-0.log" || fail "the survivor of two did not exit 4"
echo "two sites: the survivor stopped (no strict majority)"

# 4. Another model is refused at the door.
site model 0 2 3; sleep 1; site model 1 2 3 other-model
wait_sites
grep -q "refused by the group: its model" "$work/model-1.log" || fail "a site with another model was not refused"
grep -q "exit 2" "$work/model-1.log" || fail "the refused site did not exit 2"
echo "another model: refused at the door (exit 2)"
echo PASS
