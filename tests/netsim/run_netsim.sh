# scripts/netsim: 3 sites as network namespaces, each site's link shaped by tc
# tbf (40, 20 and 10 Mbit/s); a pair of sites moves data at the slower of
# their two links. `diloco probe` across it must measure every pair within
# 20% of that, and recipes/cross-dc-3site.toml must train across it (with its
# latencies added by diloco). Exits 77 (skipped) with the reason only when the
# machine cannot create namespaces or tc qdiscs.
source "$(dirname "$0")/../e2e/lib.sh"
check=$(scripts/netsim --check); rc=$?
if [[ $rc -eq 77 ]]; then echo "SKIP: $check"; exit 77; fi
[[ $rc -eq 0 ]] || { echo "FAIL: netsim --check exited $rc: $check"; exit 1; }

timeout 300 scripts/netsim --sites 3 --mbps 40,20,10 --bin "$DILOCO_BIN" -- \
  probe recipes/cross-dc-3site.toml --out "$WORK/probe" > "$WORK/probe.log" 2>&1 \
  || { cat "$WORK/probe.log"; fail "probe across namespaces"; }
cat "$WORK/probe.log" | grep -v "^netsim: mpirun"
python3 - "$WORK/probe/links.json" <<'PY' && pass "probe: every pair within 20% of its shaped bandwidth" \
  || fail "probe against tc shaping"
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

timeout 300 scripts/netsim --sites 3 --mbps 40,20,10 --latency-ms 5,30,80 --bin "$DILOCO_BIN" -- \
  train recipes/cross-dc-3site.toml --set outer.rounds=2 --set sync.H=10 --out "$WORK/train" > "$WORK/train.log" 2>&1 \
  && [[ $(rows "$WORK/train/metrics.jsonl") -eq 2 ]] && grep -q "3 ranks in 3 sites" "$WORK/train.log" \
  && pass "cross-dc-3site trains across 3 namespaces" || { cat "$WORK/train.log"; fail "train across namespaces"; }

# Nothing is left behind: no namespace or link of this run's tag remains.
leftover=$(ip netns list | grep -c '^dn[0-9]*s[0-9]' || true)
[[ $leftover -eq 0 ]] && pass "namespaces torn down" || fail "$leftover namespaces left behind"
expect_exit 2 "--mbps needs 3" "netsim refuses a bandwidth list of the wrong length" -- \
  scripts/netsim --sites 3 --mbps 40,20 -- probe recipes/cross-dc-3site.toml
finish
