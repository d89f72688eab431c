# Shared helpers for the end-to-end tests: the binary, mpirun, assertions.
set -uo pipefail
DILOCO_BIN=${DILOCO_BIN:-build/diloco}
MPIRUN=${MPIRUN:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
WORK=$(mktemp -d)
trap '[[ -n ${KEEP_WORK:-} ]] && echo "kept $WORK" || rm -rf "$WORK"' EXIT
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

mpi() { local n=$1; shift; timeout 300 "$MPIRUN" -np "$n" --oversubscribe --bind-to none "$@"; }

# expect_exit CODE NEEDLE DESCRIPTION -- COMMAND...: runs COMMAND, checks its
# exit code and that NEEDLE appears in its stderr+stdout.
expect_exit() {
  local code=$1 needle=$2 what=$3; shift 4
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [[ $rc -ne $code ]]; then fail "$what: exit $rc, expected $code; output: $out"; return; fi
  if [[ -n "$needle" && "$out" != *"$needle"* ]]; then fail "$what: output lacks '$needle': $out"; return; fi
  pass "$what"
}

# The small model and data the timing tests train: quick steps, quick learning.
small_model_toml() {
  printf '[model]\nd_model = 64\n[data]\nbatch_size = 8\n[inner]\nlr = 2e-3\nwarmup_steps = 10\n'
}

# Watching a run in the background.
rows() { python3 -c 'import sys; print(sum(1 for _ in open(sys.argv[1])))' "$1" 2>/dev/null || echo 0; }
wait_rows() {  # wait_rows FILE N: until FILE has N metrics rows (60 s at most)
  for _ in $(seq 600); do [[ $(rows "$1") -ge $2 ]] && return 0; sleep 0.1; done; return 1
}
rank_pid() {  # rank_pid OUTDIR K: pid of the K-th rank process (1-based) of the run writing OUTDIR
  pgrep -f "^[^ ]*/diloco train .*$1( |\$)" | sort -n | sed -n "${2}p"
}
# exact_resume WHAT REF_METRICS OUT TRAIN_ARGS...: runs `diloco train` on 4
# ranks into OUT, stops it with SIGTERM after round 2, resumes it with
# --resume auto, and checks every row equals REF_METRICS (an uninterrupted
# run of the same arguments).
exact_resume() {
  local what=$1 ref=$2 out=$3; shift 3
  mpi 4 "$DILOCO_BIN" train "$@" --out "$out" > "$out.log" 2>&1 &
  local job=$!
  wait_rows "$out/metrics.jsonl" 2 && kill -TERM "$(rank_pid "$out" 2)"
  wait $job
  mpi 4 "$DILOCO_BIN" train "$@" --out "$out" --resume auto > "$out.resumed.log" 2>&1 \
    || { tail -20 "$out.resumed.log"; fail "$what: resume"; return; }
  python3 - "$ref" "$out/metrics.jsonl" <<'PY' && grep -q "resuming from" "$out.resumed.log" \
    && pass "$what: resumed run equals the uninterrupted one" || fail "$what: resume differs"
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
assert len(a) == len(b), (len(a), len(b))
for x, y in zip(a, b):
    for k in ("train_loss", "eval_loss", "tokens", "bytes_sent"):
        assert x[k] == y[k], (x["round"], k, x[k], y[k])
PY
}
# data_sets RECIPE: sets the array `sets` to the --set flags a bundled recipe
# needs here. A token recipe trains on shards `diloco tokenize` writes;
# here on shards of its vocabulary, made once by the test helper
# (e2e_tokens runs tokenize itself).
data_sets() {
  sets=()
  grep -q '^format = "tokens"' "$1" || return 0
  local vocab
  vocab=$(awk '/^vocab *=/ {print $3; exit}' "$1")
  [[ -d $WORK/recipe_tokens_$vocab ]] || /usr/bin/python3 tests/e2e/make_shards.py \
    /usr/share/games/fortunes/fortunes "$WORK/recipe_tokens_$vocab" "$vocab" 1 > /dev/null
  sets=(--set "data.paths=[\"$WORK/recipe_tokens_$vocab\"]")
}
finish() {
  if [[ $failures -ne 0 ]]; then echo "$failures check(s) failed"; exit 1; fi
  echo "all checks passed"
}

# Sites launched apart: an ompi-server whose URI file is $WORK/uri, stopped
# on exit together with every process whose command line holds `$1` (the
# tests' sites), and $WORK removed unless KEEP_WORK is set.
start_ompi_server() {
  ompi-server --no-daemonize -r "$WORK/uri" &
  OMPI_SERVER_PID=$!
  SITES_PATTERN=$1
  trap 'kill $OMPI_SERVER_PID 2>/dev/null; pkill -9 -f "$SITES_PATTERN" 2>/dev/null; [[ -n ${KEEP_WORK:-} ]] || rm -rf "$WORK"' EXIT
  for _ in $(seq 50); do [[ -s $WORK/uri ]] && return 0; sleep 0.1; done
  echo "FAIL: ompi-server wrote no URI"; exit 1
}
