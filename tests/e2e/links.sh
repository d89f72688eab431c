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

# The cross-datacenter recipe, shortened to 7 rounds at a fixed H: site 2's
# bandwidth drops to a tenth at round 6, and that round's communication time
# shows it. Then the recipe as written (overhead schedule) for 3 rounds.
mpi 3 "$DILOCO_BIN" train recipes/cross-dc-3site.toml --set outer.rounds=7 --set sync.H=5 --set sync.schedule=fixed \
  --out "$WORK/x3" \
  > "$WORK/x3.log" 2>&1 || { tail -20 "$WORK/x3.log"; fail "cross-dc-3site run"; }
python3 - "$WORK/x3/metrics.jsonl" <<'PY' && pass "degraded link shows in comm time" || fail "no sign of the degraded link"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
per_round = [b["comm_s"] - a["comm_s"] for a, b in zip([{"comm_s": 0}] + rows, rows)]
print([round(x, 2) for x in per_round])
assert len(rows) == 7
assert per_round[5] > 2.0 * per_round[4], per_round
PY

# The overhead schedule on a slow emulated link: the communication share stays
# near its target; when site 1's bandwidth drops 10x at round 6, H rises within
# 2 rounds and the share comes back; when it recovers at round 10, H comes down.
{ small_model_toml; cat; } > "$WORK/overhead.toml" <<'TOML'
[outer]
rounds = 14
[sync]
H = 5
schedule = "overhead"
target_comm_share = 0.1
h_min = 2
h_max = 1000
[compression]
codec = "int8"
[topology]
sites = 2
[links]
latency_ms = [20.0, 20.0]
bandwidth_mbps = [20.0, 20.0]
changes = [ { round = 6, site = 1, bandwidth_mbps = 2.0 }, { round = 10, site = 1, bandwidth_mbps = 20.0 } ]
[metrics]
eval_every = 1000
TOML
mpi 2 "$DILOCO_BIN" train "$WORK/overhead.toml" --out "$WORK/overhead" > "$WORK/overhead.log" 2>&1 \
  || { tail -20 "$WORK/overhead.log"; fail "overhead run"; }
python3 - "$WORK/overhead/metrics.jsonl" <<'PY' && pass "overhead schedule follows the link" || fail "overhead schedule"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows:
    print(r["round"], "H", r["H"], "share", round(r["comm_share"], 3), "predicted", round(r["predicted_comm_share"], 3))
H = {r["round"]: r["H"] for r in rows}
share = {r["round"]: r["comm_share"] for r in rows}
overall = rows[-1]["comm_s"] / rows[-1]["wall_s"]
assert overall <= 0.1 + 0.03, f"share over the run {overall:.3f}"
assert max(H[6], H[7]) > 2 * H[5], "H did not rise within 2 rounds of the drop"
assert min(share[8], share[9]) <= 0.1 + 0.03, "share did not come back after the drop"
assert H[13] < H[9], "H did not come down after the recovery"
bw = {r["round"]: r["link_bandwidth_mbps"] for r in rows}
print("passive bandwidth estimate", {k: round(v, 2) for k, v in bw.items() if v})
assert abs(bw[5] - 20.0) <= 0.2 * 20.0 and abs(bw[8] - 2.0) <= 0.2 * 2.0, "passive estimate missed the drop"
PY

mpi 3 "$DILOCO_BIN" train recipes/cross-dc-3site.toml --set outer.rounds=3 --out "$WORK/x3o" > "$WORK/x3o.log" 2>&1 \
  && pass "cross-dc-3site as written runs" || { tail -20 "$WORK/x3o.log"; fail "cross-dc-3site as written"; }

# diloco plan's prediction against what a run then measures (round time and
# communication share within 20%).
cat > "$WORK/plan.toml" <<'TOML'
[model]
d_model = 64
[data]
batch_size = 8
[outer]
rounds = 6
[sync]
H = 20
[compression]
codec = "int8"
[topology]
sites = 2
[links]
latency_ms = [20.0, 20.0]
bandwidth_mbps = [20.0, 20.0]
[metrics]
eval_every = 1000
TOML
# The plan's own step-time measurement runs one process alone; two ranks
# sharing the machine can step slower, so the model is checked with the step
# time a short calibration run measured just before (--step-s), and the
# measuring path is only run.
# plan --links reads what probe wrote (nlohmann-json); a file that is not
# that is refused with exit 2, naming the file and the field.
"$DILOCO_BIN" plan recipes/cross-dc-3site.toml --links "$WORK/probe3/links.json" --step-s 0.05 > "$WORK/plan3.txt" 2>&1 \
  && grep -q "^int8 " "$WORK/plan3.txt" && pass "plan --links takes probe's links.json" \
  || { cat "$WORK/plan3.txt"; fail "plan --links"; }
