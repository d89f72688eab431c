#!/usr/bin/env bash
# The divergence check (sync.check_every): a site whose global params drift
# by one ulp (debug.diverge_site) stops the run with exit 3 naming the sites
# that differ, in blocking DiLoCo, with a delayed exchange and in
# data-parallel mode; checked every 2 rounds it is caught at the next
# checked round; with the check off the run ends normally (the fault is
# real, the check is what stops it).
source "$(dirname "$0")/lib.sh"
cd "$WORK"
{ small_model_toml; printf '[outer]\nrounds = 5\n[sync]\nH = 4\n[topology]\nsites = 2\n'; } |
  sed -e "s|\[data\]|[data]\npaths = [\"/usr/share/games/fortunes\"]|" > recipe.toml
run() { mpi 2 "$DILOCO_BIN" train recipe.toml --set run.out_dir="$WORK/out" --set debug.diverge_site=1 "$@"; }
expect_exit 3 "the global params or outer state diverged in round 3: site 1 differ" "blocking: the drift is caught in its round" -- \
  run --set debug.diverge_round=3
expect_exit 3 "the global params or outer state diverged in round 3" "delayed exchange: caught" -- \
  run --set debug.diverge_round=3 --set sync.overlap=delayed
expect_exit 3 "the global params or outer state diverged in round 2" "data-parallel: caught" -- \
  run --set debug.diverge_round=2 --set sync.mode=data-parallel
expect_exit 3 "the global params or outer state diverged in round 4" "checked every 2 rounds: caught at round 4" -- \
  run --set debug.diverge_round=3 --set sync.check_every=2
expect_exit 0 "" "with the check off, the same drift goes unnoticed" -- \
  run --set debug.diverge_round=3 --set sync.check_every=0
finish
