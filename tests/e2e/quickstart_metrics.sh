# The quickstart recipe on 4 ranks (2 sites of 2) for 6 rounds: 6 metrics rows
# with every key, bytes_sent growing, eval loss falling, effective recipe saved.
source "$(dirname "$0")/lib.sh"

out="$WORK/quickstart"
if ! mpi 4 "$DILOCO_BIN" train recipes/quickstart.toml --set outer.rounds=6 --out "$out" > "$WORK/log" 2>&1; then
  cat "$WORK/log"; fail "quickstart run failed"; finish
fi
tail -8 "$WORK/log"
[[ -f "$out/recipe.toml" ]] && pass "effective recipe written" || fail "no $out/recipe.toml"
"$DILOCO_BIN" check "$out/recipe.toml" > /dev/null && pass "saved recipe validates" || fail "saved recipe invalid"
python3 - "$out/metrics.jsonl" <<'PY' && pass "metrics rows" || fail "metrics rows"
import json, math, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
assert len(rows) == 6, f"{len(rows)} rows"
keys = {"round", "H", "train_loss", "eval_loss", "tokens", "bytes_sent", "wall_s", "compute_s", "comm_s"}
for i, r in enumerate(rows, 1):
    assert keys <= r.keys(), f"row {i} lacks {keys - r.keys()}"
    assert r["round"] == i and r["H"] == 20
    assert math.isfinite(r["train_loss"])
    assert r["wall_s"] >= r["compute_s"] + r["comm_s"] - 1e-6
for a, b in zip(rows, rows[1:]):
    assert b["bytes_sent"] > a["bytes_sent"], "bytes_sent not growing"
    assert b["tokens"] > a["tokens"]
# eval every 2 rounds and always on the last
assert [r["eval_loss"] is not None for r in rows] == [False, True, False, True, False, True]
assert rows[-1]["eval_loss"] < 5.545 - 1.0, rows[-1]["eval_loss"]
# 2 sites x 2 ranks x 20 steps x 16 sequences x 64 bytes per round
assert rows[0]["tokens"] == 4 * 20 * 16 * 64
print("final eval loss", rows[-1]["eval_loss"], "bytes", rows[-1]["bytes_sent"])
PY
grep -q "final eval loss" "$WORK/log" && pass "summary table" || fail "no summary table"
finish
