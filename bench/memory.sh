#!/usr/bin/env bash
# Peak resident memory of DiLoCo over plain training: the inner loop alone
# (bench_inner --only diloco: model, gradients, AdamW, batches) against a
# `diloco train` rank of 2 sites x 1 rank on the same model and batch, whose
# extra is the outer state (global params, outer momentum, error-feedback
# residual) and the exchange buffers. Reported as multiples of the parameter
# bytes, per codec. Usage: bench/memory.sh [d_model] [layers]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi_env
d_model=${1:-512}
layers=${2:-8}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
shape=(--set model.d_model=$d_model --set model.n_layers=$layers --set model.n_heads=8 --set model.seq_len=64
       --set data.batch_size=8)

build/bench/bench_inner --only diloco --d-model "$d_model" --layers "$layers" --heads 8 --seq-len 64 --batch 8 \
  --steps 4 --blocks 2 > "$out/plain.txt"
# The params column (loop | model | device | precision | params | ...).
params_m=$(grep -m1 "diloco InnerLoop" "$out/plain.txt" | awk -F'|' '{gsub(/[ M]/, "", $6); print $6}')
plain_mb=$(awk '/peak RSS/ {print $3}' "$out/plain.txt")
param_mb=$(python3 -c "print($params_m * 4)")  # fp32 bytes, MB

echo "| run | peak RSS (MB) | over plain (MB) | over plain / param bytes |"
echo "|---|---:|---:|---:|"
printf '| plain inner loop (%.1fM params = %.0f MB fp32) | %.0f | - | - |\n' "$params_m" "$param_mb" "$plain_mb"
for codec in none int8 topk; do
  mpirun -np 2 --bind-to none build/diloco train recipes/quickstart.toml "${shape[@]}" --set topology.sites=2 \
    --set outer.rounds=2 --set sync.H=4 --set compression.codec=\""$codec"\" --set metrics.eval_windows=8 \
    --set checkpoint.every=0 --out "$out/$codec" > "$out/$codec.log" 2>&1 || { tail "$out/$codec.log"; exit 1; }
  rss=$(grep "peak RSS" "$out/$codec.log" | awk '{print $(NF-1), $NF}')
  python3 - "$codec" "$rss" "$plain_mb" "$param_mb" <<'PY'
import sys
codec, rss, plain, param = sys.argv[1], sys.argv[2].split(), float(sys.argv[3]), float(sys.argv[4])
mb = float(rss[0]) * {"KB": 1e-3, "MB": 1.0, "GB": 1e3}[rss[1]] / 1.048576  # summary prints 10^6 bytes; getrusage MiB
extra = mb - plain
print(f"| diloco train, 2 sites x 1 rank, codec {codec} | {mb:.0f} | {extra:.0f} | {extra / param:.2f}x |")
PY
done
