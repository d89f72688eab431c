# TorchScript models trained across sites: the byte GPT and a small Llama
# exported by scripts/export_model.py learn on 2 sites x 2 ranks, a stopped
# run resumes exactly, and bad model files stop every rank with exit 2 naming
# the file and the problem.
source "$(dirname "$0")/lib.sh"
py=/usr/bin/python3
"$py" scripts/export_model.py --kind gpt --out "$WORK/gpt.pt" > /dev/null || fail "export gpt"
"$py" scripts/export_model.py --kind llama --d-model 64 --out "$WORK/llama.pt" > /dev/null || fail "export llama"

for kind in gpt llama; do
  mpi 4 "$DILOCO_BIN" train recipes/quickstart.toml --set model.kind=torchscript --set "model.path=\"$WORK/$kind.pt\"" \
    --set outer.rounds=6 --out "$WORK/$kind" > "$WORK/$kind.log" 2>&1 || { tail -20 "$WORK/$kind.log"; fail "$kind run"; }
  python3 - "$WORK/$kind/metrics.jsonl" <<'PY' && pass "torchscript $kind learns on 2 sites x 2 ranks" || fail "torchscript $kind did not learn"
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("eval loss", [round(r["eval_loss"], 3) for r in rows if r["eval_loss"] is not None])
assert rows[-1]["eval_loss"] < math.log(256) - 1, rows[-1]["eval_loss"]
PY
done

# Exact resume: SIGTERM after round 2, resume, same metrics as the run above.
ts=(recipes/quickstart.toml --set model.kind=torchscript --set "model.path=\"$WORK/llama.pt\"" --set outer.rounds=6
    --set checkpoint.every=0)
exact_resume torchscript "$WORK/llama/metrics.jsonl" "$WORK/term" "${ts[@]}"
expect_exit 2 "holds a model of torchscript" "resume with another model refused" -- \
  mpi 4 "$DILOCO_BIN" train recipes/quickstart.toml --set model.kind=torchscript --set "model.path=\"$WORK/gpt.pt\"" \
    --set outer.rounds=6 --out "$WORK/term" --resume auto

# Bad model files: every rank stops with one message. (torch.jit.script
# reads the classes' source, so the maker is a file, not a heredoc on stdin.)
cat > "$WORK/make_bad.py" <<'PY'
import sys, torch
class Flat(torch.nn.Module):  # logits without the vocabulary axis
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(256, 8)
    def forward(self, tokens):
        return self.emb(tokens).sum(-1)
class Wide(torch.nn.Module):  # predicts 512 tokens
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(256, 512)
    def forward(self, tokens):
        return self.emb(tokens)
torch.jit.save(torch.jit.script(Flat()), sys.argv[1] + "/flat.pt")
torch.jit.save(torch.jit.script(Wide()), sys.argv[1] + "/wide.pt")
PY
"$py" "$WORK/make_bad.py" "$WORK" || fail "could not write the bad models"
bad() {  # bad NEEDLE WHAT PATH
  expect_exit 2 "$1" "$2" -- mpi 2 "$DILOCO_BIN" train recipes/quickstart.toml --set topology.sites=1 \
    --set model.kind=torchscript --set "model.path=\"$3\"" --out "$WORK/bad"
}
bad "model.path: $WORK/none.pt: no such file" "missing model file" "$WORK/none.pt"
bad "model.path: recipes/quickstart.toml: not a TorchScript file" "not TorchScript" recipes/quickstart.toml
bad "returned logits of shape [1, 2]; [1, 2, vocab] expected" "wrong output shape" "$WORK/flat.pt"
bad "the module predicts 512 tokens; model.vocab (the data's) is 256" "another vocabulary" "$WORK/wide.pt"
expect_exit 2 "the module predicts 512 tokens" "check reports it before training" -- \
  "$DILOCO_BIN" check recipes/quickstart.toml --set model.kind=torchscript --set "model.path=\"$WORK/wide.pt\""
finish
