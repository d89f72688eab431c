#!/usr/bin/env bash
# Sites launched apart against one mpirun over the same shaped links
# (scripts/netsim: a network namespace per site, tc tbf; needs root): 3
# sites at MBPS (default 20,20,10 Mbit/s) with LATENCY (default 50 ms each)
# added by the link emulation; recipes/streaming.toml's model on 3 sites;
# blocking and delayed overlap, each as one mpirun spanning the three
# namespaces ("world") and as three sites each its own mpirun joined
# through a rendezvous ("apart"); streaming overlap likewise, and delayed
# overlap with H planned per site (sync.schedule = "time-budget"). Per run: the middle rounds' (2..N-1: the
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
# run LABEL NAME FLAGS...: one mpirun spanning the namespaces, then three sites launched apart.
run() {
  local label=$1 name=$2
  shift 2
  scripts/netsim --sites 3 --mbps "$MBPS" --latency-ms "$LATENCY" -- "${common[@]}" "$@" \
    --set run.out_dir="$out/world-$name" >"$out/world-$name.log" 2>&1 || { tail -20 "$out/world-$name.log"; exit 1; }
  summarize "$label, one mpirun" "$out/world-$name/metrics.jsonl"
  scripts/netsim --sites 3 --mbps "$MBPS" --latency-ms "$LATENCY" --rendezvous "$out/apart-$name" -- "${common[@]}" \
    "$@" --set rendezvous.run_id="apart-$$-$name" >"$out/apart-$name.log" 2>&1 ||
    { tail -20 "$out/apart-$name.log" "$out/apart-$name"/site-*.log; exit 1; }
  summarize "$label, sites launched apart" "$out/apart-$name/site-0/metrics.jsonl"
}
for mode in none delayed streaming; do
  run "$mode" "$mode" --set sync.overlap=$mode
done
# H from the measured links and steps: the fastest site's H keeps the
# exposed exchange near the target share, every other site runs as many
# steps as fit in the same time (per-site H).
run "delayed, time-budget" budget --set sync.overlap=delayed --set sync.schedule=time-budget
