# Exports the example TorchScript models with scripts/export_model.py (Debian's
# python3-torch, the same 1.13 as libtorch) and runs the TorchScript unit
# tests against them.
set -euo pipefail
test_bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
py=/usr/bin/python3
"$py" scripts/export_model.py --kind gpt --d-model 32 --layers 2 --heads 2 --seq-len 16 --out "$work/gpt.pt"
"$py" scripts/export_model.py --kind llama --d-model 32 --layers 2 --heads 4 --kv-heads 2 --seq-len 16 --out "$work/llama.pt"
DILOCO_TS_GPT=$work/gpt.pt DILOCO_TS_LLAMA=$work/llama.pt "$test_bin"
