# The planner against real runs: 3 sites as network namespaces with links
# shaped by tc (40, 20 and 10 Mbit/s, each site's uplink and downlink). `probe --all-ranks` measures the
# cluster (every rank's steps while all step at once, without and with
# exchanges on the comm threads, and every pair's link);
# `plan --cluster --goal` recommends a plan and predicts its round time,
# utilization and each rank's peak memory; the plan then trains across the
# same namespaces. Measured against predicted: round time and utilization
# within 10%, peak RSS within 15%. Those targets are a benchmark's
# (scripts/bench --only plan sets PLAN_TARGETS=1 and reports them in
# BENCHMARKS.md): the machine's speed drifts by up to 10% between the probe
# and the run minutes later, so as a test this holds each figure within a
# factor of 1.5 (a broken model, not a slow minute) and prints whether the
# targets were met. Exits 77 (skipped) only when the machine cannot create
# namespaces or tc qdiscs. Usage: plan_check.sh [GOAL] [extra --set ...]
# PLAN_MBPS=100,50,20,10 shapes that many sites at those rates instead
# (each site's uplink and downlink); PLAN_OLD_BIN=PATH also prints what an
# earlier diloco binary's planner predicts for the same plan and run (the
# exchange, the utilization, and a blocking plan's round time).
source "$(dirname "$0")/../e2e/lib.sh"
check=$(scripts/netsim --check); rc=$?
if [[ $rc -eq 77 ]]; then echo "SKIP: $check"; exit 77; fi
[[ $rc -eq 0 ]] || { echo "FAIL: netsim --check exited $rc: $check"; exit 1; }

goal=${1:-bytes}
shift || true
recipe=recipes/quickstart.toml
# Checkpoints and evaluations between rounds are not in the round model.
# The probe times exchanges with the recipe's codec (how much an exchange's
# time varies, and a small all-reduce behind one): int4, the codec the goals
# here pick on these links, whose exchanges are short enough for the probe
# to time a dozen (uncompressed, 2 s each, it times two).
mbps=${PLAN_MBPS:-40,20,10}
sites=$(awk -F, '{print NF}' <<< "$mbps")
common=(--set topology.sites=$sites --set data.batch_size=8 --set checkpoint.every=0 --set metrics.eval_every=1000
        --set compression.codec=int4 "$@")
shaping=(--sites "$sites" --mbps "$mbps")

timeout 300 scripts/netsim "${shaping[@]}" --bin "$DILOCO_BIN" -- \
  probe "$recipe" --all-ranks "${common[@]}" --out "$WORK/probe" > "$WORK/probe.log" 2>&1 \
  || { cat "$WORK/probe.log"; fail "probe --all-ranks across namespaces"; finish; }
"$DILOCO_BIN" plan "$recipe" "${common[@]}" --cluster "$WORK/probe/cluster.json" --goal "$goal" \
  > "$WORK/plan.txt" 2>&1 || { cat "$WORK/plan.txt"; fail "plan --cluster --goal $goal"; finish; }
grep -A3 "^recommended" "$WORK/plan.txt"
grep -q "^recommended (goal $goal; " "$WORK/plan.txt" || { cat "$WORK/plan.txt"; fail "no plan recommended"; finish; }

# The recommended plan as flags, then run across the namespaces.
read -r -a flags <<< "$(grep -A1 '^as flags:' "$WORK/plan.txt" | tail -1)"
# The prediction is of a mean round: the steady rounds (all but the first
# and the last) span 10 s at least, as long as two of the probe's timed
# stretches, so where ranks share cores one round's luck does not decide it.
round_s=$(sed -n 's/^recommended .*//; /^  .*: round \([0-9.]*\) s,.*/{s//\1/p;q}' "$WORK/plan.txt")
rounds=$(python3 -c 'import math,sys; print(min(60, max(6, math.ceil(10 / float(sys.argv[1])) + 2)))' "$round_s")
timeout 600 scripts/netsim "${shaping[@]}" --bin "$DILOCO_BIN" -- \
  train "$recipe" "${common[@]}" "${flags[@]}" --set outer.rounds=$rounds --out "$WORK/train" > "$WORK/train.log" 2>&1 \
  && [[ $(rows "$WORK/train/metrics.jsonl") -eq $rounds ]] && pass "the recommended plan trains across $sites namespaces" \
  || { grep -v "^Warning: sch_htb" "$WORK/train.log" | tail -30; fail "training the recommended plan"; finish; }

# An earlier planner's prediction of the same plan, from its what-if table
# (the plan's codec at its H): the exchange, and a blocking round.
if [[ -n ${PLAN_OLD_BIN:-} ]]; then
  "$PLAN_OLD_BIN" plan "$recipe" "${common[@]}" "${flags[@]}" --cluster "$WORK/probe/cluster.json" \
    > "$WORK/old_plan.txt" 2>&1 || { cat "$WORK/old_plan.txt"; fail "plan with $PLAN_OLD_BIN"; }
