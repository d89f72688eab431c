#!/usr/bin/env bash
# The planner's memory model against runs. For each model, a site leader of
# 2 sites x 1 rank on the fortunes corpus (one row on 10 GB of token shards,
# sparse files: read a window at a time, they cost what a small set does): the memory `diloco plan` predicts
# in use against the peak RSS of `diloco train` with the host block cache
# off and glibc made to return freed blocks at once
# (DILOCO_HOST_BLOCK_CACHE=0 MALLOC_MMAP_THRESHOLD_=131072: RSS then follows
# the memory in use), and the peak RSS it predicts (with what the host block
# cache keeps of freed activations) against a run as diloco runs. Then the
# step time with the host block cache and with glibc's malloc (1 rank alone,
# alternated, median of 3 runs each).
# Usage: bench/plan_memory.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi_env
quick=${1:-}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# kind d_model layers heads seq_len batch codec precision [data]
configs=("gpt 128 2 4 64 16 none fp32" "gpt 256 4 8 128 16 none fp32" "gpt 256 4 8 128 16 int8 fp32"
         "gpt 256 4 8 128 16 none bf16" "llama 256 4 8 128 16 none fp32" "gpt 256 4 8 128 16 none fp32 shards10g")
[[ $quick == --quick ]] || configs+=("gpt 384 6 6 256 8 none fp32" "llama 512 4 8 256 8 none fp32"
                                      "gpt 512 8 8 256 16 none fp32")
# --quick: the smallest GPT and the 10 GB of shards (within scripts/bench
# --quick's 10 minutes: each model costs two training runs, about 35 s).
[[ $quick == --quick ]] && configs=("${configs[0]}" "${configs[5]}")
# 10 llm.c shards of 1 GB of uint16 ids each, all 0: sparse, no disk used.
shards10g() {
  mkdir -p "$out/shards"
  python3 - "$out/shards" <<'PY'
import os, struct, sys
for i in range(10):
    count = 500_000_000
    with open(os.path.join(sys.argv[1], f"shard_{i:06d}.bin"), "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, count, *([0] * 253)))
        f.truncate(1024 + 2 * count)
PY
}
shape() {
  read -r kind d L a T B codec prec data <<< "$1"
  echo "--set model.kind=$kind --set model.d_model=$d --set model.n_layers=$L --set model.n_heads=$a"\
       "--set model.seq_len=$T --set data.batch_size=$B --set compression.codec=$codec --set inner.precision=$prec"
  [[ ${data:-} == shards10g ]] && echo "--set data.format=tokens --set data.paths=[\"$out/shards\"]"
  return 0
}
peak_mb() {  # the summary's "peak RSS (largest rank)  N MB|GB" in MB
  awk '/peak RSS/ {print ($NF == "GB" ? $(NF-1) * 1000 : $(NF-1))}' "$1"
}

echo "| model | batch | precision | codec | predicted in use (MB) | measured, freed memory returned (MB) | ratio | predicted peak RSS (MB) | measured, as diloco runs (MB) | ratio |"
echo "|---|---:|---|---|---:|---:|---:|---:|---:|---:|"
for c in "${configs[@]}"; do
  read -r kind d L a T B codec prec data <<< "$c"
  [[ ${data:-} == shards10g ]] && shards10g
  read -r -a sets <<< "$(shape "$c" | tr '\n' ' ')"
  build/diloco plan recipes/quickstart.toml "${sets[@]}" --set topology.sites=2 --step-s 0.1 > "$out/plan.txt"
  rss=$(sed -n 's/.*a rank needs device + host: leader \([0-9]*\) MB.*/\1/p' "$out/plan.txt")
  in_use=$(sed -n 's/.*without what the host block cache keeps: leader \([0-9]*\) MB.*/\1/p' "$out/plan.txt")
  for free in true false; do
    glibc=()
    [[ $free == true ]] && glibc=(-x DILOCO_HOST_BLOCK_CACHE=0 -x MALLOC_MMAP_THRESHOLD_=131072)
    mpirun -np 2 --bind-to none "${glibc[@]}" build/diloco train recipes/quickstart.toml "${sets[@]}" \
      --set topology.sites=2 --set outer.rounds=2 --set sync.H=3 --set checkpoint.every=0 \
      --out "$out/run" < /dev/null > "$out/train-$free.txt" 2>&1
  done
  read -r freed default <<< "$(peak_mb "$out/train-true.txt") $(peak_mb "$out/train-false.txt")"
  python3 -c "
u, f, p, g = $in_use, $freed, $rss, $default
print(f'| $kind d$d L$L T$T${data:+, $data} | $B | $prec | $codec | {u:.0f} | {f:.0f} | {f / u:.2f} | {p:.0f} | {g:.0f} | {g / p:.2f} |')"
done

echo
if [[ $quick == --quick ]]; then
  echo "(The allocators' step times: measured by the full run.)"
  exit 0
fi
echo "| model | batch | step s, host block cache | step s, glibc's malloc | ratio |"
echo "|---|---:|---:|---:|---:|"
steps=("256 4 8 128 16" "512 8 8 256 16")
for c in "${steps[@]}"; do
  read -r d L a T B <<< "$c"
  for rep in 1 2 3; do
    for alloc in cache glibc; do
      env=()
      [[ $alloc == glibc ]] && env=(-x DILOCO_HOST_BLOCK_CACHE=0)
      mpirun -np 1 --bind-to none "${env[@]}" build/diloco train recipes/quickstart.toml --set model.d_model=$d \
        --set model.n_layers=$L --set model.n_heads=$a --set model.seq_len=$T --set data.batch_size=$B \
        --set topology.sites=1 --set outer.rounds=2 --set sync.H=8 \
        --set checkpoint.every=0 --set metrics.eval_every=1000 --out "$out/s" < /dev/null > /dev/null 2>&1
      # The second round's mean step: the first warms the allocator up.
      python3 -c "import json; r = [json.loads(l) for l in open('$out/s/metrics.jsonl')]; print(r[-1]['step_s'])" \
        >> "$out/steps-$alloc.txt"
    done
  done
  python3 - "$out/steps-cache.txt" "$out/steps-glibc.txt" "gpt d$d L$L T$T" "$B" <<'PY'
import statistics, sys
cache, glibc = (statistics.median(float(x) for x in open(f)) for f in sys.argv[1:3])
print(f"| {sys.argv[3]} | {sys.argv[4]} | {cache:.3f} | {glibc:.3f} | {glibc / cache:.2f} |")
PY
  rm -f "$out"/steps-*.txt
done
