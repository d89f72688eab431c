#!/usr/bin/env bash
# Attacks on a keyed run's rendezvous, through a real ompi-server:
# 1. a hijacking door name: an intruder publishes the plain name of a newer
#    door (anyone reaching the server can) and answers without the key; the
#    founder, which scans every name, is not fooled, and sites that come
#    later never even knock at it (keyed names, which only key holders can
#    compute, are tried first); all three train together.
# 2. a relayed handshake: an intruder that learned the port a newcomer's
#    door handed out connects to it first; it cannot prove the key on the
#    connection, so the group drops it (and records why), it is never
#    merged, the newcomer it displaced stops (exit 3), and the next newcomer
#    is admitted.
# 3. a keyed recovery (sealed alarms, views, roster): a site killed, the
#    others go on, the site launched again rejoins.
# 4. a dozen connections held silent at the door: a newcomer behind them is
#    admitted (the door runs handshakes side by side).
#   run_door_attacks.sh MPIRUN SITE_PROGRAM INTRUDER_PROGRAM
set -uo pipefail
MPIRUN=$1
SITE=$2
INTRUDER=$3
SITES_PATTERN="^($SITE (hij|rel|rec|sil)|$INTRUDER) "  # this test's processes only
source "$(dirname "$0")/rendezvous_lib.sh"
export MEMBERSHIP_KEY=0123456789abcdef-shared-by-the-sites

# Each case runs in a subshell of its own, side by side with the others;
# `fail` ends the case, showing its logs (named after its run, $CASE).
fail() {
  echo "FAIL: $*"
  for f in "$work/$CASE"*.log; do echo "== $f"; grep -v '^ \|^--\|^$' "$f" | head -40; done
  exit 1
}
pass() { echo "PASS: $*"; }
launch() {  # launch LOG PROGRAM ARGS...: in the background, its exit code appended to the log
  local log=$work/$1.log; shift
  ( timeout 120 "$MPIRUN" --ompi-server "file:$work/uri" -np 1 "$@" >"$log" 2>&1; echo "exit $?" >>"$log" ) &
  jobs_+=($!)
}
jobs_=()
# site LOG RUN INDEX ROUNDS: a keyed site that starts alone (expected 1),
# rounds of 0.3 s, deadline 5 s.
site() { launch "$1" "$SITE" "$2" "$3" 1 "$4" 0.3 5; }

# 1. The hijacking door name.
case_hij() {
  local CASE=hij jobs_=()
  launch hij-intruder "$INTRUDER" hijack hij 5 60
  wait_for "$work/hij-intruder.log" "published" 20 || fail "the intruder did not publish its door"
  site hij-0 hij 0 60
  wait_for "$work/hij-0.log" "round 1 " 30 || fail "the founder did not start"
  site hij-1 hij 1 60
  site hij-2 hij 2 60
  wait "${jobs_[@]:1}"
  for i in 0 1 2; do grep -q "^exit 0" "$work/hij-$i.log" || fail "site $i did not finish"; done
  for i in 1 2; do
    grep -q "joined late" "$work/hij-$i.log" || fail "site $i did not join the group"
    grep -q "site $i door 5 of run" "$work/hij-$i.log" && fail "site $i came in through the intruder's door"
  done
  grep -q "round 60 epoch .* sites 3" "$work/hij-0.log" || fail "the three sites did not train together"
  grep -q "hello from site-0" "$work/hij-intruder.log" || fail "the founder never saw the intruder's name (test is void)"
  grep -q "hello from site-[12]" "$work/hij-intruder.log" && fail "a joining site knocked at the intruder's door"
  pass "a hijacking door name fooled nobody: the founder refused it, later sites never knocked at it"
  kill "${jobs_[0]}" 2>/dev/null
}

