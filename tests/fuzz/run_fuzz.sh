# Builds the decoder fuzzer (clang, libFuzzer, ASan, UBSan) in build-fuzz/,
# writes the seed corpus and fuzzes for a bounded time (FUZZ_SECONDS, 60).
# Exits 77 (skipped) only when clang or its fuzzer runtime is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v clang++ >/dev/null; then echo "SKIP: clang++ not installed (scripts/setup installs it)"; exit 77; fi
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long){return 0;}' \
     | clang++ -x c++ -fsanitize=fuzzer - -o /dev/null 2>/dev/null; then
  echo "SKIP: clang's libFuzzer runtime (libclang-rt-dev) not installed"; exit 77
fi
build=${FUZZ_BUILD_DIR:-build-fuzz}
cmake -S tests/fuzz -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
cmake --build "$build" -j "$(nproc)" > /dev/null
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
"$build/make_fuzz_seeds" "$corpus"
"$build/decode_fuzzer" -max_total_time="${FUZZ_SECONDS:-60}" -max_len=4096 -print_final_stats=1 \
  -artifact_prefix="$build/" "$corpus"
