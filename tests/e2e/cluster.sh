# The cluster file: probe --all-ranks writes it, plan --cluster reads it and
# prints the sites topology.site_by = "links" forms and why, a run cuts its
# sites from it, and bad files are refused with exit 2 naming the file and
# the field. (Sites cut from links measured at launch, over real kernel
# shaping: tests/netsim/run_netsim.sh.)
source "$(dirname "$0")/lib.sh"

mpi 3 "$DILOCO_BIN" probe recipes/quickstart.toml --all-ranks --set data.batch_size=4 --out "$WORK/probe" \
  > "$WORK/probe.log" 2>&1 || { cat "$WORK/probe.log"; fail "probe --all-ranks"; }
python3 - "$WORK/probe/cluster.json" <<'PY' && pass "probe --all-ranks writes every rank and every pair" || fail "cluster.json"
import json, sys
c = json.load(open(sys.argv[1]))
assert [n["rank"] for n in c["nodes"]] == [0, 1, 2], c["nodes"]
assert all(n["step_s"] > 0 and n["memory_bytes"] > 0 and n["device"] == "cpu" for n in c["nodes"]), c["nodes"]
assert sorted((l["a"], l["b"]) for l in c["links"]) == [(0, 1), (0, 2), (1, 2)], c["links"]
PY
"$DILOCO_BIN" plan recipes/quickstart.toml --cluster "$WORK/probe/cluster.json" > "$WORK/plan_probed.txt" 2>&1 \
  && grep -q "^sites by links" "$WORK/plan_probed.txt" && pass "plan reads what probe --all-ranks wrote" \
  || { cat "$WORK/plan_probed.txt"; fail "plan --cluster of a probed cluster"; }

