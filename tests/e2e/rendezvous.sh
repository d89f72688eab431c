#!/usr/bin/env bash
# Sites launched apart (topology.join = "rendezvous"), each its own mpirun,
# joined through a real ompi-server: three sites (one of two ranks) train
# with identical global params; kill -9 of one site mid-round, the two
# others go on within sync.timeout_s + 5 s and keep learning; the killed
# site, launched again with --resume auto, rejoins (three sites again); a
# SIGSTOP'd leader is dropped the same way and, woken, stops as a minority. A site with another model is refused (exit 2); a launch
# without the server is told how to start one (exit 2).
source "$(dirname "$0")/lib.sh"
cd "$WORK"
start_ompi_server "rendezvous.run_id=e2e-$$"
TIMEOUT_S=${RENDEZVOUS_TIMEOUT_S:-5}  # bench/recovery.sh varies it
{ small_model_toml; printf '[outer]\nrounds = 50\n[sync]\nH = 20\ntimeout_s = %s\n' $TIMEOUT_S
  printf '[topology]\njoin = "rendezvous"\nsites = 3\n[checkpoint]\nevery = 2\n[metrics]\neval_every = 1\n'
  printf '[rendezvous]\njoin_timeout_s = 60\nrun_id = "e2e-%s"\n[compression]\ncodec = "int8"\n' $$; } > r.toml
sed -e "s|\[data\]|[data]\npaths = [\"/usr/share/games/fortunes\"]|" r.toml > recipe.toml
site() {  # site INDEX RANKS [ARGS...]: launches site INDEX in the background
  local i=$1 n=$2; shift 2
  ( timeout 240 "$MPIRUN" --ompi-server "file:$WORK/uri" -np "$n" --oversubscribe --bind-to none \
      "$DILOCO_BIN" train recipe.toml --set rendezvous.site="$i" --set run.out_dir="$WORK/s$i" \
      --set rendezvous.run_id="e2e-$$" "$@" >>"$WORK/site$i.log" 2>&1
    echo "exit $?" >>"$WORK/site$i.log" ) &
}
row() {  # row SITE N FIELD: FIELD of the N-th metrics row (1-based; -1 the last)
  python3 -c 'import json,sys; rows=[json.loads(l) for l in open(sys.argv[1])]; print(json.dumps(rows[int(sys.argv[2]) - (1 if int(sys.argv[2]) > 0 else 0)][sys.argv[3]]))' \
    "$WORK/s$1/metrics.jsonl" "$2" "$3" 2>/dev/null
}

site 0 2; s0=$!; site 1 1; s1=$!; site 2 1
wait_rows "$WORK/s2/metrics.jsonl" 3 || fail "three sites did not train (site 2 has no round 3)"
# Sites 1 and 2 (one rank each) evaluate the same params bit for bit; site 0
# splits its evaluation over two ranks, so its sum is ordered differently.
same() { python3 -c 'import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); sys.exit(abs(a-b) > 1e-6*abs(a))' "$1" "$2"; }
# One python for all of it: the group trains on while this checks, and the
# kill, the rejoin and the SIGSTOP below need rounds left of its 50.
why=$(python3 - "$WORK" 2>&1 <<'PY'
import json, sys
rows = [[json.loads(l) for l in open(f"{sys.argv[1]}/s{i}/metrics.jsonl")] for i in range(3)]
for r in range(3):
    e0, e1, e2 = (rows[i][r]["eval_loss"] for i in range(3))
    if not (e1 == e2 and abs(e0 - e1) <= 1e-6 * abs(e0)):
        print(f"round {r + 1}: the sites evaluated different global params ({e0} {e1} {e2})")
if rows[0][0]["members"] != 3:
    print(f"round 1 had {rows[0][0]['members']} members")
PY
)
[[ -z $why ]] && pass "three sites joined and trained the same global params" || fail "$why"
before=$(rows "$WORK/s0/metrics.jsonl")
pkill -9 -f "rendezvous.site=2 .*rendezvous.run_id=e2e-$$"
killed=$(date +%s.%N)
for _ in $(seq 400); do grep -q '"left":\["site-2"\]' "$WORK/s0/metrics.jsonl" && break; sleep 0.05; done
back=$(date +%s.%N)
took=$(echo "$back - $killed" | bc)
if grep -q '"left":\["site-2"\]' "$WORK/s0/metrics.jsonl"; then
  if (( $(echo "$took < $TIMEOUT_S + 5" | bc) )); then pass "kill -9 of site 2: the others completed a round ${took} s later"
  else fail "the others took ${took} s to go on (sync.timeout_s = $TIMEOUT_S)"; fi
else
  fail "the others recorded no loss of site 2"
fi
relaunched=$(date +%s.%N)
last_round=$(row 0 -1 round)
site 2 1 --resume auto
# Its first round completed after the relaunch: a row past the group's last
# round when it was launched (it was dead until then).
first_new() { python3 -c 'import json,sys; sys.exit(not any(json.loads(l)["round"] > int(sys.argv[2]) for l in open(sys.argv[1])))' \
  "$WORK/s2/metrics.jsonl" "$last_round" 2>/dev/null; }
for _ in $(seq 600); do first_new && break; sleep 0.05; done
if grep -q '"joined":\["site-2"\]' "$WORK/s0/metrics.jsonl" && first_new; then
  pass "site 2 launched again rejoined: its first round completed $(echo "$(date +%s.%N) - $relaunched" | bc) s after the relaunch"
