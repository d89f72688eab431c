# scripts/netsim: 3 sites as network namespaces, each site's link shaped by tc
# tbf (40, 20 and 10 Mbit/s); a pair of sites moves data at the slower of
# their two links. `diloco probe` across it must measure every pair within
# 20% of that, and recipes/cross-dc-3site.toml must train across it (with its
# latencies added by diloco). Then 6 ranks as 3 sites of 2 whose sites the
# run finds from measured links, and sites launched apart (the probe too).
# Exits 77 (skipped) with the reason only when the
# machine cannot create namespaces or tc qdiscs.
source "$(dirname "$0")/../e2e/lib.sh"
check=$(scripts/netsim --check); rc=$?
if [[ $rc -eq 77 ]]; then echo "SKIP: $check"; exit 77; fi
[[ $rc -eq 0 ]] || { echo "FAIL: netsim --check exited $rc: $check"; exit 1; }

# within_shaping LINKS_JSON WHAT: every pair of links.json within 20% of its shaped bandwidth.
within_shaping() {
  python3 - "$1" <<'PY' && pass "$2: every pair within 20% of its shaped bandwidth" || fail "$2 against tc shaping"
import json, sys
shaped = [40.0, 20.0, 10.0]
links = json.load(open(sys.argv[1]))["links"]
assert len(links) == 3, links
for link in links:
    a, b = link["a"], link["b"]
    expected = min(shaped[a], shaped[b])
    got = link["bandwidth_mbps"]
    print(f"sites {a}-{b}: {got:.2f} Mbit/s measured, {expected} shaped ({100 * (got / expected - 1):+.1f}%)")
    assert abs(got / expected - 1) <= 0.2, (a, b, got, expected)
PY
}
timeout 300 scripts/netsim --sites 3 --mbps 40,20,10 --bin "$DILOCO_BIN" -- \
  probe recipes/cross-dc-3site.toml --out "$WORK/probe" > "$WORK/probe.log" 2>&1 \
  || { cat "$WORK/probe.log"; fail "probe across namespaces"; }
cat "$WORK/probe.log" | grep -v "^netsim: mpirun"
within_shaping "$WORK/probe/links.json" "probe"
# The same with the sites launched apart (each its own mpirun, joined
# through the rendezvous): every site writes the same matrix.
timeout 300 scripts/netsim --sites 3 --mbps 40,20,10 --bin "$DILOCO_BIN" --rendezvous "$WORK/rvprobe" -- \
  probe recipes/cross-dc-3site.toml --set rendezvous.run_id="netsim-probe-$$" > "$WORK/rvprobe.log" 2>&1 \
  || { cat "$WORK/rvprobe.log" "$WORK"/rvprobe/site-*.log; fail "probe across namespaces, sites launched apart"; }
within_shaping "$WORK/rvprobe/site-0/links.json" "probe, sites launched apart"
cmp -s "$WORK/rvprobe/site-0/links.json" "$WORK/rvprobe/site-2/links.json" \
  && pass "sites launched apart wrote the same matrix" || fail "the sites' links.json differ"

timeout 300 scripts/netsim --sites 3 --mbps 40,20,10 --latency-ms 5,30,80 --bin "$DILOCO_BIN" -- \
  train recipes/cross-dc-3site.toml --set outer.rounds=2 --set sync.H=10 --out "$WORK/train" > "$WORK/train.log" 2>&1 \
  && [[ $(rows "$WORK/train/metrics.jsonl") -eq 2 ]] && grep -q "3 ranks in 3 sites" "$WORK/train.log" \
  && pass "cross-dc-3site trains across 3 namespaces" || { cat "$WORK/train.log"; fail "train across namespaces"; }

