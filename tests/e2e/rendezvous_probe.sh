#!/usr/bin/env bash
# Sites launched apart are probed as they train (each site its own mpirun,
# one real ompi-server): `probe` over the recipe's emulated [links] writes
# the matrix between sites by site index, whatever order they joined in;
# `probe --all-ranks` (site 0 with two ranks, site 1 with one) writes a
# cluster file with every rank, its site, and every pair (a pair across
# sites carries its leaders' link); `plan --cluster` takes the sites as
# launched; a probe whose sites do not all join exits 2 naming the
# rendezvous.
source "$(dirname "$0")/lib.sh"
cd "$WORK"
SRC=$OLDPWD
start_ompi_server "rendezvous.run_id=probe-$$"
probe() {  # probe RECIPE INDEX RANKS LOG [ARGS...]: launches site INDEX's probe in the background
  local recipe=$1 i=$2 n=$3 log=$WORK/$4.log; shift 4
  ( timeout 150 "$MPIRUN" --ompi-server "file:$WORK/uri" -np "$n" --oversubscribe --bind-to none "$DILOCO_BIN" probe \
      "$SRC/recipes/$recipe" --set topology.join=rendezvous --set rendezvous.site="$i" \
      --set rendezvous.run_id="probe-$$" --set rendezvous.join_timeout_s=60 "$@" >"$log" 2>&1
    echo "exit $?" >>"$log" ) &
}
ended() {  # ended LOG CODE: waits for LOG's "exit N" line and checks N
  for _ in $(seq 1500); do tail -c 12 "$WORK/$1.log" | grep -qE "exit [0-9]+$" && break; sleep 0.1; done
  tail -c 12 "$WORK/$1.log" | grep -qE "exit $2$" || { fail "$1 did not end with exit $2:"; tail -5 "$WORK/$1.log"; }
}

# The three sites of cross-dc-3site.toml, launched last site first.
probe cross-dc-3site.toml 2 1 links2 --out "$WORK/l2"; sleep 1
probe cross-dc-3site.toml 1 1 links1 --out "$WORK/l1"; sleep 1
probe cross-dc-3site.toml 0 1 links0 --out "$WORK/l0"
for i in 0 1 2; do ended links$i 0; done
python3 - "$WORK" <<'PY' && pass "probe: the configured links between sites, by site index, on every site" \
  || fail "links.json"
import json, math, sys
work = sys.argv[1]
files = [json.load(open(f"{work}/l{i}/links.json")) for i in range(3)]
assert all(f == files[0] for f in files), "the sites wrote different matrices"
assert files[0]["sites"] == 3, files[0]
# site 0: 5 ms / 200 Mbit/s, site 1: 30 / 50, site 2: 80 / 20; a pair takes
# the larger latency and the smaller bandwidth. Ranks share two cores here:
# a figure is read as the configured one nearest to it on a log scale.
def nearest(x, configured):
    return min(configured, key=lambda c: abs(math.log(max(x, 1e-3) / c)))
got = {(l["a"], l["b"]): (nearest(l["latency_ms"], (5, 30, 80)), nearest(l["bandwidth_mbps"], (20, 50, 200)))
       for l in files[0]["links"]}
expected = {(0, 1): (30, 50), (0, 2): (80, 20), (1, 2): (80, 20)}
assert got == expected, (got, files[0]["links"])
PY

# Every rank of two sites: site 0 with two ranks, site 1 with one.
sets=(--set topology.sites=2 --set data.batch_size=4)
probe quickstart.toml 1 1 all1 --all-ranks --out "$WORK/a1" "${sets[@]}"
probe quickstart.toml 0 2 all0 --all-ranks --out "$WORK/a0" "${sets[@]}"
ended all0 0; ended all1 0
python3 - "$WORK" <<'PY' && pass "probe --all-ranks: every rank, its site, and every pair" || fail "cluster.json"
import json, sys
work = sys.argv[1]
c = json.load(open(f"{work}/a0/cluster.json"))
assert c == json.load(open(f"{work}/a1/cluster.json")), "the sites wrote different files"
assert [(n["rank"], n["site"]) for n in c["nodes"]] == [(0, 0), (1, 0), (2, 1)], c["nodes"]
assert all(n["step_s"] > 0 and n["exchanges" if n["rank"] != 1 else "steps"] for n in c["nodes"]), c["nodes"]
links = {(l["a"], l["b"]): (l["latency_ms"], l["bandwidth_mbps"]) for l in c["links"]}
assert sorted(links) == [(0, 1), (0, 2), (1, 2)], links
assert links[(1, 2)] == links[(0, 2)], ("a pair across sites carries its leaders' link", links)
PY
"$DILOCO_BIN" plan "$SRC/recipes/quickstart.toml" --cluster "$WORK/a0/cluster.json" "${sets[@]}" > plan.txt 2>&1 \
  && grep -q "^sites launched apart: each launch one site" plan.txt && grep -q "^site 0: ranks 0,1$" plan.txt \
  && grep -q "^site 1: ranks 2$" plan.txt && pass "plan --cluster takes the sites as they were launched" \
  || { cat plan.txt; fail "plan --cluster of sites launched apart"; }

# One of two sites never comes: exit 2, naming the rendezvous.
probe quickstart.toml 0 1 alone --set rendezvous.join_timeout_s=3 "${sets[@]}" --out "$WORK/alone"
ended alone 2
grep -q "^diloco: error: rendezvous: " "$WORK/alone.log" && pass "a probe without every site exits 2" \
  || { cat "$WORK/alone.log"; fail "the lone probe's message"; }
finish