# Six ranks: 0-1, 2-3 and 4-5 on 10 Gbit/s, the pairs' sites at 1 Gbit/s,
# 100 Mbit/s and 20 Mbit/s (a pair runs at the slower of its two sites).
python3 - "$WORK/six.json" <<'PY'
import json, sys
site_mbps = [1000, 100, 20]
nodes = [{"rank": r, "host": f"dc{r // 2}", "device": "cpu", "memory_bytes": 8e9, "step_s": 0.05 + 0.01 * r} for r in range(6)]
links = [{"a": a, "b": b, "latency_ms": 0.1 if a // 2 == b // 2 else 30.0,
          "bandwidth_mbps": 10000 if a // 2 == b // 2 else min(site_mbps[a // 2], site_mbps[b // 2])}
         for a in range(6) for b in range(a + 1, 6)]
json.dump({"nodes": nodes, "links": links}, open(sys.argv[1], "w"))
PY
"$DILOCO_BIN" plan recipes/quickstart.toml --cluster "$WORK/six.json" > "$WORK/plan6.txt" 2>&1 \
  || { cat "$WORK/plan6.txt"; fail "plan --cluster"; }
grep -q "^site 0: ranks 0,1;" "$WORK/plan6.txt" && grep -q "^site 1: ranks 2,3;" "$WORK/plan6.txt" \
  && grep -q "^site 2: ranks 4,5;" "$WORK/plan6.txt" && grep -q "from 10000.0 Mbit/s to 100.0 Mbit/s" "$WORK/plan6.txt" \
  && grep -q "^plan for quickstart: 3 sites, .* inner step 0.1000 s (the cluster's slowest rank)" "$WORK/plan6.txt" \
  && pass "plan --cluster: 3 sites cut at the drop, the slowest rank's step" || { cat "$WORK/plan6.txt"; fail "plan6"; }

# A goal: the plan it picks, as flags a recipe takes.
"$DILOCO_BIN" plan recipes/quickstart.toml --cluster "$WORK/six.json" --goal utilization=0.9 > "$WORK/goal.txt" 2>&1 \
  || { cat "$WORK/goal.txt"; fail "plan --goal"; }
flags=$(grep -A1 "^as flags:" "$WORK/goal.txt" | tail -1 | sed "s/^ *//")
grep -q "^recommended (goal utilization=0.9; the smallest H reaching utilization 0.900" "$WORK/goal.txt" \
  && [[ $flags == --set* ]] && pass "plan --goal utilization=0.9 recommends a plan" || { cat "$WORK/goal.txt"; fail "goal"; }
# shellcheck disable=SC2086  # the flags are words
"$DILOCO_BIN" check recipes/quickstart.toml $flags --set topology.sites=3 > /dev/null 2>&1 \
  && pass "the recommended flags make a valid recipe ($flags)" || fail "recommended flags refused: $flags"
expect_exit 2 "--goal must be utilization=U, bytes or time" "an unknown goal" -- \
  "$DILOCO_BIN" plan recipes/quickstart.toml --cluster "$WORK/six.json" --goal speed
# The DiLoCo paper's 150M model on 3 sites of 2 ranks at 1 Gbit/s, 100 Mbit/s, 20 Mbit/s.
printf '[run]\nname = "paper-150m"\n[model]\npreset = "diloco-150m"\n[data]\nbatch_size = 16\n[topology]\nsites = 3\n' \
  > "$WORK/p150.toml"
"$DILOCO_BIN" plan "$WORK/p150.toml" --cluster "$WORK/six.json" \
  --goal bytes > "$WORK/plan150.txt" 2>&1 && grep -q "^plan for paper-150m: 3 sites, 1[45][0-9]\{7\} params" "$WORK/plan150.txt" \
  && grep -q "^recommended (goal bytes" "$WORK/plan150.txt" && pass "plan for the 150M model recommends a plan" \
  || { cat "$WORK/plan150.txt"; fail "plan of the 150M model"; }
# Memory per rank against what each rank reported: rank 5 has 3 GB, too
# little for batch 16 of the 150M model; the batch the plan names fits.
python3 -c "import json; c = json.load(open('$WORK/six.json')); c['nodes'][5]['memory_bytes'] = 3e9; json.dump(c, open('$WORK/small.json', 'w'))"
"$DILOCO_BIN" plan "$WORK/p150.toml" --cluster "$WORK/small.json" > "$WORK/mem150.txt" 2>&1
fits=$(sed -n 's/.*cpu: needs [0-9]* MB of 3000 MB - does not fit in 3000 MB: data.batch_size = \([0-9]*\) fits.*/\1/p' "$WORK/mem150.txt")
grep -q "^memory per rank, MB (batch 16, fp32, codec none, overlap none" "$WORK/mem150.txt" \
  && [[ $(grep -c "cpu: needs [0-9]* MB of 8000 MB, fits" "$WORK/mem150.txt") -eq 5 ]] && [[ -n $fits ]] \
  && "$DILOCO_BIN" plan "$WORK/p150.toml" --set data.batch_size="$fits" --cluster "$WORK/small.json" \
     | grep -q "cpu: needs [0-9]* MB of 3000 MB, fits" \
  && ! "$DILOCO_BIN" plan "$WORK/p150.toml" --set data.batch_size=$((fits + 1)) --cluster "$WORK/small.json" \
     | grep -q "cpu: needs [0-9]* MB of 3000 MB, fits" \
  && pass "plan prints each rank's memory, marks the rank that does not fit and the largest batch that does ($fits)" \
  || { cat "$WORK/mem150.txt"; fail "memory per rank of the 150M model"; }

mpi 6 "$DILOCO_BIN" train recipes/quickstart.toml --set 'topology.site_by="links"' \
  --set "topology.cluster=\"$WORK/six.json\"" --set topology.sites=3 --set outer.rounds=1 --set sync.H=5 \
  --set data.batch_size=4 --out "$WORK/train6" > "$WORK/train6.log" 2>&1 || { cat "$WORK/train6.log"; fail "train by links"; }
grep -q "summary (3 sites, 6 ranks)" "$WORK/train6.log" && pass "a run forms the 3 sites from the cluster file" \
  || { cat "$WORK/train6.log"; fail "sites of the run"; }
expect_exit 2 'topology.sites = 2 but topology.site_by = "links" finds 3 sites' "a site count the links contradict" -- \
  timeout 300 "$MPIRUN" -np 6 --oversubscribe --bind-to none "$DILOCO_BIN" train recipes/quickstart.toml \
  --set 'topology.site_by="links"' --set "topology.cluster=\"$WORK/six.json\"" --set outer.rounds=1 --out "$WORK/bad6"
expect_exit 2 "describes 6 ranks; this launch has 2" "a cluster file of another size" -- \
  timeout 300 "$MPIRUN" -np 2 --oversubscribe --bind-to none "$DILOCO_BIN" train recipes/quickstart.toml \
  --set 'topology.site_by="links"' --set "topology.cluster=\"$WORK/six.json\"" --set topology.sites=3 --out "$WORK/bad2"
expect_exit 2 'topology.cluster is read only with topology.site_by = "links"' "cluster without site_by links" -- \
  "$DILOCO_BIN" check recipes/quickstart.toml --set "topology.cluster=\"$WORK/six.json\""

bad_cluster() {  # bad_cluster NAME NEEDLE PYTHON-EDIT (of c, the six-rank cluster)
  python3 -c "import json; c = json.load(open('$WORK/six.json')); $3; open('$WORK/$1.json', 'w').write(c if isinstance(c, str) else json.dumps(c))"
  expect_exit 2 "$WORK/$1.json: $2" "plan --cluster refuses $1" -- \
    "$DILOCO_BIN" plan recipes/quickstart.toml --cluster "$WORK/$1.json"
}
bad_cluster not-json "not JSON" "c = json.dumps(c)[:40]"
bad_cluster missing-field 'nodes[3]: missing number "step_s"' "del c['nodes'][3]['step_s']"
bad_cluster rank-twice "nodes[4].rank: rank 2 given twice" "c['nodes'][4]['rank'] = 2"
bad_cluster negative "links[7].bandwidth_mbps must be a number >= 0" "c['links'][7]['bandwidth_mbps'] = -100"
bad_cluster pair-twice "links[1]: pair (0, 1) given twice" "c['links'][1]['b'] = 1"
bad_cluster no-nodes 'needs a non-empty "nodes" array' "del c['nodes']"
finish
