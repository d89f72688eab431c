#!/usr/bin/env bash
# Training effect of each codec: recipes/quickstart.toml (same seed, same
# rounds) once per codec on 4 ranks (2 sites x 2), one table: final eval loss,
# its change against "none", bytes sent between sites and the reduction.
# Usage: [CODECS="none int8 ..."] bench/codec_training.sh [extra --set flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi_env
bin=build/diloco
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
read -r -a codecs <<< "${CODECS:-none fp16 int8 int4 topk topk+int8 sign}"  # CODECS: a subset, "none" first
printf '# recipes/quickstart.toml, 4 ranks = 2 sites x 2, %s\n' "$*"
printf '%-10s %-6s %12s %10s %14s %10s %8s\n' codec ef final_eval vs_none bytes_sent reduction wall_s
base_loss=""
base_bytes=""
for codec in "${codecs[@]}"; do
  sets=(--set "compression.codec=$codec")
  [[ $codec == topk* ]] && sets+=(--set compression.topk_ratio=0.1)
  dir="$out/${codec//+/_}"
  mpirun -np 4 --bind-to none "$bin" train recipes/quickstart.toml "${sets[@]}" "$@" --out "$dir" > "$dir.log" 2>&1 \
    || { cat "$dir.log"; exit 1; }
  read -r loss bytes wall < <(python3 -c '
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])][-1]
print(r["eval_loss"], r["bytes_sent"], r["wall_s"])' "$dir/metrics.jsonl")
  ef=$(grep -E '^error_feedback = ' "$dir/recipe.toml" | awk '{print $3}')
  if [[ -z $base_loss ]]; then base_loss=$loss; base_bytes=$bytes; fi
  python3 -c '
import sys
codec, ef, loss, bytes_, wall, bl, bb = sys.argv[1:]
print(f"{codec:<10} {ef:<6} {float(loss):12.4f} {100*(float(loss)/float(bl)-1):+9.2f}% {int(bytes_):14d} {float(bb)/float(bytes_):9.2f}x {float(wall):8.1f}")' \
    "$codec" "$ef" "$loss" "$bytes" "$wall" "$base_loss" "$base_bytes"
done
