# Reliability end to end: exact resume after SIGTERM, fail-fast when a rank is
# killed or frozen (then --resume auto), falling back from a corrupt newest
# checkpoint, NaN at one site, and a full disk while checkpointing.
source "$(dirname "$0")/lib.sh"

# Small and quick; checkpoints every 2 rounds.
base=(recipes/quickstart.toml --set model.d_model=64 --set sync.H=5 --set outer.rounds=8
      --set checkpoint.every=2 --set metrics.eval_every=1 --set sync.timeout_s=5)

same_rows() {  # same_rows A B FIRST: rows FIRST.. of A and B agree on every loss and count
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
first = int(sys.argv[3])
assert len(a) == len(b), f"{len(a)} rows vs {len(b)}"
for x, y in zip(a[first - 1:], b[first - 1:]):
    for k in ("round", "train_loss", "eval_loss", "tokens", "bytes_sent", "excluded_total"):
        assert x[k] == y[k], f"round {x['round']}: {k} {x[k]} != {y[k]}"
PY
}

# 1. Uninterrupted reference.
mpi 4 "$DILOCO_BIN" train "${base[@]}" --out "$WORK/ref" > "$WORK/ref.log" 2>&1 || { cat "$WORK/ref.log"; fail "reference run"; }

# 2. SIGTERM to one rank after round 3: every rank stops at the round boundary,
#    checkpoints, exits 0; the resumed run's later rounds equal the reference.
mpi 4 "$DILOCO_BIN" train "${base[@]}" --out "$WORK/term" > "$WORK/term.log" 2>&1 &
job=$!
wait_rows "$WORK/term/metrics.jsonl" 3 && kill -TERM "$(rank_pid "$WORK/term" 2)"
wait $job; rc=$?
[[ $rc -eq 0 ]] && pass "SIGTERM: clean exit" || { tail -20 "$WORK/term.log"; fail "SIGTERM: exit $rc"; }
grep -q "stopped by a signal after round" "$WORK/term.log" && pass "SIGTERM: stop reported" || fail "SIGTERM: no stop message"
mpi 4 "$DILOCO_BIN" train "${base[@]}" --out "$WORK/term" --resume auto > "$WORK/term2.log" 2>&1 \
  || { tail -20 "$WORK/term2.log"; fail "resume after SIGTERM"; }
grep -q "resuming from" "$WORK/term2.log" && pass "resumed" || fail "did not resume"
same_rows "$WORK/ref/metrics.jsonl" "$WORK/term/metrics.jsonl" 1 && pass "resume: metrics equal the uninterrupted run" \
  || fail "resume: metrics differ"

# 3. kill -9 one rank mid-round: all gone within timeout + 10 s, non-zero,
#    the lost rank named; --resume auto then finishes the run.
mpi 4 "$DILOCO_BIN" train "${base[@]}" --out "$WORK/kill" > "$WORK/kill.log" 2>&1 &
job=$!
wait_rows "$WORK/kill/metrics.jsonl" 3
victim=$(rank_pid "$WORK/kill" 3)
kill -9 "$victim"; start=$(date +%s)
wait $job; rc=$?; took=$(( $(date +%s) - start ))
[[ $rc -ne 0 && $took -le 15 ]] && pass "kill -9: job gone in ${took}s, exit $rc" || fail "kill -9: exit $rc after ${took}s"
grep -qE "process rank [0-9]+ .*signal 9" "$WORK/kill.log" && pass "kill -9: lost rank named" \
  || { tail -20 "$WORK/kill.log"; fail "kill -9: lost rank not named"; }
mpi 4 "$DILOCO_BIN" train "${base[@]}" --out "$WORK/kill" --resume auto > "$WORK/kill2.log" 2>&1 \
  && [[ $(rows "$WORK/kill/metrics.jsonl") -eq 8 ]] && pass "kill -9: --resume auto finished the run" \
  || { tail -20 "$WORK/kill2.log"; fail "kill -9: resume"; }