else
  fail "site 2 launched again did not rejoin"
fi
# Admitted within two rounds of its knock (admissions run at every round
# boundary): the wait from knock to admission against the group's rounds.
python3 - "$WORK/s0/metrics.jsonl" <<'PY' && pass "admitted within two rounds of its knock" || fail "the admission waited longer than two rounds"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
i = next(k for k, r in enumerate(rows) if any(c["joined"] == ["site-2"] for c in r.get("membership", [])))
waited = next(c["seconds"] for c in rows[i]["membership"] if c["joined"] == ["site-2"])
rounds = rows[i]["wall_s"] - rows[i - 2]["wall_s"]
print(f"knock to admission {waited:.2f} s; the last two rounds took {rounds:.2f} s")
assert waited <= rounds, (waited, rounds)
PY
[[ $(row 0 -1 members) == 3 ]] && pass "three sites again after the rejoin" || fail "$(row 0 -1 members) members after the rejoin"
# What the rejoined site read of its state when it took the group's: the
# error-feedback residual its checkpoint held (int8 keeps one), none after
# (docs/membership.md); its outer state is the group's, or the params hash
# compared every round (sync.check_every = 1) would stop the run (exit 3).
python3 - "$WORK/s2/metrics.jsonl" "$last_round" <<'PY' && pass "the rejoined site cleared its residual when it took the group's state" \
  || fail "the rejoined site's residual"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
first = next(r for r in rows if r["round"] > int(sys.argv[2]))
took = first.get("took_state")
print("its first row after the relaunch:", first["round"], took)
assert took and took["round"] == first["round"] - 1 and took["round"] >= int(sys.argv[2]), took
assert took["residual_before"] > 0 and took["residual_rms_before"] > 0 and took["residual_after"] == 0, took
assert all("took_state" not in r for r in rows if r["round"] != first["round"]), "took_state beyond the first round"
PY

# SIGSTOP of site 1's leader counts as a loss; woken after the others went
# on, it finds itself expelled: it stops as a minority (exit 4), with a
# checkpoint, and corrupts nothing.
pid1=$(pgrep -f "^$DILOCO_BIN train .*rendezvous.site=1 .*rendezvous.run_id=e2e-$$\$" | head -1)
kill -STOP "$pid1"
stopped=$(date +%s.%N)
for _ in $(seq 400); do grep -q '"left":\["site-1"\]' "$WORK/s0/metrics.jsonl" && break; sleep 0.05; done
took=$(echo "$(date +%s.%N) - $stopped" | bc)
grep -q '"left":\["site-1"\]' "$WORK/s0/metrics.jsonl" && (( $(echo "$took < $TIMEOUT_S + 5" | bc) )) \
  && pass "SIGSTOP of site 1: the others completed a round ${took} s later" || fail "SIGSTOP: the others did not go on (${took} s)"
kill -CONT "$pid1"
wait $s0 $s1
sleep 1
for i in 0 2; do grep -q "^exit 0" "$WORK/site$i.log" || fail "site $i did not finish: $(grep -v '^ \|^--\|^$' "$WORK/site$i.log" | tail -5)"; done
grep -q "^exit 4" "$WORK/site1.log" && grep -q "not a strict majority" "$WORK/site1.log" && grep -q "checkpoint of round" "$WORK/site1.log" \
  && pass "woken, site 1 stopped as a minority (exit 4) with a checkpoint" || fail "woken site 1: $(grep -v '^ \|^--\|^$' "$WORK/site1.log" | tail -3)"
[[ $(row 0 -1 members) == 2 && $(row 2 -1 members) == 2 ]] && pass "the run ended with sites 0 and 2" \
  || fail "the run ended with $(row 0 -1 members) members"
first=$(row 0 $before train_loss); last=$(row 0 -1 train_loss)
(( $(echo "$last < $first" | bc) )) && pass "the loss kept falling ($first at the loss, $last at the end)" || fail "loss $first -> $last"
same "$(row 0 -1 eval_loss)" "$(row 2 -1 eval_loss)" && pass "the rejoined site ends on the same global params" \
  || fail "the rejoined site ends elsewhere: $(row 0 -1 eval_loss) vs $(row 2 -1 eval_loss)"

# Another model is refused at the door (site 0 founds a fresh run first).
site 0 1 --set rendezvous.run_id="e2e-$$-model" --set run.out_dir="$WORK/m0" --set topology.sites=2 --set outer.rounds=40
sleep 2
expect_exit 2 "differs from the group's" "a site with another model is refused" -- \
  timeout 120 "$MPIRUN" --ompi-server "file:$WORK/uri" -np 1 "$DILOCO_BIN" train recipe.toml --set topology.sites=2 \
  --set rendezvous.site=1 --set rendezvous.run_id="e2e-$$-model" --set model.d_model=32 --set run.out_dir="$WORK/m1"
pkill -9 -f "rendezvous.run_id=e2e-$$-model" 2>/dev/null
expect_exit 2 "--ompi-server" "a launch without the rendezvous server is told how" -- \
  mpi 1 "$DILOCO_BIN" train recipe.toml --set rendezvous.site=0 --set run.out_dir="$WORK/n0"
exit $(( failures > 0 ))
