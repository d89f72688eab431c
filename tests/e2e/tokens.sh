#!/usr/bin/env bash
# Token data end to end: llm.c shards (vocabulary 4096, written by an
# independent helper) train a GPT and a Llama on 2 sites x 2 ranks; exact
# resume on shards; `diloco tokenize` with a trained 2000-piece SentencePiece
# model feeds a run whose eval loss falls; every malformed input is exit 2
# naming the file, printed once under mpirun.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

cat /usr/share/games/fortunes/{fortunes,literature,science,people,computers,wisdom} > "$WORK/text.txt" 2>/dev/null
$PY tests/e2e/make_shards.py "$WORK/text.txt" "$WORK/shards" 4096 3 > /dev/null || fail "make_shards"

tokens=(recipes/quickstart.toml --set 'data.format="tokens"' --set "data.paths=[\"$WORK/shards\"]"
        --set model.vocab=4096 --set data.batch_size=8 --set outer.rounds=6 --set checkpoint.every=0)
learns() {  # learns WHAT METRICS VOCAB: eval loss falls, ending a nat below a uniform guess (ln VOCAB)
  $PY - "$2" "$3" <<'PY' && pass "$1" || fail "$1"
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
evals = [r["eval_loss"] for r in rows if r["eval_loss"] is not None]
print("eval loss", [round(e, 3) for e in evals], "uniform", round(math.log(int(sys.argv[2])), 3))
assert evals[-1] < evals[0] and evals[-1] < math.log(int(sys.argv[2])) - 1.0, evals
PY
}

mpi 4 "$DILOCO_BIN" train "${tokens[@]}" --out "$WORK/gpt" > "$WORK/gpt.log" 2>&1 || { tail -20 "$WORK/gpt.log"; fail "gpt run"; }
grep -q "3 token shards (uint16, llm.c)" "$WORK/gpt.log" && pass "banner names the shards" || fail "banner: $(grep data: "$WORK/gpt.log")"
learns "gpt learns on llm.c shards (vocab 4096, 2 sites x 2 ranks)" "$WORK/gpt/metrics.jsonl" 4096
exact_resume "token shards" "$WORK/gpt/metrics.jsonl" "$WORK/term" "${tokens[@]}"

mpi 4 "$DILOCO_BIN" train "${tokens[@]}" --set model.preset='"llama-tiny"' --set model.vocab=4096 --set model.seq_len=64 \
  --out "$WORK/llama" > "$WORK/llama.log" 2>&1 || { tail -20 "$WORK/llama.log"; fail "llama run"; }
learns "llama learns on llm.c shards" "$WORK/llama/metrics.jsonl" 4096

# Headerless uint32 files (nanoGPT's layout, wider ids) read with data.token_dtype.
$PY tests/e2e/make_shards.py "$WORK/text.txt" "$WORK/raw32" 4096 2 --uint32 --headerless > /dev/null
expect_exit 0 "2 token shards (uint32)" "headerless uint32 shards pass check" \
  -- "$DILOCO_BIN" check "${tokens[@]}" --set "data.paths=[\"$WORK/raw32\"]" --set 'data.token_dtype="uint32"'

# diloco tokenize: train a 2000-piece model on the fortunes, write shards, train on them.
"$DILOCO_BIN" tokenize /usr/share/games/fortunes --train-vocab 2000 --out "$WORK/spm" > "$WORK/tokenize.log" 2>&1 \
  || { cat "$WORK/tokenize.log"; fail "tokenize"; }
grep -q "shard.*bytes/token" "$WORK/tokenize.log" && pass "tokenize prints a summary: $(head -c 160 < <(grep bytes/token "$WORK/tokenize.log"))" \
  || fail "tokenize summary: $(cat "$WORK/tokenize.log")"
mpi 4 "$DILOCO_BIN" train recipes/tokens-quickstart.toml --set "data.paths=[\"$WORK/spm\"]" --set outer.rounds=6 \
  --set checkpoint.every=0 --out "$WORK/spm_run" > "$WORK/spm_run.log" 2>&1 || { tail -20 "$WORK/spm_run.log"; fail "tokens-quickstart"; }
learns "tokens-quickstart (SentencePiece 2000) learns" "$WORK/spm_run/metrics.jsonl" 2000
# The same text through data.format = "text" (encoded at start-up).
expect_exit 0 "text files (SentencePiece)" "data.format = text opens with the trained model" \
  -- "$DILOCO_BIN" check recipes/quickstart.toml --set 'data.format="text"' --set "data.tokenizer=\"$WORK/spm/tokenizer.model\"" \
     --set model.vocab=2000

# Bad input: each exit 2 with the file (and offset) named.
bad="$WORK/bad"; mkdir -p "$bad"
head -c 4000 "$WORK/shards/shard_000.bin" > "$bad/short.bin"            # header count exceeds the file
: > "$bad/empty.bin"
$PY - "$bad" <<'PY'
import array, sys
d = sys.argv[1]
def shard(name, magic, version, ids, count=None):
    h = array.array("i", [0] * 256); h[0], h[1], h[2] = magic, version, len(ids) if count is None else count
    open(f"{d}/{name}", "wb").write(h.tobytes() + array.array("H", ids).tobytes())
