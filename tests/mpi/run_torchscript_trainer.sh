# Replicas of a TorchScript model (exported here by scripts/export_model.py)
# stay bit-identical after every outer step, on real ranks.
set -euo pipefail
mpirun=$1 ranks=$2 test_bin=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 scripts/export_model.py --kind llama --d-model 16 --layers 1 --heads 2 --kv-heads 1 --seq-len 16 \
  --out "$work/llama.pt"
DILOCO_TS_LLAMA=$work/llama.pt GTEST_FILTER='TrainerTest.TorchScript*' \
  "$mpirun" -np "$ranks" --oversubscribe --bind-to none -x DILOCO_TS_LLAMA -x GTEST_FILTER "$test_bin"