# Six ranks in six namespaces: 0-1, 2-3 and 4-5 unshaped among themselves,
# each pair's traffic to the others shaped at 100, 50 and 20 Mbit/s. With
# topology.site_by = "links" the run measures every pair at launch, cuts
# exactly those three sites, and trains on them.
timeout 300 scripts/netsim --sites 3 --ranks-per-site 2 --mbps 100,50,20 --latency-ms 5,30,80 --bin "$DILOCO_BIN" -- \
  train recipes/quickstart.toml --set 'topology.site_by="links"' --set outer.rounds=2 --set sync.H=10 \
  --set data.batch_size=8 --out "$WORK/links" > "$WORK/links.log" 2>&1 \
  && grep -q "6 ranks in 3 sites (2+2+2)" "$WORK/links.log" && grep -q "^site 0: ranks 0,1;" "$WORK/links.log" \
  && grep -q "^site 1: ranks 2,3;" "$WORK/links.log" && grep -q "^site 2: ranks 4,5;" "$WORK/links.log" \
  && [[ $(rows "$WORK/links/metrics.jsonl") -eq 2 ]] \
  && pass "site_by = links: the launch probe cuts 6 ranks into the 3 shaped sites, which train" \
  || { grep -v "^Warning: sch_htb" "$WORK/links.log"; fail "sites by measured links"; }

# Sites launched apart, each its own mpirun in its own namespace, joined
# through ompi-server outside them; then site 2's cable is cut mid-run: the
# two connected sites go on, the cut-off one stops as a minority (exit 4)
# with a checkpoint, and nobody else recovers on its own (no split brain).
timeout 300 scripts/netsim --sites 3 --mbps 100,100,100 --bin "$DILOCO_BIN" --rendezvous "$WORK/rv" --cut 2@8 -- \
  train recipes/quickstart.toml --set outer.rounds=30 --set sync.H=20 --set data.batch_size=8 --set sync.timeout_s=5 \
  --set checkpoint.every=2 --set metrics.eval_every=1 --set rendezvous.run_id="netsim-$$" > "$WORK/rv.log" 2>&1
grep -q "site 0 exited 0" "$WORK/rv.log" && grep -q "site 1 exited 0" "$WORK/rv.log" \
  && [[ $(rows "$WORK/rv/site-0/metrics.jsonl") -eq 30 ]] && grep -q '"left":\["site-2"\]' "$WORK/rv/site-0/metrics.jsonl" \
  && pass "rendezvous across namespaces: sites 0 and 1 lost site 2 at the cut and finished 30 rounds" \
  || { cat "$WORK/rv.log"; tail -5 "$WORK"/rv/site-*.log; fail "rendezvous: the connected sites did not go on"; }
grep -q "site 2 exited 4" "$WORK/rv.log" && grep -q "not a strict majority" "$WORK/rv/site-2.log" \
  && grep -q "checkpoint of round" "$WORK/rv/site-2.log" \
  && pass "the cut-off site stopped as a minority (exit 4) with a checkpoint" \
  || { tail -5 "$WORK/rv/site-2.log"; fail "the cut-off site did not stop as a minority"; }
python3 - "$WORK/rv" <<'PY' && pass "before the cut all three evaluated the same global params" || fail "sites disagreed before the cut"
import json, sys
rows = [[json.loads(l) for l in open(f"{sys.argv[1]}/site-{i}/metrics.jsonl")] for i in range(3)]
shared = [r["round"] for r in rows[2]]
assert len(shared) >= 2, shared
for k in range(len(shared)):
    evals = {rows[i][k]["eval_loss"] for i in range(3)}
    assert len(evals) == 1 and None not in evals, (shared[k], evals)
PY

# Nothing is left behind: no namespace or link of this run's tag remains.
leftover=$(ip netns list | grep -c '^dn[0-9]*s[0-9]' || true)
[[ $leftover -eq 0 ]] && pass "namespaces torn down" || fail "$leftover namespaces left behind"
expect_exit 2 "--mbps needs 3" "netsim refuses a bandwidth list of the wrong length" -- \
  scripts/netsim --sites 3 --mbps 40,20 -- probe recipes/cross-dc-3site.toml
expect_exit 2 "--relaunch must be SITE@ROUND with SITE below 3" "netsim refuses a relaunch of a site it has not" -- \
  scripts/netsim --sites 3 --mbps 40,20,10 --rendezvous "$WORK/bad" --relaunch 3@5 -- train recipes/quickstart.toml
expect_exit 2 "--relaunch needs --rendezvous" "netsim refuses a relaunch in one job" -- \
  scripts/netsim --sites 3 --mbps 40,20,10 --relaunch 1@5 -- train recipes/quickstart.toml
[[ ! -e $WORK/bad ]] && pass "a refused netsim run created nothing" || fail "a refused netsim run created $WORK/bad"
finish
