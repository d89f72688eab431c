# Weights in and out: a llama run's checkpoint exported as safetensors (Hugging
# Face's Llama names), then model.init_from that file and from the checkpoint
# folder itself start identical runs; bad weight files exit 2 naming the file
# and the tensors at fault.
source "$(dirname "$0")/lib.sh"

{ cat <<'TOML'
[model]
preset = "llama-tiny"
seq_len = 32
[data]
batch_size = 4
[inner]
lr = 2e-3
warmup_steps = 5
[sync]
H = 20
[outer]
rounds = 4
[topology]
sites = 2
[checkpoint]
every = 1
[metrics]
eval_windows = 8
TOML
} > "$WORK/llama.toml"

mpi 4 "$DILOCO_BIN" train "$WORK/llama.toml" --out "$WORK/base" > "$WORK/base.log" 2>&1 \
  || { tail -20 "$WORK/base.log"; fail "llama run"; }
python3 - "$WORK/base/metrics.jsonl" <<'PY' && pass "llama (2 sites x 2 ranks) learns: eval loss below ln 256 - 1" || fail "llama did not learn"
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("eval loss per round", [round(r["eval_loss"], 3) for r in rows])
assert rows[-1]["eval_loss"] < math.log(256) - 1, rows[-1]["eval_loss"]
PY
# Exact resume for llama: stopped by SIGTERM after a round, resumed, the
# metrics equal the uninterrupted run's.
exact_resume llama "$WORK/base/metrics.jsonl" "$WORK/term" "$WORK/llama.toml"
ckpt="$WORK/base/checkpoints/ckpt-00000004"
expect_exit 0 "wrote 20 tensors" "export to safetensors" -- \
  "$DILOCO_BIN" export "$ckpt" --format safetensors --out "$WORK/tiny.safetensors"
python3 - "$WORK/tiny.safetensors" <<'PY' && pass "exported file: Hugging Face names, F32, metadata" || fail "exported file"
import json, struct, sys
blob = open(sys.argv[1], "rb").read()
n = struct.unpack_from("<Q", blob)[0]
header = json.loads(blob[8:8 + n])
meta = header.pop("__metadata__")
assert meta["format"] == "pt" and meta["diloco_round"] == "4", meta
assert "model.layers.1.self_attn.k_proj.weight" in header and "model.norm.weight" in header, sorted(header)
assert header["model.layers.0.self_attn.k_proj.weight"]["shape"] == [32, 64]  # 2 kv heads of 16
assert all(t["dtype"] == "F32" for t in header.values())
assert sum(t["data_offsets"][1] - t["data_offsets"][0] for t in header.values()) == len(blob) - 8 - n
PY

# Starting from the exported file and from the checkpoint folder gives the
# same run: the round trip is bit-identical.
for from in "$WORK/tiny.safetensors" "$ckpt"; do
  name=$(basename "$from")
  mpi 4 "$DILOCO_BIN" train "$WORK/llama.toml" --set "model.init_from=\"$from\"" --set checkpoint.every=0 --set outer.rounds=2 \
    --out "$WORK/from-$name" > "$WORK/from-$name.log" 2>&1 || { tail -20 "$WORK/from-$name.log"; fail "init_from $name"; }
done
python3 - "$WORK/from-tiny.safetensors/metrics.jsonl" "$WORK/from-ckpt-00000004/metrics.jsonl" "$WORK/base/metrics.jsonl" <<'PY' \
  && pass "init_from the export equals init_from the checkpoint, and continues below the fresh start" || fail "round trip"
import json, sys
a, b, base = ([json.loads(l) for l in open(p)] for p in sys.argv[1:4])
assert [r["train_loss"] for r in a] == [r["train_loss"] for r in b], (a, b)
assert [r["eval_loss"] for r in a] == [r["eval_loss"] for r in b]
assert a[0]["train_loss"] < base[0]["train_loss"], (a[0]["train_loss"], base[0]["train_loss"])
PY

# Bad weights: each exits 2 naming the file and what is wrong.
bad() {  # bad NEEDLE WHAT FROM [--set ...]
  local needle=$1 what=$2 from=$3; shift 3
  expect_exit 2 "$needle" "$what" -- \
    mpi 2 "$DILOCO_BIN" train "$WORK/llama.toml" --set topology.sites=1 --set "model.init_from=\"$from\"" "$@" --out "$WORK/bad"
}
bad "model.init_from: $WORK/none.safetensors: cannot open" "missing weights file" "$WORK/none.safetensors"
bad "model.init_from: recipes/quickstart.toml: header length" "not a safetensors file" recipes/quickstart.toml
bad "shapes differ: model.embed_tokens.weight (file [256, 64], model [256, 128])" "shape mismatch" \
  "$WORK/tiny.safetensors" --set model.d_model=128
bad "missing: model.layers.2.input_layernorm.weight" "missing tensors" "$WORK/tiny.safetensors" --set model.n_layers=3
bad "unexpected: model.layers.1." "unexpected tensors" "$WORK/tiny.safetensors" --set model.n_layers=1
bad "missing: lm_head.weight" "untied head not in the file" "$WORK/tiny.safetensors" --set model.tie_embeddings=false
bad "holds a model of llama vocab=256 d_model=64" "checkpoint of another model" "$ckpt" --set model.d_model=128
python3 - "$WORK/tiny.safetensors" "$WORK/cut.safetensors" <<'PY'
import sys
blob = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(blob[:-100])
PY
bad "lies outside the data" "truncated weights file" "$WORK/cut.safetensors"
expect_exit 2 "$WORK/nope: no such folder" "export of a missing checkpoint" -- \
  "$DILOCO_BIN" export "$WORK/nope" --out "$WORK/x.safetensors"
finish
