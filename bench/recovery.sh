#!/usr/bin/env bash
# Sites launched apart: how long a loss and a relaunch cost. Runs the
# end-to-end scenario of tests/e2e/rendezvous.sh (3 sites as 3 mpiruns
# through a real ompi-server, kill -9 of one mid-round, relaunch with
# --resume auto, then SIGSTOP of another site's leader) `repeats` times for
# each sync.timeout_s, and prints the time from the kill (and from the
# SIGSTOP) to the survivors' next completed round and from the relaunch to
# the relaunched site's first completed round. The deadline is
# the floor of the first: a loss is only noticed when it passes.
# Usage: bench/recovery.sh [repeats] [timeouts...]   (default: 2, 5 10)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi_env
repeats=${1:-2}
shift $(( $# > 0 ? 1 : 0 ))
timeouts=("${@:-5}")
(($# > 0)) || timeouts=(5 10)
export DILOCO_BIN=$PWD/build/diloco MPIRUN=mpirun
echo "| sync.timeout_s | ping_s | kill -9 -> survivors' next round (s) | SIGSTOP -> survivors' next round (s) | relaunch -> its first round (s) |"
echo "|---:|---:|---|---|---|"
for t in "${timeouts[@]}"; do
  losses=() stops=() rejoins=()
  for ((i = 0; i < repeats; ++i)); do
    out=$(RENDEZVOUS_TIMEOUT_S=$t bash tests/e2e/rendezvous.sh 2>&1) || { echo "$out" | grep "FAIL" >&2; exit 1; }
    losses+=("$(echo "$out" | sed -n 's/.*kill -9 .*completed a round \([0-9.]*\) s later.*/\1/p' | head -1)")
    stops+=("$(echo "$out" | sed -n 's/.*SIGSTOP .*completed a round \([0-9.]*\) s later.*/\1/p' | head -1)")
    rejoins+=("$(echo "$out" | sed -n 's/.*completed \([0-9.]*\) s after the relaunch.*/\1/p' | head -1)")
  done
  printf '| %s | 2 | %s | %s | %s |\n' "$t" "$(printf '%.1f ' "${losses[@]}")" "$(printf '%.1f ' "${stops[@]}")" \
    "$(printf '%.1f ' "${rejoins[@]}")"
done
