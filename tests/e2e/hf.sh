# Hugging Face Llama folders against an independent Python computation
# (scripts/hf_llama.py, written after transformers' modeling_llama): diloco
# eval's loss and diloco sample's greedy ids equal Python's for rope theta
# 500000 and 10000, epsilon 1e-5 and 1e-6, grouped-query, multi-query and
# full attention, tied and untied heads, llama3 rope scaling; sharded
# folders; other rope scalings refused naming the field.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
HF=scripts/hf_llama.py
head -c 4000 /usr/share/games/fortunes/fortunes > "$WORK/data.txt"

# name: flags for hf_llama.py write
# scripts/export_model.py --format hf writes each folder.
declare -A FOLDERS=(
  [gqa_tied]="--theta 500000 --eps 1e-5 --kv-heads 2"
  [mha_untied]="--theta 500000 --eps 1e-6 --kv-heads 4 --untied"
  [llama3]="--theta 500000 --eps 1e-6 --kv-heads 2 --untied --rope-scaling llama3 --original-max 32"
  [mqa_theta1e4]="--theta 10000 --eps 1e-5 --kv-heads 1 --layers 3 --seed 4"
)
# eval_loss FOLDER: diloco eval's loss (json)
eval_loss() { "$DILOCO_BIN" eval "$1" --data "$WORK/data.txt" --seq-len 64 --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["loss"])'; }
close() {  # close A B WHAT: A and B within 1e-4 relative
  $PY -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) <= 1e-4 * abs(b) else 1)' "$1" "$2" \
    && pass "$3 ($1 vs $2)" || fail "$3: $1 vs $2"
}
for name in "${!FOLDERS[@]}"; do
  $PY scripts/export_model.py --kind llama --format hf --out "$WORK/$name" --d-model 64 --ffn 96 --seq-len 256 \
    ${FOLDERS[$name]} > /dev/null || fail "write $name"
  want=$($PY $HF loss "$WORK/$name" --data "$WORK/data.txt" --seq-len 64 --prompt "The cat " --tokens 40)
  py=$(echo "$want" | $PY -c 'import json,sys; print(json.load(sys.stdin)["loss"])')
  close "$(eval_loss "$WORK/$name")" "$py" "$name: diloco eval equals the Python forward"
  got=$("$DILOCO_BIN" sample "$WORK/$name" --prompt "The cat " --tokens 40 --temperature 0 --json)
  $PY - "$want" "$got" <<'PY' && pass "$name: greedy sample (KV cache) equals Python's greedy loop" || fail "$name: greedy ids differ"
import json, sys
want, got = json.loads(sys.argv[1])["ids"], json.loads(sys.argv[2])["ids"]
assert want == got, (want, got)
PY
done

# Theta is read, not assumed: the same weights under another theta give
# another loss (and Python agrees with the new one).
cp -r "$WORK/gqa_tied" "$WORK/theta"
$PY - "$WORK/theta/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["rope_theta"] = 10000.0; json.dump(c, open(sys.argv[1], "w"))
PY
a=$(eval_loss "$WORK/gqa_tied"); b=$(eval_loss "$WORK/theta")
$PY -c 'import sys; sys.exit(0 if abs(float(sys.argv[1]) - float(sys.argv[2])) > 1e-3 else 1)' "$a" "$b" \
  && pass "a changed rope_theta changes the loss ($a -> $b)" || fail "rope_theta ignored: $a and $b"
close "$b" "$($PY $HF loss "$WORK/theta" --data "$WORK/data.txt" --seq-len 64 | $PY -c 'import json,sys; print(json.load(sys.stdin)["loss"])')" \
  "theta 10000: diloco eval equals the Python forward"

