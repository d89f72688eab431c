# The command line: version, help, check printing the effective recipe.
source "$(dirname "$0")/lib.sh"

expect_exit 0 "diloco 0." "--version" -- "$DILOCO_BIN" --version
expect_exit 0 "train RECIPE" "--help" -- "$DILOCO_BIN" --help
expect_exit 0 "--set" "train --help" -- "$DILOCO_BIN" train --help
expect_exit 0 "--set" "check --help" -- "$DILOCO_BIN" check --help
expect_exit 2 "usage" "no command" -- "$DILOCO_BIN"
expect_exit 2 "unknown command 'trian'" "unknown command" -- "$DILOCO_BIN" trian recipes/quickstart.toml
expect_exit 2 "missing RECIPE" "train without recipe" -- "$DILOCO_BIN" train
expect_exit 2 "bogus" "unknown flag" -- "$DILOCO_BIN" check recipes/quickstart.toml --bogus

# check prints every section, with --set applied, and the output is itself a
# valid recipe that reads back identically.
printf 'some text to train on, long enough for a window of the small model. %.0s' {1..40} > "$WORK/a"
cp "$WORK/a" "$WORK/b"
"$DILOCO_BIN" check recipes/quickstart.toml --set sync.H=7 --set "data.paths=[\"$WORK/a\", \"$WORK/b\"]" > "$WORK/eff.toml" \
  || fail "check quickstart"
for section in run model data inner outer sync compression topology metrics; do
  grep -q "^\[$section\]" "$WORK/eff.toml" || fail "effective recipe lacks [$section]"
done
grep -q '^H = 7$' "$WORK/eff.toml" && pass "--set applied" || fail "--set sync.H=7 not applied"
grep -q "^paths = \['$WORK/a', '$WORK/b'\]$" "$WORK/eff.toml" && pass "array --set" || fail "array --set not applied"
"$DILOCO_BIN" check "$WORK/eff.toml" | diff -q - "$WORK/eff.toml" >/dev/null \
  && pass "effective recipe round-trips" || fail "effective recipe does not round-trip"

# `diloco devices`; where the CUDA toolkit and NCCL are installed (the build
# machines have both, no GPU), the NCCL backend must have been compiled in.
"$DILOCO_BIN" devices > "$WORK/devices.txt" && grep -qE '^cuda_devices [0-9]+$' "$WORK/devices.txt" \
  && pass "devices" || { cat "$WORK/devices.txt"; fail "devices"; }
nccl_header=$(ls /usr/local/cuda/include/nccl.h /usr/include/nccl.h 2>/dev/null | head -1)
if command -v nvcc > /dev/null && [[ -n $nccl_header ]]; then
  grep -qx "nccl built" "$WORK/devices.txt" && pass "NCCL backend built (toolkit and $nccl_header present)" \
    || fail "the CUDA toolkit and NCCL are installed but the NCCL backend was not built"
else
  echo "note: no CUDA toolkit with NCCL here; the NCCL backend is not expected"
fi
expect_exit 2 "usage: diloco devices" "devices takes no arguments" -- "$DILOCO_BIN" devices extra

# The host block cache's switch from the environment: another value than 0
# or 1 is refused before the run writes anything but its ranks' heartbeats.
expect_exit 2 'DILOCO_HOST_BLOCK_CACHE is "off"' "DILOCO_HOST_BLOCK_CACHE=off" -- \
  env DILOCO_HOST_BLOCK_CACHE=off "$DILOCO_BIN" train recipes/quickstart.toml --out "$WORK/block_cache"
written=$(find "$WORK/block_cache" -mindepth 1 -not -path "*/.heartbeat*" 2>/dev/null)
[[ -z $written ]] && pass "nothing but heartbeats written after the refusal" || fail "the refused run wrote: $written"
# Every bundled recipe validates (a token recipe against shards of its vocabulary).
for recipe in recipes/*.toml; do
  data_sets "$recipe"
  expect_exit 0 "" "check $recipe" -- "$DILOCO_BIN" check "$recipe" "${sets[@]}"
done
finish
