#!/usr/bin/env bash
# Sites launched apart against one mpirun over the same shaped links
# (scripts/netsim: a network namespace per site, tc tbf; needs root): 3
# sites at MBPS (default 20,20,10 Mbit/s) with LATENCY (default 50 ms each)
# added by the link emulation; recipes/streaming.toml's model on 3 sites;
# blocking and delayed overlap, each as one mpirun spanning the three
# namespaces ("world") and as three sites each its own mpirun joined
# through a rendezvous ("apart"). Per run: the middle rounds' (2..N-1: the
# first evaluates, the last drains) utilization of the slowest site (its
# inner steps' time over the round's wall time; the slowest site waits for
# nobody), H of each site, the final eval loss, the bytes all leaders sent
# and the wall time.
#   bench/apart.sh [extra --set flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
MBPS=${MBPS:-20,20,10}
LATENCY=${LATENCY:-50,50,50}
ROUNDS=${ROUNDS:-10}
scripts/netsim --check >/dev/null 2>&1 || { echo "skipped: $(scripts/netsim --check 2>&1 | tail -1)"; exit 0; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

summarize() {  # summarize LABEL METRICS_JSONL
  python3 - "$@" <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
rows = [json.loads(l) for l in open(path)]
walls = [b["wall_s"] - a["wall_s"] for a, b in zip([{"wall_s": 0.0}] + rows, rows)]
mid = list(zip(rows, walls))[1:-1]
slow = sum(max(s * n for s, n in zip(r["site_step_s"], r["site_steps"])) / w for r, w in mid) / len(mid)
last = rows[-1]
hs = "/".join(str(h) for h in (last.get("next_site_H") or [last["H"]]))
print(f"| {label} | {slow:.3f} | {hs} | {last['eval_loss']:.4f} | {last['bytes_sent'] / 1e6:.1f} | {last['wall_s']:.1f} |")
PY
}

echo "3 sites at $MBPS Mbit/s, $LATENCY ms; recipes/streaming.toml on 3 sites, $ROUNDS rounds $*"
echo
echo "| run | utilization of the slowest site (middle rounds) | H per site | final eval loss | MB sent | wall (s) |"
echo "|---|---:|---|---:|---:|---:|"
common=(train recipes/streaming.toml --set outer.rounds="$ROUNDS" "$@")
for mode in none delayed; do
  scripts/netsim --sites 3 --mbps "$MBPS" --latency-ms "$LATENCY" -- "${common[@]}" --set sync.overlap=$mode \
    --set run.out_dir="$out/world-$mode" >"$out/world-$mode.log" 2>&1 || { tail -20 "$out/world-$mode.log"; exit 1; }
  summarize "$mode, one mpirun" "$out/world-$mode/metrics.jsonl"
  scripts/netsim --sites 3 --mbps "$MBPS" --latency-ms "$LATENCY" --rendezvous "$out/apart-$mode" -- "${common[@]}" \
    --set sync.overlap=$mode --set rendezvous.run_id="apart-$$-$mode" >"$out/apart-$mode.log" 2>&1 ||
    { tail -20 "$out/apart-$mode.log" "$out/apart-$mode"/site-*.log; exit 1; }
  summarize "$mode, sites launched apart" "$out/apart-$mode/site-0/metrics.jsonl"
done