bad_links() {  # bad_links NAME NEEDLE JSON
  printf '%s' "$3" > "$WORK/$1.json"
  expect_exit 2 "$2" "plan --links refuses $1" -- \
    "$DILOCO_BIN" plan recipes/cross-dc-3site.toml --links "$WORK/$1.json" --step-s 0.05
}
pair() { printf '{"a":%s,"b":%s,"latency_ms":5,"bandwidth_mbps":%s}' "$1" "$2" "${3:-100}"; }
bad_links not-json "not JSON" '{"links": [oops'
bad_links no-links 'needs a "links" array' '{"sites": 3}'
bad_links missing-field 'links[1]: missing number "latency_ms"' "{\"links\":[$(pair 0 1),{\"a\":0,\"b\":2,\"bandwidth_mbps\":1},$(pair 1 2)]}"
bad_links twice 'links[2]: pair (1, 0) given twice' "{\"links\":[$(pair 0 1),$(pair 0 2),$(pair 1 0)]}"
bad_links negative 'links[0].bandwidth_mbps must be a number >= 0' "{\"links\":[$(pair 0 1 -5),$(pair 0 2),$(pair 1 2)]}"
bad_links too-few '2 pairs for 3 sites' "{\"links\":[$(pair 0 1),$(pair 0 2)]}"
"$DILOCO_BIN" plan "$WORK/plan.toml" > "$WORK/plan_measured.txt" 2>&1 && pass "plan measures a step time" \
  || { cat "$WORK/plan_measured.txt"; fail "plan with a measured step"; }
mpi 2 "$DILOCO_BIN" train "$WORK/plan.toml" --set outer.rounds=3 --out "$WORK/calibrate" > /dev/null 2>&1 \
  || fail "calibration run"
step=$(python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; print(sum(x["step_s"] for x in r)/len(r))' \
  "$WORK/calibrate/metrics.jsonl")
"$DILOCO_BIN" plan "$WORK/plan.toml" --step-s "$step" > "$WORK/plan.txt" 2>&1 || { cat "$WORK/plan.txt"; fail "plan"; }
mpi 2 "$DILOCO_BIN" train "$WORK/plan.toml" --out "$WORK/planned" > "$WORK/planned.log" 2>&1 || fail "planned run"
python3 - "$WORK/plan.txt" "$WORK/planned/metrics.jsonl" <<'PY' && pass "plan within 20% of the run" || fail "plan off"
import json, sys
row = next(l.split() for l in open(sys.argv[1]) if l.startswith("int8 ") and l.split()[2] == "20")
predicted_round, predicted_share = float(row[3]), float(row[5])
rows = [json.loads(l) for l in open(sys.argv[2])]
# Rounds 2-5: round 1 has no measurements yet, the last one also evaluates.
rounds = [b["wall_s"] - a["wall_s"] for a, b in zip(rows[:-2], rows[1:-1])]
shares = [r["comm_share"] for r in rows[1:-1]]
measured_round, measured_share = sum(rounds) / len(rounds), sum(shares) / len(shares)
print(f"round: predicted {predicted_round:.3f} s, measured {measured_round:.3f} s; "
      f"share: predicted {predicted_share:.3f}, measured {measured_share:.3f}")
assert abs(predicted_round / measured_round - 1) <= 0.2
assert abs(predicted_share / measured_share - 1) <= 0.2
PY

# A links array that does not match the site count is a recipe error.
printf '[topology]\nsites = 3\n[links]\nlatency_ms = [1.0, 2.0]\n' > "$WORK/bad.toml"
expect_exit 2 "links.latency_ms has 2 entries; topology.sites is 3" "links length mismatch" -- \
  "$DILOCO_BIN" check "$WORK/bad.toml"
printf '[topology]\nsites = 2\n[links]\nlatency_ms = [1.0, 2.0]\nchanges = [{ round = 2, site = 5 }]\n' > "$WORK/bad2.toml"
expect_exit 2 "links.changes names site 5" "link change for a missing site" -- "$DILOCO_BIN" check "$WORK/bad2.toml"
finish
