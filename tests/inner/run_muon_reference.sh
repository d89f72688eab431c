# diloco's inner optimizer against an independent Python replay of the same
# gradients (Debian's python3-torch): Muon, then AdamW alone.
set -euo pipefail
steps_bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for optimizer in muon adamw; do
  "$steps_bin" "$work/$optimizer.safetensors" "$optimizer"
  /usr/bin/python3 tests/inner/muon_reference.py "$work/$optimizer.safetensors"
done