shard("magic.bin", 1234, 1, [1] * 5000)
shard("version.bin", 20240520, 3, [1] * 5000)
shard("vocab.bin", 20240520, 1, [5] * 3000 + [4096] + [5] * 3000)
open(f"{d}/odd.bin", "wb").write(b"\1\0" * 5000 + b"\7")
open(f"{d}/not_spm.model", "w").write("not a model\n")
PY
check_bad() {  # check_bad WHAT NEEDLE SETS...
  local what=$1 needle=$2; shift 2
  expect_exit 2 "$needle" "check: $what" -- "$DILOCO_BIN" check "${tokens[@]}" "$@"
}
check_bad "missing path" "data path $bad/nope does not exist" --set "data.paths=[\"$bad/nope\"]"
check_bad "empty shard" "token shard $bad/empty.bin is empty" --set "data.paths=[\"$bad/empty.bin\"]"
check_bad "wrong magic" "$bad/magic.bin has no llm.c header (magic 1234 at byte offset 0" --set "data.paths=[\"$bad/magic.bin\"]"
check_bad "wrong version" "$bad/version.bin has version 3 at byte offset 4" --set "data.paths=[\"$bad/version.bin\"]"
check_bad "count beyond the file" "$bad/short.bin: its header (byte offset 8) says" --set "data.paths=[\"$bad/short.bin\"]"
check_bad "size not a multiple of the width" "$bad/odd.bin is 10001 bytes, not a multiple of 2" \
  --set "data.paths=[\"$bad/odd.bin\"]" --set 'data.token_dtype="uint16"'
check_bad "id at model.vocab" "token id 4096 in $bad/vocab.bin at byte offset $((1024 + 2 * 3000)) is not below model.vocab = 4096" \
  --set "data.paths=[\"$bad/vocab.bin\"]"
expect_exit 2 "tokenizer $bad/not_spm.model is not a SentencePiece model" "check: tokenizer not SentencePiece" \
  -- "$DILOCO_BIN" check recipes/quickstart.toml --set 'data.format="text"' --set "data.tokenizer=\"$bad/not_spm.model\""
cp "$WORK/shards/shard_000.bin" "$bad/locked.bin"; chmod 000 "$bad/locked.bin"
as_user=()  # root reads any file: read it as nobody instead
if [[ $EUID -eq 0 ]]; then
  chmod 755 "$WORK" "$bad"
  as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
# The recipe from the work folder: nobody may not read the checkout (a clone
# into a mktemp -d folder is 0700), and only the shard is to be refused.
cp recipes/quickstart.toml "$WORK/locked-recipe.toml" && chmod 644 "$WORK/locked-recipe.toml"
expect_exit 2 "cannot read token shard $bad/locked.bin: Permission denied" "check: unreadable shard" \
  -- "${as_user[@]}" "$DILOCO_BIN" check "$WORK/locked-recipe.toml" "${tokens[@]:1}" --set "data.paths=[\"$bad/locked.bin\"]"
# Under mpirun: every rank exits, the message is printed once.
out=$(mpi 4 "$DILOCO_BIN" train "${tokens[@]}" --set "data.paths=[\"$bad/magic.bin\"]" --out "$WORK/badrun" 2>&1); rc=$?
n=$(grep -c "has no llm.c header" <<< "$out")
[[ $rc -eq 2 && $n -eq 1 ]] && pass "train under mpirun: exit 2, message printed once" \
  || fail "train under mpirun: exit $rc, message printed $n times: $out"
# An id out of range that the start-up sample misses is caught by the batch
# that carries it: exit 2 naming the file and offset, never an index error
# inside libtorch. (8 Mi ids; 100 Ki bad ones between two blocks of the
# start-up sample, which reads 64 evenly spread blocks of 4096.)
$PY - "$bad/hidden.bin" <<'PY'
import array, sys
n = 8 << 20
ids = array.array("H", [7]) * n
first = (n - 4096) * 20 // 63 + 8192
ids[first:first + 100000] = array.array("H", [4096]) * 100000
h = array.array("i", [0] * 256); h[0], h[1], h[2] = 20240520, 1, n
open(sys.argv[1], "wb").write(h.tobytes() + ids.tobytes())
PY
out=$(mpi 4 "$DILOCO_BIN" train "${tokens[@]}" --set "data.paths=[\"$bad/hidden.bin\"]" --set 'data.sharding="contiguous"' \
      --set "data.eval_paths=[\"$WORK/shards/shard_000.bin\"]" \
      --out "$WORK/hidden" 2>&1); rc=$?
[[ $rc -eq 2 && $out == *"error: data: token id 4096 in $bad/hidden.bin at byte offset"* && $out != *"IndexError"* \
   && $out != *"index out of range"* ]] \
  && pass "an id out of range met in a batch: exit 2 naming file and offset" || fail "id in a batch: exit $rc: $(tail -5 <<< "$out")"
finish