# 2. The relayed handshake.
case_rel() {
  local CASE=rel jobs_=()
  site rel-0 rel 0 60
  wait_for "$work/rel-0.log" "round 1 " 30 || fail "the founder did not start"
  launch rel-intruder "$INTRUDER" relay "$work/rel-port" 20
  MEMBERSHIP_PORT_SPY=$work/rel-port site rel-1 rel 1 60
  wait_for "$work/rel-0.log" "refused site-1: the party on its MPI connection did not prove the key" 40 \
    || fail "the group did not drop the party that took the newcomer's port"
  site rel-2 rel 2 60
  wait "${jobs_[@]}"
  grep -q "intruder: connected to the port" "$work/rel-intruder.log" || fail "the intruder never connected (test is void)"
  grep -q "MERGED" "$work/rel-intruder.log" && fail "the intruder was merged into the group"
  grep -q "^exit 5" "$work/rel-intruder.log" || fail "the intruder did not end as documented"
  grep -q "^exit 3" "$work/rel-1.log" || fail "the displaced newcomer did not stop with exit 3"
  grep -q "joined late" "$work/rel-2.log" || fail "the next newcomer was not admitted"
  for i in 0 2; do grep -q "^exit 0" "$work/rel-$i.log" || fail "site $i did not finish"; done
  grep -q "round 60 epoch .* sites 2" "$work/rel-0.log" || fail "the group did not finish with its two sites"
  pass "a relayed handshake gained nothing: the party on the port was dropped, never merged; the next newcomer joined"
}

# 3. The control plane sealed: with the key, a recovery's alarms and views,
#    the roster and an admission all carry their HMAC; kill -9 of a site,
#    the two others agree and go on, the site launched again rejoins.
case_rec() {
  local CASE=rec jobs_=()
  launch rec-0 "$SITE" rec 0 3 60 0.3 5
  launch rec-1 "$SITE" rec 1 3 60 0.3 5
  launch rec-2 "$SITE" rec 2 3 60 0.3 5
  wait_for "$work/rec-1.log" "round 5 " 30 || fail "three keyed sites did not train together"
  kill -9 "$(pgrep -f "^$SITE rec 1 " | head -1)"
  wait_for "$work/rec-0.log" "sites 2 sum 4" 20 || fail "the keyed survivors did not agree and go on"
  launch rec-1-again "$SITE" rec 1 3 60 0.3 5
  wait "${jobs_[0]}" "${jobs_[2]}" "${jobs_[3]}"
  grep -q "joined late" "$work/rec-1-again.log" || fail "the relaunched keyed site was not admitted"
  for f in rec-0 rec-2 rec-1-again; do grep -q "^exit 0" "$work/$f.log" || fail "$f did not finish"; done
  grep -q "round 60 epoch .* sites 3" "$work/rec-0.log" || fail "the keyed group did not end with its three sites"
  pass "keyed recovery: sealed alarms and views agreed, the killed site rejoined"
}

# 4. Connections that say nothing: 12 held open at the door (3 s each, one
#    after another, would hold a door that took one handshake at a time for
#    36 s, past the group's 18 s); a newcomer knocking behind them is
#    admitted all the same.
case_sil() {
  local CASE=sil jobs_=()
  site sil-0 sil 0 60
  wait_for "$work/sil-0.log" "round 1 " 30 || fail "the founder did not start"
  launch sil-intruder "$INTRUDER" silent sil 12 25
  wait_for "$work/sil-intruder.log" "silent connections open" 20 || fail "the intruder could not open its connections"
  site sil-1 sil 1 60
  wait "${jobs_[0]}" "${jobs_[2]}"
  grep -q "joined late" "$work/sil-1.log" || fail "the newcomer behind the silent connections was not admitted"
  for i in 0 1; do grep -q "^exit 0" "$work/sil-$i.log" || fail "site $i did not finish"; done
  pass "12 silent connections at the door delayed nobody: the newcomer behind them was admitted"
}

for c in hij rel rec sil; do ( "case_$c" ) >"$work/$c.out" 2>&1 & done
failed=0
for job in $(jobs -p); do [[ $job == "$server_pid" ]] || wait "$job" || failed=1; done
cat "$work"/{hij,rel,rec,sil}.out
exit $failed
