#!/usr/bin/env bash
# Sites launched apart against one mpirun over the same shaped links
# (scripts/netsim: a network namespace per site, tc tbf; needs root): 3
# sites at MBPS (default 20,20,10 Mbit/s) with LATENCY (default 50 ms each)
# added by the link emulation; recipes/streaming.toml's model on 3 sites;
# blocking and delayed overlap, each as one mpirun spanning the three
# namespaces ("world") and as three sites each its own mpirun joined
# through a rendezvous ("apart"); streaming overlap likewise, and delayed
# overlap with H planned per site (sync.schedule = "time-budget"), and data
# parallelism as the baseline. Per run: the middle rounds' (2..N-1: the
# first evaluates, the last drains) utilization of the slowest site (its
# inner steps' time over the round's wall time; the slowest site waits for
# nobody), H of each site, the final eval loss, the bytes all leaders sent
# and the wall time.
# Then delayed overlap between sites launched apart over FAULT_ROUNDS
# (default 30) rounds, without a fault and with site 2 killed at round
# KILL_ROUND (10; the recipe's [debug] fault_* keys) and launched again
# when the others reach round RELAUNCH_ROUND (20; scripts/netsim
# --relaunch): utilization of the rounds outside the two membership
# changes, and the final eval loss against the run without the fault.
#   bench/apart.sh [extra --set flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
MBPS=${MBPS:-20,20,10}
LATENCY=${LATENCY:-50,50,50}
ROUNDS=${ROUNDS:-10}
FAULT_ROUNDS=${FAULT_ROUNDS:-30} KILL_ROUND=${KILL_ROUND:-10} RELAUNCH_ROUND=${RELAUNCH_ROUND:-20}
scripts/netsim --check >/dev/null 2>&1 || { echo "skipped: $(scripts/netsim --check 2>&1 | tail -1)"; exit 0; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The tables, from the sites' metrics.jsonl: one row per run (summarize),
# and the fault run against the run without it (fault).
cat >"$out/tables.py" <<'PY'
import json, sys

def rounds_of(path):  # each round's row and wall time
    rows = [json.loads(l) for l in open(path)]
    walls = [b["wall_s"] - a["wall_s"] for a, b in zip([{"wall_s": 0.0}] + rows, rows)]
    return rows, walls

def busy(row, wall):  # the slowest site's inner-step time over the round's wall time
    return max(s * n for s, n in zip(row["site_step_s"], row["site_steps"])) / wall

def summarize(label, path):
    rows, walls = rounds_of(path)
    mid = list(zip(rows, walls))[1:-1]
    slow = sum(busy(r, w) for r, w in mid) / len(mid)
    last = rows[-1]
    hs = "/".join(str(h) for h in (last.get("next_site_H") or [last["H"]]))
    print(f"| {label} | {slow:.3f} | {hs} | {last['eval_loss']:.4f} | {last['bytes_sent'] / 1e6:.1f} | "
          f"{last['wall_s']:.1f} |")

def fault(calm, hit):
    base = None
    for label, path in (("no fault", calm), ("site 2 killed and launched again", hit)):
        rows, walls = rounds_of(path)
        changed = {r["round"] for r in rows if r.get("membership")}
        skip = {c + d for c in changed for d in (-1, 0, 1)} | {rows[0]["round"], rows[-1]["round"]}
        util = [busy(r, w) for r, w in zip(rows, walls) if r["round"] not in skip]
        events = "; ".join(f'{r["round"]}: ' + ", ".join(
            ("lost " + "/".join(m["left"])) if m.get("left") else ("joined " + "/".join(m.get("joined", [])))
            for m in r["membership"]) for r in rows if r.get("membership")) or "none"
        loss = rows[-1]["eval_loss"]
        base = base or loss
        print(f"| {label} | {len(util)} | {sum(util) / len(util):.3f} | {min(util):.3f} | {events} | {loss:.4f} | "
              f"{100 * (loss / base - 1):+.2f}% |")

{"summarize": summarize, "fault": fault}[sys.argv[1]](*sys.argv[2:])
PY
summarize() { python3 "$out/tables.py" summarize "$@"; }  # summarize LABEL METRICS_JSONL

# apart NAME [NETSIM FLAGS...] -- TRAIN ARGS...: three sites launched apart
# (their folders and logs under $out/NAME).
apart() {
  local name=$1 flags=()
  shift
  while [[ $1 != -- ]]; do flags+=("$1"); shift; done
  shift
  scripts/netsim --sites 3 --mbps "$MBPS" --latency-ms "$LATENCY" --rendezvous "$out/$name" "${flags[@]}" -- \
    "$@" --set rendezvous.run_id="apart-$$-$name" >"$out/$name.log" 2>&1 ||
    { tail -20 "$out/$name.log" "$out/$name"/site-*.log; exit 1; }
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
  apart "apart-$name" -- "${common[@]}" "$@"
  summarize "$label, sites launched apart" "$out/apart-$name/site-0/metrics.jsonl"
}
for mode in none delayed streaming; do
  run "$mode" "$mode" --set sync.overlap=$mode
done
# H from the measured links and steps: the fastest site's H keeps the
# exposed exchange near the target share, every other site runs as many
# steps as fit in the same time (per-site H).
run "delayed, time-budget" budget --set sync.overlap=delayed --set sync.schedule=time-budget
# The baseline: data parallelism (every step's gradients averaged, same
# codec) over the same links, with the keys it takes no use for reset.
run "data-parallel" dp --set sync.mode=data-parallel --set sync.overlap=none --set sync.fragments=1 \
  --set sync.overlap_steps=0 --set outer.momentum=0.9

# The fault: the rounds of membership changes are left out with the round
# before each (delayed overlap drains it before an admission) and after
# (a joined site's state transfer, a redone exchange), first and last as
# above.
# A wait between sites gives up after 5 s (sync.timeout_s; the default 300 s
# is for real links): a killed site whose sockets closed is noticed at once,
# one whose death no socket reported at the deadline.
fault_common=(train recipes/streaming.toml --set outer.rounds="$FAULT_ROUNDS" --set sync.overlap=delayed
  --set sync.timeout_s=5 "$@")
apart calm -- "${fault_common[@]}"
apart fault --relaunch 2@"$RELAUNCH_ROUND" -- "${fault_common[@]}" --set debug.fault_site=2 \
  --set debug.fault_signal=kill --set debug.fault_phase=inner --set debug.fault_round="$KILL_ROUND"
echo
echo "Delayed overlap, sites launched apart, $FAULT_ROUNDS rounds: site 2 killed at round $KILL_ROUND, launched again at round $RELAUNCH_ROUND"
echo
echo "| run | rounds measured | utilization, mean | utilization, lowest | membership changes (round: what) | final eval loss | loss vs no fault |"
echo "|---|---:|---:|---:|---|---:|---:|"
python3 "$out/tables.py" fault "$out/calm/site-0/metrics.jsonl" "$out/fault/site-0/metrics.jsonl"