fi
python3 - "$WORK/plan.txt" "$WORK/train/metrics.jsonl" "$WORK/train.log" "$WORK/old_plan.txt" <<'PY'
import json, os, re, sys
plan = open(sys.argv[1]).read()
rec = re.search(r"^recommended .*\n  (\S+), overlap (\S+), H (\d+): round ([\d.]+) s, exposed communication ([\d.]+) s, "
                r"utilization ([\d.]+)%.*; exchange ([\d.]+) s \((\S+)\)", plan, re.M)
codec, overlap, H = rec.group(1), rec.group(2), int(rec.group(3))
round_s, exposed, util = float(rec.group(4)), float(rec.group(5)), float(rec.group(6)) / 100
sync_s, algorithm = float(rec.group(7)), rec.group(8)
old = {}
if os.path.exists(sys.argv[4]):
    for line in open(sys.argv[4]):
        f = line.split()
        if len(f) >= 8 and f[0] == codec and f[2] == str(H):
            old = {"exchange (s)": float(f[4])}
            # Its table: a blocking round's time, and each mode's utilization.
            column = {"none": 7, "delayed": 8, "streaming": 9}[overlap]
            old["utilization (slowest site)"] = float(f[column].rstrip("%")) / 100
            if overlap == "none":
                old["round time (s)"] = float(f[3])
# The last memory table is the recommended plan's; every rank of 1-rank sites leads.
needs = [float(m) for m in re.findall(r"needs (\d+) MB of", plan.split("as flags:")[-1])] or \
        [float(m) for m in re.findall(r"needs (\d+) MB of", plan)]
rows = [json.loads(l) for l in open(sys.argv[2])]
# Round 1 starts the processes' pools and caches; the last one drains the
# delayed exchange: the rounds between are the steady state the model predicts.
# wall_s counts from the start of the run. The model's utilization is the
# slowest site's (the round waits for it; a faster site waits too): H times
# that site's mean step over the round, from site_step_s.
steady = rows[1:-1]
wall = (rows[-2]["wall_s"] - rows[0]["wall_s"]) / len(steady)
used = sum(r["H"] * max(r["site_step_s"]) / (r["wall_s"] - p["wall_s"]) for p, r in zip(rows, steady)) / len(steady)
share = sum(r["comm_share"] for r in steady) / len(steady)
exchange = sum(r["sync_s"] for r in steady) / len(steady)
rss = re.search(r"peak RSS \(largest rank\)\s+([\d.]+) (MB|GB)", open(sys.argv[3]).read())
peak = float(rss.group(1)) * (1000 if rss.group(2) == "GB" else 1)
print(f"plan: {codec}, overlap {overlap}, H {H}, exchange {algorithm}")
print(f"| quantity | predicted | measured | measured / predicted | earlier planner | measured / earlier |")
print(f"|---|---:|---:|---:|---:|---:|")
checks = [("round time (s)", round_s, wall, 0.10), ("utilization (slowest site)", util, used, 0.10),
          ("peak RSS, largest rank (MB)", max(needs), peak, 0.15)]
def earlier(name, m):
    return f"{old[name]:.3f} | {m / old[name]:.3f}" if name in old else "- | -"
met = sane = True
for name, p, m, tol in checks:
    print(f"| {name} | {p:.3f} | {m:.3f} | {m / p:.3f} | {earlier(name, m)} |")
    met &= abs(m / p - 1) <= tol
    sane &= 1 / 1.5 <= m / p <= 1.5
# The run's sync_s is its quickest leader's exchange: a late leader finds the
# others' data partly on its way, so it is a floor under the exchange's time.
print(f"| exchange, quickest leader (s) | {sync_s:.3f} | {exchange:.3f} | {exchange / sync_s:.3f} | "
      f"{earlier('exchange (s)', exchange)} |")
# Reported, not held to a target: a few percent of a round, where noise of a
# few milliseconds is a large ratio.
print(f"| exposed communication share | {exposed / round_s:.3f} | {share:.3f} | "
      f"{share / (exposed / round_s) if exposed > 0 else float('nan'):.3f} | - | - |")
print("targets (10% round time and utilization, 15% peak RSS):", "met" if met else "not met")
sys.exit(0 if (met if os.environ.get("PLAN_TARGETS") == "1" else sane) else 1)
PY
if [[ $? -eq 0 ]]; then
  pass "measured against the plan: $([[ ${PLAN_TARGETS:-} == 1 ]] && echo "within the targets" || echo "within a factor of 1.5")"
else
  fail "the plan's predictions against the run ($([[ ${PLAN_TARGETS:-} == 1 ]] && echo "outside a target" || echo "off by more than a factor of 1.5"))"
fi
finish
