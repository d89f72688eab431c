# Trained checkpoints put to use: export --format hf writes a folder whose
# config carries the recipe's rope_theta and norm_eps; export, import
# (model.init_from the folder) and export again are byte-identical on
# tensors and equal on config; eval of the checkpoint, of the folder, of
# Python's forward and under mpirun agree; the byte GPT exports its own
# config; a run on SentencePiece text ships its tokenizer, which sample
# decodes with and eval counts bytes through.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
head -c 8000 /usr/share/games/fortunes/fortunes > "$WORK/data.txt"
{ cat <<'TOML'
[model]
preset = "llama-tiny"
seq_len = 32
rope_theta = 500000.0
norm_eps = 1e-6
[data]
batch_size = 4
[inner]
lr = 2e-3
warmup_steps = 5
[sync]
H = 10
[outer]
rounds = 2
[topology]
sites = 2
[checkpoint]
every = 1
[metrics]
eval_windows = 4
TOML
} > "$WORK/llama.toml"
mpi 2 "$DILOCO_BIN" train "$WORK/llama.toml" --out "$WORK/run" > "$WORK/run.log" 2>&1 || { tail -20 "$WORK/run.log"; fail "llama run"; }
ckpt="$WORK/run/checkpoints/ckpt-00000002"
expect_exit 0 "config.json model.safetensors" "export --format hf" -- "$DILOCO_BIN" export "$ckpt" --format hf --out "$WORK/A"
$PY - "$WORK/A/config.json" <<'PY' && pass "config.json: LlamaForCausalLM with the recipe's theta and epsilon" || fail "config.json"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["architectures"] == ["LlamaForCausalLM"] and c["model_type"] == "llama", c
assert c["rope_theta"] == 500000.0 and c["rms_norm_eps"] == 1e-6 and c["tie_word_embeddings"] is True, c
assert (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"]) == (64, 2, 4, 2), c
assert c["max_position_embeddings"] == 32 and c["rope_scaling"] is None and c["vocab_size"] == 256, c
PY
# tensors_equal A B: every tensor's bytes and the config equal.
tensors_equal() {
  $PY - "$1" "$2" <<'PY'
import json, os, struct, sys
def tensors(folder):
    blob = open(os.path.join(folder, "model.safetensors"), "rb").read()
    n = struct.unpack_from("<Q", blob)[0]
    h = json.loads(blob[8:8 + n]); h.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], blob[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items()}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
assert a.keys() == b.keys() and all(a[k] == b[k] for k in a), [k for k in a if a[k] != b.get(k)]
ca, cb = (json.load(open(os.path.join(f, "config.json"))) for f in sys.argv[1:3])
assert ca == cb, (ca, cb)
PY
}
"$DILOCO_BIN" export "$WORK/A" --format hf --out "$WORK/B" > /dev/null
tensors_equal "$WORK/A" "$WORK/B" && pass "export of the exported folder: identical tensors and config" || fail "folder re-export"
# Import through training: a round that cannot move the weights (lr 1e-30,
# no decay) from the folder, then export: the same bytes.
mpi 2 "$DILOCO_BIN" train "$WORK/llama.toml" --set "model.init_from=\"$WORK/A\"" --set model.preset='""' \
  --set inner.lr=1e-30 --set inner.weight_decay=0 --set outer.rounds=1 --out "$WORK/import" > "$WORK/import.log" 2>&1 \
  || { tail -20 "$WORK/import.log"; fail "train from the folder"; }
"$DILOCO_BIN" export "$WORK/import/checkpoints/ckpt-00000001" --format hf --out "$WORK/C" > /dev/null
tensors_equal "$WORK/A" "$WORK/C" && pass "export, import (model.init_from), export: identical tensors and config" \
  || fail "import round trip"
expect_exit 2 "model.d_model = 128, but $WORK/A/config.json has hidden_size = 64" "an explicit key that disagrees with the folder" -- \
  "$DILOCO_BIN" check "$WORK/llama.toml" --set "model.init_from=\"$WORK/A\"" --set model.preset='""' --set model.d_model=128

# A damaged checkpoint is named as such before anything is read from it.
cp -r "$ckpt" "$WORK/damaged"
printf 'x' >> "$WORK/damaged/$(ls "$WORK/damaged" | grep -v MANIFEST | head -1)"
expect_exit 2 "$WORK/damaged does not verify" "eval of a damaged checkpoint" -- "$DILOCO_BIN" eval "$WORK/damaged" --data "$WORK/data.txt"

