#!/usr/bin/env bash
# A survivor behind the others after a recovery, forced: three sites
# launched apart; site 1's wait runs out just after an exchange completed
# there and before it applied it ([debug] fault_signal = "timeout" at
# "exchanged": the others completed and applied it; nobody is lost). The
# recovery keeps all three; site 1 alone is behind and takes what the
# design says (docs/membership.md): with streaming overlap the state of a
# site that applied the fragment, with data parallelism that step's
# average. Every site then trains to the end on the same global params (the
# params hash compared every round, sync.check_every = 1, would stop the
# run with exit 3), ends on the same eval loss, and exits 0.
source "$(dirname "$0")/lib.sh"
cd "$WORK"
start_ompi_server "rendezvous.run_id=behind-$$"
{ small_model_toml; printf '[outer]\nrounds = 6\n[sync]\nH = 24\ntimeout_s = 10\n'
  printf '[topology]\njoin = "rendezvous"\nsites = 3\n[metrics]\neval_every = 1\n[compression]\ncodec = "int8"\n'
  printf '[rendezvous]\njoin_timeout_s = 60\n'; } > r.toml
sed -e "s|\[data\]|[data]\npaths = [\"/usr/share/games/fortunes\"]|" r.toml > recipe.toml
site() {  # site MODE INDEX [ARGS...]: launches site INDEX of run MODE in the background
  local mode=$1 i=$2; shift 2
  ( timeout 200 "$MPIRUN" --ompi-server "file:$WORK/uri" -np 1 --bind-to none "$DILOCO_BIN" train recipe.toml \
      --set rendezvous.site="$i" --set run.out_dir="$WORK/$mode/s$i" --set rendezvous.run_id="behind-$$-$mode" \
      --set debug.fault_site=1 --set debug.fault_signal=timeout --set debug.fault_phase=exchanged \
      --set debug.fault_round=3 "$@" >"$WORK/$mode-site$i.log" 2>&1
    echo "exit $?" >>"$WORK/$mode-site$i.log" ) &
}
check() {  # check MODE: every site ended with exit 0, site 1 alone behind in round 3, one set of params
  local mode=$1
  for i in 0 1 2; do
    for _ in $(seq 1800); do tail -c 12 "$WORK/$mode-site$i.log" | grep -qE "exit [0-9]+$" && break; sleep 0.1; done
    tail -c 12 "$WORK/$mode-site$i.log" | grep -qE "exit 0$" \
      || { fail "$mode: site $i did not finish:"; grep -v '^ \|^--\|^$' "$WORK/$mode-site$i.log" | tail -5; }
  done
  grep -q "site 1 fault: timeout at exchanged of round 3" "$WORK/$mode-site1.log" || fail "$mode: the fault was not raised"
  python3 - "$WORK/$mode" <<'PY' && pass "$mode: site 1 behind took what the others applied; one set of params to the end" \
    || fail "$mode: the behind path"
import json, sys
rows = {i: [json.loads(l) for l in open(f"{sys.argv[1]}/s{i}/metrics.jsonl")] for i in range(3)}
for i in range(3):
    assert [r["round"] for r in rows[i]] == list(range(1, 7)), (i, [r["round"] for r in rows[i]])
    changes = [(r["round"], c) for r in rows[i] for c in r["membership"]]
    print(f"site {i}: {[(k, c['left'], c['behind'], c['why'][:60]) for k, c in changes]}")
    assert len(changes) == 1 and changes[0][0] == 3 and changes[0][1]["left"] == [], changes
    assert changes[0][1]["behind"] == (i == 1), changes
    assert all(r["members"] == 3 for r in rows[i]), [r["members"] for r in rows[i]]
# Streaming evaluates each site's local params (fragments mixed in at
# different steps) until the last round ends on the global ones; data
# parallelism keeps one model throughout.
for k in range(6) if sys.argv[1].endswith("data-parallel") else [5]:
    losses = {rows[i][k]["eval_loss"] for i in range(3)}
    assert len(losses) == 1, (k + 1, losses)
PY
}

for i in 0 1 2; do site streaming "$i" --set sync.overlap=streaming --set sync.fragments=2 --set sync.overlap_steps=6; done
check streaming
for i in 0 1 2; do site data-parallel "$i" --set sync.mode=data-parallel --set sync.H=8; done
check data-parallel
finish
