#!/usr/bin/env bash
# Overlap benchmark: recipes/streaming.toml (2 sites of 1 rank, a link on
# which a blocking exchange takes about 35-40% of wall time) run once per overlap
# mode at the same H, then the largest single exchange of streaming against
# the fragment count on a deeper model. Ratios are measured side by side.
# Usage: [FRAGMENTS="1 4"] bench/overlap.sh [extra --set flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi_env
bin=build/diloco
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Steady-state figures: rounds 2..N-1 (round 1 includes the first evaluation,
# the last round evaluates and, under delayed, drains its exchange).
summarize() {
  python3 - "$@" <<'PY'
import json, sys
mode, path, base = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [json.loads(l) for l in open(path)]
walls = [b["wall_s"] - a["wall_s"] for a, b in zip([{"wall_s": 0.0}] + rows, rows)]
mid = list(zip(rows, walls))[1:-1]
util = sum(r["utilization"] for r, _ in mid) / len(mid)
# The slowest site waits for nobody: its compute share shows what overlap
# hides, apart from the other site's wait for it.
slow = sum(max(s * n for s, n in zip(r["site_step_s"], r["site_steps"])) / w for r, w in mid) / len(mid)
exposed = sum(r["comm_share"] for r, _ in mid) / len(mid)
last = rows[-1]
loss = last["eval_loss"]
vs = "" if base == "-" else f"{100 * (loss / float(base) - 1):+.2f}%"
print(f"{mode:<10} {last['H']:>3} {util:11.3f} {slow:13.3f} {exposed:9.3f} {loss:10.4f} {vs:>8} "
      f"{last['wall_s']:7.1f} {last['peak_exchange_bytes']:12d}")
PY
}

echo "# recipes/streaming.toml, 2 ranks = 2 sites x 1, $*"
printf '%-10s %3s %11s %13s %9s %10s %8s %7s %12s\n' overlap H utilization util_slowest exposed final_eval vs_none wall_s peak_bytes
base="-"
for mode in none delayed streaming; do
  mpirun -np 2 --bind-to none "$bin" train recipes/streaming.toml --set "sync.overlap=$mode" "$@" --out "$out/$mode" \
    > "$out/$mode.log" 2>&1 || { tail -20 "$out/$mode.log"; exit 1; }
  summarize "$mode" "$out/$mode/metrics.jsonl" "$base"
  [[ $base == "-" ]] && base=$(python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1])][-1]["eval_loss"])' "$out/none/metrics.jsonl")
done

echo
echo "# streaming: largest single exchange against sync.fragments (model.n_layers = 8, 2 rounds)"
printf '%-9s %12s %9s\n' fragments peak_bytes reduction
first=""
read -r -a fragment_counts <<< "${FRAGMENTS:-1 2 4 8}"  # FRAGMENTS: a subset, 1 first
for f in "${fragment_counts[@]}"; do
  mpirun -np 2 --bind-to none "$bin" train recipes/streaming.toml --set model.n_layers=8 --set outer.rounds=2 \
    --set "sync.fragments=$f" --set sync.overlap_steps=2 "$@" --out "$out/f$f" > "$out/f$f.log" 2>&1 \
    || { tail -20 "$out/f$f.log"; exit 1; }
  peak=$(python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1])][-1]["peak_exchange_bytes"])' "$out/f$f/metrics.jsonl")
  [[ -z $first ]] && first=$peak
  python3 -c 'import sys; f, p, b = sys.argv[1:]; print(f"{f:<9} {int(p):12d} {int(b)/int(p):8.2f}x")' "$f" "$peak" "$first"
done
