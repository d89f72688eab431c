# The time-budget schedule on heterogeneous sites: site 1 steps 2x slower
# (debug.slow_factor), so it is planned about half the steps of site 0, and
# site 0 no longer waits long at the exchange. The knob doubles each step's
# own compute time; two ranks sharing 2 cores also slow each other's compute,
# so the measured ratio lands anywhere between about 1.6x and 4x from run to
# run (4x seen on a loaded CI machine) and the split is checked against the
# measured speeds, not against the knob. Passive link estimates follow
# the emulated link in every round (latency within 20%, bandwidth within 15%),
# and a forced re-probe lands in the metrics.
source "$(dirname "$0")/lib.sh"

{ small_model_toml; cat; } > "$WORK/tb.toml" <<'TOML'
[outer]
rounds = 7
[sync]
H = 30
schedule = "time-budget"
h_min = 30                # pins the fastest site's H, so only the split is tested
h_max = 30
reprobe_every = 5
[compression]
codec = "int8"
[topology]
sites = 2
[links]
latency_ms = [10.0, 10.0]
bandwidth_mbps = [20.0, 20.0]
[debug]
slow_site = 1
slow_factor = 2.0
[metrics]
eval_every = 1000
TOML
mpi 2 "$DILOCO_BIN" train "$WORK/tb.toml" --out "$WORK/tb" > "$WORK/tb.log" 2>&1 \
  || { tail -20 "$WORK/tb.log"; fail "time-budget run"; }
python3 - "$WORK/tb/metrics.jsonl" <<'PY' && pass "slow site runs fewer steps in its measured speed ratio; fast site waits < 10%" \
  || fail "time-budget split"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
prev = {"wall_s": 0.0, "wait_s": 0.0}
waits = []
for r in rows:
    round_s = r["wall_s"] - prev["wall_s"]
    waits.append((r["wait_s"] - prev["wait_s"]) / round_s)
    print(r["round"], "steps", r["site_steps"], [round(x*1000,2) for x in r["site_step_s"]], "next", r["next_site_H"], "wait share", round(waits[-1], 3))
    prev = r
assert len(rows) == 7
assert rows[0]["site_steps"] == [30, 30]
assert waits[0] > 0.2, "without a plan the fast site should wait for the slow one"
for prev_row, r, w in zip(rows[1:], rows[2:], waits[2:]):  # round 2 already runs the split
    fast, slow = r["site_steps"]
    t_fast, t_slow = prev_row["site_step_s"]
    assert fast == 30 and slow < fast and t_slow > t_fast, (r["site_steps"], prev_row["site_step_s"])
    assert abs((slow / fast) / (t_fast / t_slow) - 1) <= 0.2, (r["site_steps"], prev_row["site_step_s"])
    assert w < 0.25, f"round {r['round']}: the fast site waited {w:.3f} of the round"
# Per round, noise in step times (two ranks share 2 cores) moves the wait a
# little; over the planned rounds it stays under 10% of the round.
mean_wait = sum(waits[2:]) / len(waits[2:])
print(f"mean wait share over rounds 3-7: {mean_wait:.3f}")
assert mean_wait < 0.10, mean_wait
PY
python3 - "$WORK/tb/metrics.jsonl" <<'PY' && pass "passive link estimate within 20% (latency) and 15% (bandwidth) of 10 ms / 20 Mbit/s in every passive round" \
  || fail "link estimates"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
lat_err, bw_err = [], []
for r in rows:
    print(r["round"], "link", r["link_latency_ms"], "ms", r["link_bandwidth_mbps"], "Mbit/s", "probed" if "probed" in r else "")
    # Round 1 has one latency sample: no estimate yet. A re-probe round
    # reports the probe (checked below), not the passive estimate.
    if r["round"] >= 2 and "probed" not in r:
        lat_err.append(abs(r["link_latency_ms"] / 10.0 - 1))
        bw_err.append(abs(r["link_bandwidth_mbps"] / 20.0 - 1))
print(f"latency error mean {100 * sum(lat_err) / len(lat_err):.1f}% worst {100 * max(lat_err):.1f}%; "
      f"bandwidth error mean {100 * sum(bw_err) / len(bw_err):.1f}% worst {100 * max(bw_err):.1f}%")
assert rows[0]["link_latency_ms"] is None, rows[0]
assert max(lat_err) <= 0.20, lat_err
assert max(bw_err) <= 0.15, bw_err
probed = rows[4]["probed"][0]
assert rows[4]["round"] == 5 and "probed" not in rows[3]
assert abs(probed["bandwidth_mbps"] - 20.0) <= 0.15 * 20.0, probed
PY
finish
