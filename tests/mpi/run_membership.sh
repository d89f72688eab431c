#!/usr/bin/env bash
# Membership between separately launched mpirun jobs through a real
# ompi-server: three sites join and agree every round; kill -9 of one, the
# two others go on (a strict majority) and the killed site, launched again,
# is admitted; a frozen site (SIGSTOP) is dropped the same way and, woken,
# finds itself expelled (exit 4); with two sites a loss leaves no majority
# (exit 4); a site with another model is refused (exit 2); the door's keeper
# (site 0) frozen, woken as a minority and launched again rejoins through the
# next keeper's door; a newcomer killed while queued at the door stalls
# nobody, and the next one is admitted; a member whose steps outlast ping_s
# is not counted as lost by a recovery that starts during one.
#   run_membership.sh MPIRUN SITE_PROGRAM
set -uo pipefail
MPIRUN=$1
SITE=$2
SITES_PATTERN="^$SITE (busy|keeper|kill|model|pair|queue|stop) "  # this test's sites only
source "$(dirname "$0")/rendezvous_lib.sh"

fail() { echo "FAIL: $*"; for f in "$work"/*.log; do echo "== $f"; grep -v '^ \|^--\|^$' "$f" | head -40; done; exit 1; }

# site RUN INDEX EXPECTED ROUNDS [SIGNATURE]: one site in the background,
# deadline $DEADLINE_S (3 s), rounds of $ROUND_S (0.3 s); its log is
# $work/RUN-INDEX[-again[-again]].log.
ROUND_S=0.3
DEADLINE_S=3
site() {
  local log=$work/$1-$2.log
  while [[ -e $log ]]; do log=${log%.log}-again.log; done
  ( timeout 120 "$MPIRUN" --ompi-server "file:$work/uri" -np 1 "$SITE" "$1" "$2" "$3" "$4" $ROUND_S $DEADLINE_S ${5:-} >"$log" 2>&1
    echo "exit $?" >>"$log" ) &
  sites+=($!)
}
sites=()
wait_sites() { wait "${sites[@]}"; sites=(); }
pid_of() { pgrep -f "^$SITE $1 $2 " | head -1; }

# Scenarios 1-4 and 5-7 run side by side (their sites are distinct runs of
# light processes that mostly wait), each part in its own subshell.
part_a() {
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
}

part_b() {
# 5. The door's keeper (site 0) frozen: the others go on and the new rank 0
# opens door 1; woken, site 0 stops as a minority; launched again, it finds
# the live group (not the stale door 0, not a group of its own) and rejoins.
site keeper 0 3 70; site keeper 1 3 70; site keeper 2 3 70
wait_for "$work/keeper-2.log" "round 5 " 30 || fail "three sites did not train together (keeper)"
keeper=$(pid_of keeper 0)
kill -STOP "$keeper"
wait_for "$work/keeper-1.log" "sites 2 sum 5" 15 || fail "sites 1 and 2 did not go on without the frozen keeper"
kill -CONT "$keeper"
wait_for "$work/keeper-0.log" "exit 4" 30 || fail "the woken keeper did not stop as a minority (exit 4)"
site keeper 0 3 70
wait_for "$work/keeper-0-again.log" "joined late" 30 || fail "site 0 launched again did not rejoin"
grep -q "door 1 of run" "$work/keeper-0-again.log" || fail "site 0 did not come in through the new keeper's door"
wait_sites
for log in keeper-1 keeper-2 keeper-0-again; do grep -q "exit 0" "$work/$log.log" || fail "$log did not finish"; done
grep -q "round 70 epoch .* sites 3 sum 6" "$work/keeper-1.log" || fail "the run did not end with three sites (keeper)"
echo "keeper lost: the others opened door 1; site 0, woken, stopped (exit 4) and, launched again, rejoined there"

# 6. Rounds of 2 s: a newcomer killed while queued at the door stalls
# nobody (the door drops it); the next newcomer is admitted.
ROUND_S=2
site queue 0 3 14; site queue 1 3 14; site queue 2 3 14
wait_for "$work/queue-2.log" "round 2 " 30 || fail "three sites did not train together (queue)"
kill -9 "$(pid_of queue 2)"
wait_for "$work/queue-0.log" "sites 2 sum 3" 15 || fail "the survivors did not go on (queue)"
site queue 2 3 14
wait_for "$work/queue-2-again.log" "queued" 20 || fail "the newcomer was not queued at the door"
kill -9 "$(pid_of queue 2)"
site queue 2 3 14
wait_for "$work/queue-2-again-again.log" "joined late" 30 || fail "the next newcomer was not admitted"
wait_sites
for log in queue-0 queue-1 queue-2-again-again; do grep -q "exit 0" "$work/$log.log" || fail "$log did not finish"; done
grep -q "round 14 epoch .* sites 3 sum 6" "$work/queue-0.log" || fail "the run did not end with three sites (queue)"
echo "a newcomer killed while queued: nobody stalled; the next one was admitted"

# 7. Site 2's steps last 3 s (ping_s is 2 s); site 0 starts a recovery as
# round 3 begins, when site 2 is 3 s from its next chance to answer: the
# alarm waits for the longest step the members reported, so nobody is lost.
ROUND_S=6 DEADLINE_S=8
MEMBERSHIP_RECOVER_AT=3 site busy 0 3 5; site busy 1 3 5; MEMBERSHIP_STEP_S=3 site busy 2 3 5
wait_sites
for i in 0 1 2; do
  grep -q "exit 0" "$work/busy-$i.log" || fail "site $i did not finish (busy)"
  grep -q "round 5 epoch .* sites 3 sum 6" "$work/busy-$i.log" || fail "site $i did not end with three sites (busy)"
done
grep -q "site 0 lost epoch" "$work/busy-0.log" || fail "site 0 started no recovery (busy)"
echo "a member in a 3 s step (ping_s 2 s) answered the recovery's alarm and stayed in"
}

part_a >"$work/part-a.out" 2>&1 &
a=$!
part_b >"$work/part-b.out" 2>&1 &
b=$!
ra=0 rb=0
wait "$a" || ra=$?
wait "$b" || rb=$?
cat "$work/part-a.out" "$work/part-b.out"
((ra == 0 && rb == 0)) || { echo "FAIL: scenarios 1-4 exited $ra, 5-7 exited $rb"; exit 1; }
echo PASS
