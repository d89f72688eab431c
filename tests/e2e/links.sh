# Emulated wide-area links: the probe measures what is configured, the
# cross-datacenter recipe runs, and a scheduled degradation shows in the
# measured communication time.
source "$(dirname "$0")/lib.sh"

cat > "$WORK/two.toml" <<'TOML'
[topology]
sites = 2
[links]
latency_ms = [30.0, 30.0]
bandwidth_mbps = [20.0, 20.0]
TOML
mpi 2 "$DILOCO_BIN" probe "$WORK/two.toml" --out "$WORK/probe" > "$WORK/probe.log" 2>&1 || { cat "$WORK/probe.log"; fail "probe"; }
python3 - "$WORK/probe/links.json" <<'PY' && pass "probe within 15% of 30 ms / 20 Mbit/s" || fail "probe estimates off"
import json, sys
link = json.load(open(sys.argv[1]))["links"][0]
print(link)
assert abs(link["latency_ms"] - 30.0) <= 0.15 * 30.0
assert abs(link["bandwidth_mbps"] - 20.0) <= 0.15 * 20.0
PY

# Three sites, unequal links: the probe sees the slowest member of each pair.
mpi 3 "$DILOCO_BIN" probe recipes/cross-dc-3site.toml --out "$WORK/probe3" > "$WORK/probe3.log" 2>&1 \
  || { cat "$WORK/probe3.log"; fail "probe of 3 sites"; }
python3 - "$WORK/probe3/links.json" <<'PY' && pass "3-site probe" || fail "3-site probe estimates off"
import json, sys
links = {(l["a"], l["b"]): l for l in json.load(open(sys.argv[1]))["links"]}
expected = {(0, 1): (30, 50), (0, 2): (80, 20), (1, 2): (80, 20)}
for pair, (lat, bw) in expected.items():
    assert abs(links[pair]["latency_ms"] - lat) <= 0.15 * lat, (pair, links[pair])
    assert abs(links[pair]["bandwidth_mbps"] - bw) <= 0.15 * bw, (pair, links[pair])
PY

# The cross-datacenter recipe, shortened to 7 rounds: site 2's bandwidth drops
# to a tenth at round 6, and that round's communication time shows it.
mpi 3 "$DILOCO_BIN" train recipes/cross-dc-3site.toml --set outer.rounds=7 --set sync.H=5 --out "$WORK/x3" \
  > "$WORK/x3.log" 2>&1 || { tail -20 "$WORK/x3.log"; fail "cross-dc-3site run"; }
python3 - "$WORK/x3/metrics.jsonl" <<'PY' && pass "degraded link shows in comm time" || fail "no sign of the degraded link"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
per_round = [b["comm_s"] - a["comm_s"] for a, b in zip([{"comm_s": 0}] + rows, rows)]
print([round(x, 2) for x in per_round])
assert len(rows) == 7
assert per_round[5] > 2.0 * per_round[4], per_round
PY

# A links array that does not match the site count is a recipe error.
printf '[topology]\nsites = 3\n[links]\nlatency_ms = [1.0, 2.0]\n' > "$WORK/bad.toml"
expect_exit 2 "links.latency_ms has 2 entries; topology.sites is 3" "links length mismatch" -- \
  "$DILOCO_BIN" check "$WORK/bad.toml"
printf '[topology]\nsites = 2\n[links]\nlatency_ms = [1.0, 2.0]\nchanges = [{ round = 2, site = 5 }]\n' > "$WORK/bad2.toml"
expect_exit 2 "links.changes names site 5" "link change for a missing site" -- "$DILOCO_BIN" check "$WORK/bad2.toml"
finish