# eval: the checkpoint, its folder, Python's forward and two ranks agree.
loss() { "$@" --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["loss"])'; }
l_ckpt=$(loss "$DILOCO_BIN" eval "$ckpt" --data "$WORK/data.txt")
l_folder=$(loss "$DILOCO_BIN" eval "$WORK/A" --data "$WORK/data.txt" --seq-len 32)
l_py=$($PY scripts/hf_llama.py loss "$WORK/A" --data "$WORK/data.txt" --seq-len 32 | $PY -c 'import json,sys; print(json.load(sys.stdin)["loss"])')
l_mpi=$(loss mpi 2 "$DILOCO_BIN" eval "$ckpt" --data "$WORK/data.txt")
$PY - "$l_ckpt" "$l_folder" "$l_py" "$l_mpi" <<'PY' && pass "eval: checkpoint $l_ckpt, folder, Python $l_py, 2 ranks agree" || fail "eval disagrees: $l_ckpt $l_folder $l_py $l_mpi"
import math, sys
c, f, p, m = map(float, sys.argv[1:])
assert c == f and abs(c - p) <= 1e-4 * p and abs(c - m) <= 1e-9 * c and c < math.log(256), (c, f, p, m)
PY
"$DILOCO_BIN" eval "$ckpt" --data "$WORK/data.txt" > "$WORK/eval.txt"
grep -q "^bits per byte  " "$WORK/eval.txt" && grep -q "^perplexity " "$WORK/eval.txt" && pass "eval prints loss, perplexity, bits per byte" \
  || fail "eval table: $(cat "$WORK/eval.txt")"

# The byte GPT: its own config, read back by eval and sample.
mpi 2 "$DILOCO_BIN" train recipes/quickstart.toml --set outer.rounds=1 --set sync.H=5 --set checkpoint.every=1 \
  --out "$WORK/gpt" > "$WORK/gpt.log" 2>&1 || { tail -20 "$WORK/gpt.log"; fail "gpt run"; }
gckpt="$WORK/gpt/checkpoints/ckpt-00000001"
expect_exit 0 "not a Hugging Face architecture" "the byte GPT exports its own config" -- \
  "$DILOCO_BIN" export "$gckpt" --format hf --out "$WORK/G"
grep -q '"model_type": "diloco-gpt"' "$WORK/G/config.json" && pass "model_type diloco-gpt" || fail "gpt config"
[[ $(loss "$DILOCO_BIN" eval "$gckpt" --data "$WORK/data.txt") == $(loss "$DILOCO_BIN" eval "$WORK/G" --data "$WORK/data.txt") ]] \
  && pass "the GPT folder evaluates as its checkpoint" || fail "gpt folder loss"
a=$("$DILOCO_BIN" sample "$gckpt" --prompt "Q: " --tokens 100 --seed 5)
b=$("$DILOCO_BIN" sample "$WORK/G" --prompt "Q: " --tokens 100 --seed 5)
c=$("$DILOCO_BIN" sample "$gckpt" --prompt "Q: " --tokens 100 --seed 6)
[[ "$a" == "$b" && "$a" != "$c" && ${#a} -ge 100 ]] && pass "sample: a seed repeats (checkpoint = folder), another differs, past the 64-byte context" \
  || fail "sample: '$a' / '$b' / '$c'"

# SentencePiece text: the folder ships tokenizer.model, sample decodes with it.
"$DILOCO_BIN" tokenize "$WORK/data.txt" --train-vocab 500 --out "$WORK/spm" > /dev/null 2>&1 || fail "tokenize"
mpi 1 "$DILOCO_BIN" train "$WORK/llama.toml" --set data.format=text --set "data.paths=[\"$WORK/data.txt\"]" \
  --set "data.tokenizer=\"$WORK/spm/tokenizer.model\"" --set model.vocab=512 --set topology.sites=1 --set outer.rounds=1 \
  --out "$WORK/text" > "$WORK/text.log" 2>&1 || { tail -20 "$WORK/text.log"; fail "text run"; }
expect_exit 0 "tokenizer.model tokenizer_config.json" "the folder of a text run holds its tokenizer" -- \
  "$DILOCO_BIN" export "$WORK/text/checkpoints/ckpt-00000001" --format hf --out "$WORK/T"
out=$("$DILOCO_BIN" sample "$WORK/T" --prompt "The" --tokens 20 --json)
$PY - "$out" <<'PY' && pass "sample decodes with the folder's SentencePiece model" || fail "text sample: $out"
import json, sys
j = json.loads(sys.argv[1])
assert j["tokenizer"].startswith("SentencePiece") and len(j["ids"]) == 20 and max(j["ids"]) < 512 and j["text"], j
PY
bpb=$("$DILOCO_BIN" eval "$WORK/T" --data "$WORK/data.txt" --seq-len 32 --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["bits_per_byte"])')
$PY -c 'import sys; assert 0 < float(sys.argv[1]) < 20' "$bpb" 2>/dev/null && pass "eval on text counts bits per byte ($bpb)" || fail "no bits per byte on text"
mkdir "$WORK/textdir" && cp "$WORK/data.txt" "$WORK/textdir/"
bpb_dir=$("$DILOCO_BIN" eval "$WORK/T" --data "$WORK/textdir" --seq-len 32 --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["bits_per_byte"])')
[[ $bpb_dir == "$bpb" ]] && pass "a folder of text counts its bytes alike" || fail "folder bits per byte $bpb_dir, file $bpb"
finish
