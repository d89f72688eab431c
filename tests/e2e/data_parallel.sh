# Data-parallel sync end to end: the bundled recipe's mode on 2 sites of 2
# ranks with a lossy codec (error feedback state in the checkpoint), exact
# resume after SIGTERM, the bytes it sends against DiLoCo's at the same H,
# and keys it has no use for refused.
source "$(dirname "$0")/lib.sh"

H=4
dp=(recipes/data-parallel.toml --set model.d_model=64 --set sync.H=$H --set outer.rounds=5 --set checkpoint.every=2
    --set metrics.eval_every=1 --set compression.codec=int8 --set compression.stochastic_rounding=true)

mpi 4 "$DILOCO_BIN" train "${dp[@]}" --out "$WORK/dp" > "$WORK/dp.log" 2>&1 \
  && [[ $(rows "$WORK/dp/metrics.jsonl") -eq 5 ]] && pass "data-parallel: 5 rounds on 2 sites of 2 ranks" \
  || { tail -20 "$WORK/dp.log"; fail "data-parallel run"; }
exact_resume "data-parallel" "$WORK/dp/metrics.jsonl" "$WORK/term" "${dp[@]}"

# The same run as DiLoCo (one exchange per round instead of one per step).
mpi 4 "$DILOCO_BIN" train recipes/quickstart.toml --set model.d_model=64 --set sync.H=$H --set outer.rounds=5 \
  --set checkpoint.every=0 --set compression.codec=int8 --set links.latency_ms=[25.0,25.0] \
  --set links.bandwidth_mbps=[100.0,100.0] --out "$WORK/diloco" > "$WORK/diloco.log" 2>&1 \
  || { tail -20 "$WORK/diloco.log"; fail "DiLoCo run"; }
python3 - "$WORK/dp/metrics.jsonl" "$WORK/diloco/metrics.jsonl" "$H" <<'PY' \
  && pass "data-parallel sends H times DiLoCo's bytes and counts its exchanges as communication" \
  || fail "data-parallel metrics"
import json, sys
dp, dl = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
H = int(sys.argv[3])
ratio = dp[-1]["bytes_sent"] / dl[-1]["bytes_sent"]
# DiLoCo also sends a small report per round and its weights agreement per exchange.
assert 0.9 * H <= ratio <= 1.05 * H, f"bytes ratio {ratio:.2f}, H = {H}"
for r in dp:
    assert r["comm_s"] > 0 and r["exposed_comm_s"] >= r["comm_s"] * 0.99, r
    assert 0 < r["utilization"] < 1 and r["comm_share"] > 0, r
assert dp[-1]["tokens"] == dl[-1]["tokens"], (dp[-1]["tokens"], dl[-1]["tokens"])
PY

expect_exit 2 "sync.overlap does not apply to sync.mode = \"data-parallel\"" "data-parallel: overlap refused" -- \
  "$DILOCO_BIN" check recipes/data-parallel.toml --set sync.overlap=delayed
expect_exit 2 "outer.lr does not apply" "data-parallel: outer.lr refused" -- \
  "$DILOCO_BIN" check recipes/data-parallel.toml --set outer.lr=0.5
finish