same_rows "$WORK/ref/metrics.jsonl" "$WORK/kill/metrics.jsonl" 1 && pass "kill -9: resumed metrics equal the reference" \
  || fail "kill -9: resumed metrics differ"

# 4. SIGSTOP one rank: a frozen process counts as not answering.
mpi 4 "$DILOCO_BIN" train "${base[@]}" --out "$WORK/stop" > "$WORK/stop.log" 2>&1 &
job=$!
wait_rows "$WORK/stop/metrics.jsonl" 3
victim=$(rank_pid "$WORK/stop" 4)
kill -STOP "$victim"; start=$(date +%s)
wait $job; rc=$?; took=$(( $(date +%s) - start ))
kill -9 "$victim" 2>/dev/null
[[ $rc -ne 0 && $took -le 15 ]] && pass "SIGSTOP: job gone in ${took}s, exit $rc" || fail "SIGSTOP: exit $rc after ${took}s"
grep -q "lost: rank 3 (site 1)" "$WORK/stop.log" && pass "SIGSTOP: frozen rank named" \
  || { grep diloco: "$WORK/stop.log"; fail "SIGSTOP: frozen rank not named"; }

# 5. Corrupt newest checkpoint: truncated, then one byte flipped; resume falls
#    back to the previous one, says so, and training continues.
for damage in truncate flip; do
  d="$WORK/corrupt_$damage"
  mpi 4 "$DILOCO_BIN" train "${base[@]}" --set outer.rounds=4 --out "$d" > /dev/null 2>&1 || fail "$damage: first run"
  newest="$d/checkpoints/ckpt-00000004"
  if [[ $damage == truncate ]]; then
    truncate -s 100 "$newest/site-1.bin"
  else
    python3 -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[len(b)//2]^=1; open(p,"wb").write(b)' "$newest/global.bin"
  fi
  expect_exit 2 "does not verify" "$damage: inspect refuses" -- "$DILOCO_BIN" inspect "$newest"
  out=$(mpi 4 "$DILOCO_BIN" train "${base[@]}" --set outer.rounds=6 --out "$d" --resume auto 2>&1); rc=$?
  if [[ $rc -eq 0 && "$out" == *"ckpt-00000004 is unusable"* && "$out" == *"resuming from $d/checkpoints/ckpt-00000002"* ]]; then
    pass "$damage: fell back to round 2 and finished"
  else
    echo "$out" | tail -20; fail "$damage: no fallback (exit $rc)"
  fi
done

# 6. NaN at site 1 in round 3: left out of that round, recorded, run finishes finite.
mpi 4 "$DILOCO_BIN" train "${base[@]}" --set debug.nan_site=1 --set debug.nan_round=3 --out "$WORK/nan" \
  > "$WORK/nan.log" 2>&1 || fail "NaN run failed"
python3 - "$WORK/nan/metrics.jsonl" <<'PY' && pass "NaN: round 3 excluded site 1, loss finite" || fail "NaN: exclusion not recorded"
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert rows[2]["excluded"] == [{"site": 1, "reason": "non-finite"}], rows[2]
assert all(r["excluded"] == [] for i, r in enumerate(rows) if i != 2)
assert rows[-1]["excluded_total"] == 1 and math.isfinite(rows[-1]["eval_loss"])
PY

# 5b. A checkpoint whose checksums hold but whose content does not parse (a
#     scheduler state size far beyond the file): inspect and resume name the
#     file, exit 2, and --resume auto falls back to the one before.
d="$WORK/malformed"
mpi 4 "$DILOCO_BIN" train "${base[@]}" --set outer.rounds=4 --out "$d" > /dev/null 2>&1 || fail "malformed: first run"
python3 - "$d/checkpoints/ckpt-00000004" <<'PY' || fail "malformed: could not craft the checkpoint"
import struct, sys
def crc32c(data, table=[]):
    if not table:
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            table.append(c)
    c = 0xFFFFFFFF
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF
ckpt = sys.argv[1]
blob = bytearray(open(f"{ckpt}/global.bin", "rb").read())
# global.bin ends with the scheduler state: a count k, then k doubles.
k = next(k for k in range(1000) if struct.unpack_from("<Q", blob, len(blob) - 8 * k - 8)[0] == k)
struct.pack_into("<Q", blob, len(blob) - 8 * k - 8, 1 << 40)
open(f"{ckpt}/global.bin", "wb").write(blob)
lines = open(f"{ckpt}/MANIFEST").read().splitlines()
body = "".join(
    (f"file global.bin {len(blob)} {crc32c(blob)}" if l.startswith("file global.bin ") else l) + "\n"
    for l in lines if not l.startswith("crc "))
open(f"{ckpt}/MANIFEST", "w").write(body + f"crc {crc32c(body.encode())}\n")
PY
expect_exit 2 "ckpt-00000004/global.bin: scheduler state size" "malformed: inspect names the file" -- \
  "$DILOCO_BIN" inspect "$d/checkpoints/ckpt-00000004"
expect_exit 2 "ckpt-00000004/global.bin: scheduler state size" "malformed: --resume CKPT refuses" -- \
  mpi 4 "$DILOCO_BIN" train "${base[@]}" --set outer.rounds=6 --out "$d" --resume "$d/checkpoints/ckpt-00000004"
out=$(mpi 4 "$DILOCO_BIN" train "${base[@]}" --set outer.rounds=6 --out "$d" --resume auto 2>&1); rc=$?
[[ $rc -eq 0 && "$out" == *"scheduler state size"* && "$out" == *"resuming from $d/checkpoints/ckpt-00000002"* ]] \
  && pass "malformed: --resume auto fell back to round 2" || { echo "$out" | tail -20; fail "malformed: no fallback (exit $rc)"; }

# 5c. keep = 1 and the only checkpoint corrupt: the fresh start sets it aside
#     (never deleted) instead of pruning the new one; a second crash then still
#     finds the new one.
d="$WORK/keep1"
k1=("${base[@]}" --set checkpoint.keep=1 --out "$d")
mpi 4 "$DILOCO_BIN" train "${k1[@]}" --set outer.rounds=4 > /dev/null 2>&1 || fail "keep1: first run"
truncate -s 100 "$d/checkpoints/ckpt-00000004/global.bin"
mpi 4 "$DILOCO_BIN" train "${k1[@]}" --set outer.rounds=2 --resume auto > "$WORK/keep1.log" 2>&1 || fail "keep1: fresh run"
if [[ -d "$d/checkpoints/ckpt-00000002" ]] && ls -d "$d"/checkpoints/abandoned-*/ckpt-00000004 > /dev/null 2>&1; then
  pass "keep1: new checkpoint kept, the abandoned one set aside"
else
  ls -R "$d/checkpoints"; fail "keep1: checkpoints lost"
fi
out=$(mpi 4 "$DILOCO_BIN" train "${k1[@]}" --set outer.rounds=3 --resume auto 2>&1)
[[ "$out" == *"resuming from $d/checkpoints/ckpt-00000002"* ]] && pass "keep1: second resume finds round 2" \
  || { echo "$out" | tail; fail "keep1: second resume"; }

# 5d. A manual --resume of an older checkpoint abandons the newer ones: a
#     later --resume auto continues the resumed run, not the abandoned future.
d="$WORK/manual"
m=("${base[@]}" --set checkpoint.keep=3 --out "$d")
mpi 4 "$DILOCO_BIN" train "${m[@]}" --set outer.rounds=6 > /dev/null 2>&1 || fail "manual: first run"
mpi 4 "$DILOCO_BIN" train "${m[@]}" --set outer.rounds=3 --resume "$d/checkpoints/ckpt-00000002" \
  > /dev/null 2>&1 || fail "manual: resume of round 2"
out=$(mpi 4 "$DILOCO_BIN" train "${m[@]}" --set outer.rounds=4 --resume auto 2>&1)
[[ "$out" == *"resuming from $d/checkpoints/ckpt-00000003"* ]] && ls -d "$d"/checkpoints/abandoned-*/ckpt-00000006 > /dev/null \
  && pass "manual: auto continues from round 3; rounds 4 and 6 set aside" || { echo "$out" | tail; fail "manual: auto jumped"; }

# 5e. A metrics row torn by a crash: resume drops it with a warning and
#     rewrites the file; the run finishes with one row per round.
d="$WORK/torn"
mpi 4 "$DILOCO_BIN" train "${base[@]}" --set outer.rounds=4 --out "$d" > /dev/null 2>&1 || fail "torn: first run"
printf '{"round":' >> "$d/metrics.jsonl"
out=$(mpi 4 "$DILOCO_BIN" train "${base[@]}" --set outer.rounds=6 --out "$d" --resume auto 2>&1); rc=$?
[[ $rc -eq 0 && "$out" == *"dropped a metrics row"* && $(rows "$d/metrics.jsonl") -eq 6 ]] \
  && pass "torn metrics row: dropped with a warning, run finished" || { echo "$out" | tail; fail "torn metrics row (exit $rc)"; }

# --resume with a folder that is not a valid checkpoint.
expect_exit 2 "--resume $WORK/nope" "--resume PATH that does not verify" -- \
  mpi 2 "$DILOCO_BIN" train "${base[@]}" --set topology.sites=1 --out "$WORK/nope_run" --resume "$WORK/nope"

# 7. Bad input: a checkpoint of another model shape, and a full disk while
#    checkpointing (earlier checkpoints stay intact).
expect_exit 2 "holds a model of" "checkpoint of another model" -- \
  mpi 4 "$DILOCO_BIN" train "${base[@]}" --set model.d_model=32 --out "$WORK/ref" --resume auto
size_kb=$(du -sk "$WORK/ref/checkpoints/ckpt-00000008" | cut -f1)
mnt="$WORK/small_disk"; mkdir -p "$mnt"
if mount -t tmpfs -o size=$(( size_kb * 3 / 2 ))k tmpfs "$mnt" 2>/dev/null; then
  expect_exit 2 "checkpoint of round 2 failed" "full disk" -- \
    mpi 4 "$DILOCO_BIN" train "${base[@]}" --set checkpoint.every=1 --set checkpoint.keep=2 \
      --set "checkpoint.dir=\"$mnt\"" --out "$WORK/full"
  "$DILOCO_BIN" inspect "$mnt/ckpt-00000001" > /dev/null && pass "full disk: previous checkpoint intact" \
    || fail "full disk: previous checkpoint damaged"
  ls "$mnt" | grep -q tmp && fail "full disk: staging folder left behind" || pass "full disk: nothing half-written left"
  umount "$mnt"
else
  echo "SKIP: full-disk case needs a tmpfs mount (root); not run"
fi
# 8. An error that shows only at close (a quota on NFS or Lustre), injected
#    into the second checkpoint's global.bin: exit 2 naming close, the first
#    checkpoint intact, nothing half-written published.
d="$WORK/close"
FAIL_CLOSE_MATCH=global.bin.partial FAIL_CLOSE_SKIP=1 LD_PRELOAD="$FAIL_CLOSE_LIB" \
  expect_exit 2 "checkpoint of round 2 failed: cannot write $d/checkpoints/ckpt-00000002.tmp/global.bin.partial: close: Disk quota exceeded" \
  "error at close: exit 2, named" -- \
  mpi 4 "$DILOCO_BIN" train "${base[@]}" --set checkpoint.every=1 --set checkpoint.keep=2 --out "$d"
"$DILOCO_BIN" inspect "$d/checkpoints/ckpt-00000001" > /dev/null && [[ ! -e "$d/checkpoints/ckpt-00000002" ]] \
  && ! ls "$d/checkpoints" | grep -q tmp && pass "error at close: round 1 intact, round 2 not published" \
  || { ls -R "$d/checkpoints"; fail "error at close: checkpoints damaged"; }
finish