# The llama3 scaling is computed: without it the same weights give another loss.
cp -r "$WORK/llama3" "$WORK/unscaled"
sed -i 's/"rope_scaling": {/"rope_scaling": null, "was": {/' "$WORK/unscaled/config.json"
a=$(eval_loss "$WORK/llama3"); b=$(eval_loss "$WORK/unscaled")
$PY -c 'import sys; sys.exit(0 if abs(float(sys.argv[1]) - float(sys.argv[2])) > 1e-3 else 1)' "$a" "$b" \
  && pass "llama3 scaling changes the loss ($a, unscaled $b)" || fail "llama3 scaling ignored: $a and $b"

# Sharded: exported past a 40 KB shard size, it reads back to the same loss.
expect_exit 0 "model.safetensors.index.json" "export --format hf shards past --max-shard-size" -- \
  "$DILOCO_BIN" export "$WORK/llama3" --format hf --out "$WORK/sharded" --max-shard-size 40KB
[[ $(ls "$WORK/sharded"/model-*-of-*.safetensors | wc -l) -ge 3 ]] && pass "several shards" || fail "no shards: $(ls "$WORK/sharded")"
[[ $(eval_loss "$WORK/sharded") == $(eval_loss "$WORK/llama3") ]] && pass "the sharded folder evaluates as the single file" \
  || fail "sharded loss differs"
close "$(eval_loss "$WORK/sharded")" "$($PY $HF loss "$WORK/sharded" --data "$WORK/data.txt" --seq-len 64 | \
  $PY -c 'import json,sys; print(json.load(sys.stdin)["loss"])')" "Python reads the shards through the index alike"

# Refusals: exit 2 naming the file and field.
$PY scripts/export_model.py --kind llama --format hf --out "$WORK/dynamic" --rope-scaling dynamic > /dev/null
expect_exit 2 "$WORK/dynamic/config.json: rope_scaling.rope_type \"dynamic\" is not implemented" "eval: unknown rope scaling" -- \
  "$DILOCO_BIN" eval "$WORK/dynamic" --data "$WORK/data.txt"
expect_exit 2 "rope_scaling.rope_type \"dynamic\" is not implemented" "train init_from: unknown rope scaling" -- \
  "$DILOCO_BIN" check recipes/quickstart.toml --set "model.init_from=\"$WORK/dynamic\""
cp -r "$WORK/gqa_tied" "$WORK/bias"
sed -i 's/"attention_bias": false/"attention_bias": true/' "$WORK/bias/config.json"
expect_exit 2 "attention_bias is true" "attention biases refused" -- "$DILOCO_BIN" sample "$WORK/bias" --prompt hi
mkdir "$WORK/empty" && cp "$WORK/gqa_tied/config.json" "$WORK/empty/"
expect_exit 2 "$WORK/empty: holds neither model.safetensors nor model.safetensors.index.json" "a folder without weights" -- \
  "$DILOCO_BIN" eval "$WORK/empty" --data "$WORK/data.txt"
# A vocabulary that is not bytes and no tokenizer.model: the encoding is
# not guessed.
$PY scripts/export_model.py --kind llama --format hf --out "$WORK/v300" --vocab 300 --d-model 32 --ffn 64 > /dev/null
expect_exit 2 "which tokenizer made its ids is unknown" "sample refuses to guess a tokenizer" -- \
  "$DILOCO_BIN" sample "$WORK/v300" --prompt hi
expect_exit 0 "" "--tokenizer bytes samples anyway" -- "$DILOCO_BIN" sample "$WORK/v300" --prompt hi --tokenizer bytes --tokens 5
expect_exit 2 "--max-shard-size 12XB" "bad shard size" -- \
  "$DILOCO_BIN" export "$WORK/llama3" --format hf --out "$WORK/x" --max-shard-size 12XB
expect_exit 2 "--temperature -1" "bad temperature" -- "$DILOCO_BIN" sample "$WORK/llama3" --prompt hi --temperature -1
expect_exit 2 "--data needs a value" "eval without data" -- "$DILOCO_BIN" eval "$WORK/llama3" --data
finish
