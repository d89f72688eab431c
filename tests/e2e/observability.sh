# What a run shows: one short 2-site run with metrics.tensorboard on, then
# - its event file read back by an independent reader (Python's protobuf
#   runtime, CRC32C computed in Python): every record's CRCs, every scalar
#   equal to metrics.jsonl; a corrupted record detected;
# - the round line's tokens/s, MFU and time left, and `diloco status` of the
#   finished run, of one still running, and of sites launched apart;
# - `diloco report` opened in headless Chromium: no console error, every
#   chart has its series; a screenshot kept in DILOCO_TEST_OUT.
source "$(dirname "$0")/lib.sh"
OUT_DIR=${DILOCO_TEST_OUT:-$WORK/out}
mkdir -p "$OUT_DIR"

run="$WORK/two-sites"
if ! mpi 2 "$DILOCO_BIN" train recipes/quickstart.toml --set topology.sites=2 --set model.d_model=32 \
    --set sync.H=5 --set outer.rounds=4 --set metrics.eval_every=2 --set metrics.tensorboard=true \
    --set metrics.peak_tflops=0.05 --set 'links.latency_ms=[2.0, 2.0]' --set 'links.bandwidth_mbps=[200.0, 200.0]' \
    --set sync.reprobe_every=2 --set checkpoint.every=0 --out "$run" > "$WORK/train.log" 2>&1; then
  cat "$WORK/train.log"; fail "training run"; finish
fi

# The event file against metrics.jsonl, by a reader that shares only the .proto.
proto="$WORK/proto"
mkdir -p "$proto"
protoc --proto_path=src/metrics --python_out="$proto" src/metrics/tensorboard.proto
/usr/bin/python3 tests/e2e/read_events.py "$proto" "$run" && pass "event file: CRCs and values equal metrics.jsonl" \
  || fail "event file against metrics.jsonl"
bad="$WORK/corrupt"
mkdir -p "$bad/tb"
cp "$run/metrics.jsonl" "$bad/"
events=$(ls "$run"/tb/events.out.tfevents.*)
cp "$events" "$bad/tb/"
size=$(stat -c %s "$events")
printf '\x7f' | dd of="$bad/tb/$(basename "$events")" bs=1 seek=$((size / 2)) conv=notrunc status=none
expect_exit 1 "CRC mismatch" "a corrupted record is detected" -- /usr/bin/python3 tests/e2e/read_events.py "$proto" "$bad"

# The round line and the banner's word on MFU.
# (on a terminal, as under mpirun, the line overwrites the live step counter)
grep -aqE "round +4/4 +H 5 .* [0-9.]+K? tok/s  MFU [0-9.]+%  left 0s$" "$WORK/train.log" \
  && pass "round line: tok/s, MFU, time left" || { grep -a "round " "$WORK/train.log"; fail "round line"; }
grep -q "MFU: against 0.05 TFLOP/s per rank (metrics.peak_tflops)" "$WORK/train.log" && pass "banner says where the peak is from" \
  || fail "banner: MFU source"

# status: finished; still running (two rounds and a line being written); sites launched apart.
"$DILOCO_BIN" status "$run" > "$WORK/status" 2>&1 && grep -q "two-sites (finished)" "$WORK/status" \
  && grep -qE "round +4/4 .*tok/s" "$WORK/status" && pass "status of a finished run" || { cat "$WORK/status"; fail "status finished"; }
running="$WORK/running"
mkdir -p "$running"
cp "$run/recipe.toml" "$running/"
{ head -2 "$run/metrics.jsonl"; printf '{"round": 3, "H"'; } > "$running/metrics.jsonl"
"$DILOCO_BIN" status "$running" > "$WORK/status" 2>&1 && grep -q "not finished: last round written" "$WORK/status" \
  && grep -qE "round +2/4 .* left [0-9]+s" "$WORK/status" && pass "status of a running run" || { cat "$WORK/status"; fail "status running"; }
