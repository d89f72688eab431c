# Overlapped exchanges end to end on recipes/streaming.toml (shortened):
# delayed and streaming resume exactly from a checkpoint, stop cleanly on
# SIGTERM mid-run (the exchange in flight drains into the checkpoint, no
# hang), and bad overlap settings are refused with the key named.
source "$(dirname "$0")/lib.sh"

short=(--set outer.rounds=6 --set sync.H=8 --set checkpoint.every=2 --set metrics.eval_every=1)
for mode in delayed streaming; do
  sets=("${short[@]}" --set "sync.overlap=$mode" --set sync.overlap_steps=2)
  mpi 2 "$DILOCO_BIN" train recipes/streaming.toml "${sets[@]}" --out "$WORK/$mode" > "$WORK/$mode.log" 2>&1 \
    || { tail -20 "$WORK/$mode.log"; fail "$mode: run"; continue; }
  [[ $(rows "$WORK/$mode/metrics.jsonl") -eq 6 ]] && pass "$mode: 6 rounds" || fail "$mode: rows"

  # Resuming from the round-4 checkpoint reproduces rounds 5 and 6 exactly.
  mkdir -p "$WORK/$mode-resumed"
  head -4 "$WORK/$mode/metrics.jsonl" > "$WORK/$mode-resumed/metrics.jsonl"
  mpi 2 "$DILOCO_BIN" train recipes/streaming.toml "${sets[@]}" --out "$WORK/$mode-resumed" \
    --resume "$WORK/$mode/checkpoints/ckpt-00000004" > "$WORK/$mode-resumed.log" 2>&1 \
    || { tail -20 "$WORK/$mode-resumed.log"; fail "$mode: resume"; continue; }
  python3 - "$WORK/$mode/metrics.jsonl" "$WORK/$mode-resumed/metrics.jsonl" <<'PY' \
    && pass "$mode: resume from round 4 equals the uninterrupted run" || fail "$mode: resume differs"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 6, (len(a), len(b))
for x, y in zip(a[4:], b[4:]):
    for k in ("train_loss", "eval_loss", "tokens"):
        assert x[k] == y[k], f"round {x['round']}: {k} {x[k]} != {y[k]}"
PY

  # SIGTERM to a rank while exchanges are in flight: a clean stop, then resume.
  mpi 2 "$DILOCO_BIN" train recipes/streaming.toml "${sets[@]}" --set checkpoint.every=0 --out "$WORK/$mode-term" \
    > "$WORK/$mode-term.log" 2>&1 &
  job=$!
  wait_rows "$WORK/$mode-term/metrics.jsonl" 2 && kill -TERM "$(rank_pid "$WORK/$mode-term" 2)"
  wait $job; rc=$?
  [[ $rc -eq 0 ]] && grep -q "stopped by a signal" "$WORK/$mode-term.log" && pass "$mode: SIGTERM stops cleanly" \
    || { tail -20 "$WORK/$mode-term.log"; fail "$mode: SIGTERM exit $rc"; }
  mpi 2 "$DILOCO_BIN" train recipes/streaming.toml "${sets[@]}" --set checkpoint.every=0 --out "$WORK/$mode-term" \
    --resume auto > "$WORK/$mode-term2.log" 2>&1 && [[ $(rows "$WORK/$mode-term/metrics.jsonl") -eq 6 ]] \
    && pass "$mode: resumed to the end" || { tail -20 "$WORK/$mode-term2.log"; fail "$mode: resume after SIGTERM"; }
done

expect_exit 2 'sync.schedule must be "fixed" with sync.overlap = "streaming"' "streaming refuses a moving H" -- \
  "$DILOCO_BIN" check recipes/streaming.toml --set sync.schedule=overhead
expect_exit 2 "sync.overlap_steps (11) must be at most sync.H / sync.fragments (10)" "overlap longer than a fragment's turn" -- \
  "$DILOCO_BIN" check recipes/streaming.toml --set sync.overlap_steps=11
expect_exit 2 "sync.fragments = 9 but the model has only 5 layers" "more fragments than layers" -- \
  mpi 2 "$DILOCO_BIN" train recipes/streaming.toml --set sync.fragments=9 --set sync.overlap_steps=1 --out "$WORK/frag"
finish