apart="$WORK/apart"
for s in 0 1; do mkdir -p "$apart/site-$s" && cp "$run/metrics.jsonl" "$run/recipe.toml" "$apart/site-$s/"; done
"$DILOCO_BIN" status "$apart" > "$WORK/status" 2>&1 && grep -q "apart/site-0 (finished)" "$WORK/status" \
  && grep -q "apart/site-1 (finished)" "$WORK/status" && pass "status of sites launched apart" || { cat "$WORK/status"; fail "status apart"; }
expect_exit 2 "no such run folder" "status of a missing folder" -- "$DILOCO_BIN" status "$WORK/nowhere"

# A run with membership changes, as sites launched apart write them: the
# rows above with a site lost in round 2 and joined in round 4.
members="$WORK/membership"
mkdir -p "$members"
/usr/bin/python3 - "$run/metrics.jsonl" "$members/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows:
    r["epoch"], r["members"], r["membership"] = (1, 3, []) if r["round"] < 2 else (2, 2, []) if r["round"] < 4 else (3, 3, [])
rows[1]["membership"] = [{"epoch": 2, "left": ["site-2"], "joined": [], "refused": [], "why": "deadline passed", "seconds": 7.2}]
rows[3]["membership"] = [{"epoch": 3, "left": [], "joined": ["site-2"], "refused": ["site-9: another model"], "why": "", "seconds": 1.1}]
open(sys.argv[2], "w").write("".join(json.dumps(r) + "\n" for r in rows))
PY
"$DILOCO_BIN" report "$run" "$members" --out "$OUT_DIR/report.html" > "$WORK/report.log" 2>&1 \
  && grep -q "wrote $OUT_DIR/report.html" "$WORK/report.log" && pass "report written" || { cat "$WORK/report.log"; fail "report"; }
expect_exit 2 "missing --out" "report without --out" -- "$DILOCO_BIN" report "$run"

# The page in headless Chromium: the DOM after its scripts ran, then a screenshot.
browser=(chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --enable-logging=stderr --v=0
         --virtual-time-budget=10000 --window-size=1400,5200)
timeout 60 "${browser[@]}" --dump-dom "file://$OUT_DIR/report.html" > "$WORK/dom.html" 2> "$WORK/chromium.log"
/usr/bin/python3 - "$WORK/dom.html" "$WORK/chromium.log" <<'PY' && pass "report in Chromium: no errors, every chart has its series" || fail "report in Chromium"
import re, sys
dom, log = open(sys.argv[1]).read(), open(sys.argv[2]).read()
console = [l for l in log.splitlines() if "CONSOLE" in l or "Uncaught" in l]
assert not console, f"console messages: {console}"
assert 'data-errors' not in dom, re.search(r'data-errors="[^"]*"', dom).group(0)
assert 'data-ready="1"' in dom, "the page's script did not finish"
charts = dict(re.findall(r'data-chart="([^"]+)" data-series="([^"]*)"', dom))
runs = ("two-sites", "membership")
want = {
    "loss_steps": [f"{r} {k}" for r in runs for k in ("eval", "train")],
    "loss_wall": [f"{r} {k}" for r in runs for k in ("eval", "train")],
    "loss_bytes": [f"{r} {k}" for r in runs for k in ("eval", "train")],
    "utilization": [f"{r} site {s}" for r in runs for s in (0, 1)],
    "H": [f"{r} site {s}" for r in runs for s in (0, 1)],
    "tokens_per_s": list(runs),
    "mfu": list(runs),
    "link_bandwidth": [f"{r} {k}" for r in runs for k in ("passive estimate", "probed 0-1")],
    "link_latency": [f"{r} {k}" for r in runs for k in ("passive estimate", "probed 0-1")],
    "membership": ["membership members", "membership joined", "membership lost", "membership refused"],
}
for chart, series in want.items():
    assert chart in charts, f"chart {chart} missing (have {sorted(charts)})"
    got = charts[chart].split("|")
    assert got == series, f"{chart}: series {got}, expected {series}"
assert len(charts) == len(want), sorted(charts)
print(len(charts), "charts, each with its series")
PY
timeout 60 "${browser[@]}" --screenshot="$OUT_DIR/report.png" "file://$OUT_DIR/report.html" > /dev/null 2>&1
[[ -s "$OUT_DIR/report.png" ]] && pass "screenshot kept in $OUT_DIR/report.png" || fail "no screenshot"
finish
