# Every recipe in recipes/ passes `diloco check`, and each runs shortened
# (outer.rounds = 2) on the rank count its header's mpirun line gives; then
# scripts/plot turns one run's metrics into its report page.
source "$(dirname "$0")/lib.sh"

for recipe in recipes/*.toml; do
  name=$(basename "$recipe" .toml)
  data_sets "$recipe"  # a token recipe runs on shards of its vocabulary
  "$DILOCO_BIN" check "$recipe" "${sets[@]}" > "$WORK/$name.check" 2>&1 && pass "$name: check" \
    || { cat "$WORK/$name.check"; fail "$name: check"; continue; }
  if grep -q '^device = "cuda"' "$recipe"; then
    # A GPU recipe: without a GPU it must stop at once and say why; its
    # settings (NCCL, bf16, site_by node) then run on the CPU, shortened.
    if "$DILOCO_BIN" devices | grep -qx "cuda_devices 0"; then
      expect_exit 2 'run.device = "cuda" but there is no CUDA device' "$name: refused without a GPU" -- \
        mpi 2 "$DILOCO_BIN" train "$recipe" --set outer.rounds=1 --out "$WORK/$name-nogpu"
    fi
    mpi 2 "$DILOCO_BIN" train "$recipe" --set run.device=cpu --set comm.intra_site=mpi --set run.threads=1 \
      --set model.d_model=64 --set model.n_layers=2 --set model.n_heads=4 --set model.seq_len=64 \
      --set sync.H=5 --set sync.h_min=5 --set outer.rounds=2 --out "$WORK/$name" > "$WORK/$name.log" 2>&1 \
      && [[ $(rows "$WORK/$name/metrics.jsonl") -eq 2 ]] && grep -q "bf16 autocast" "$WORK/$name.log" \
      && pass "$name: 2 rounds on the CPU (bf16, site_by node)" || { tail -20 "$WORK/$name.log"; fail "$name: CPU run"; }
    continue
  fi
  ranks=$(grep -m1 -oE 'mpirun -np [0-9]+ build/diloco train' "$recipe" | awk '{print $3}')
  [[ -n $ranks ]] || { fail "$name: its header names no 'mpirun -np N build/diloco train' line"; continue; }
  mpi "$ranks" "$DILOCO_BIN" train "$recipe" "${sets[@]}" --set outer.rounds=2 --out "$WORK/$name" > "$WORK/$name.log" 2>&1 \
    && [[ $(rows "$WORK/$name/metrics.jsonl") -eq 2 ]] && pass "$name: 2 rounds on $ranks ranks" \
    || { tail -20 "$WORK/$name.log"; fail "$name: shortened run"; }
done

DILOCO_BIN="$DILOCO_BIN" scripts/plot "$WORK/quickstart" > "$WORK/plot.log" 2>&1 || { cat "$WORK/plot.log"; fail "plot"; }
grep -q '"name":"quickstart"' "$WORK/quickstart/plots/report.html" && pass "plot: the report page of the run" \
  || fail "plot output"
expect_exit 2 "no such run folder" "plot names a folder without metrics" -- env DILOCO_BIN="$DILOCO_BIN" scripts/plot "$WORK/nowhere"

# scripts/launch: sites x ranks per site, the command printed, the run real.
MPIRUN_PATH_DIR=$(dirname "$(command -v "$MPIRUN")")
PATH="$MPIRUN_PATH_DIR:$PATH" scripts/launch --sites 2 --ranks-per-site 1 --bin "$DILOCO_BIN" -- \
  train recipes/quickstart.toml --set outer.rounds=1 --set model.d_model=32 --out "$WORK/launched" > "$WORK/launch.log" 2>&1 \
  && grep -q "^launch: mpirun -np 2 --bind-to none" "$WORK/launch.log" && grep -q "2 ranks in 2 sites" "$WORK/launch.log" \
  && pass "launch: 2 sites x 1 rank" || { cat "$WORK/launch.log"; fail "launch"; }
# topology.site_by = "node": ranks named as if on 2 nodes form 2 sites of 2.
cat > "$WORK/nodes.sh" <<'SH'
export DILOCO_NODE_NAME=node$((OMPI_COMM_WORLD_RANK / 2))
exec "$@"
SH
printf '[model]\nd_model = 32\n[outer]\nrounds = 1\n[topology]\nsite_by = "node"\n' > "$WORK/nodes.toml"
mpi 4 bash "$WORK/nodes.sh" "$DILOCO_BIN" train "$WORK/nodes.toml" --out "$WORK/nodes" > "$WORK/nodes.log" 2>&1 \
  && grep -q "4 ranks in 2 sites (2+2)" "$WORK/nodes.log" && pass "site_by node: 2 nodes, 2 sites" \
  || { tail -5 "$WORK/nodes.log"; fail "site_by node"; }
grep -q "^sites = " "$WORK/nodes/recipe.toml" && fail "effective recipe pins topology.sites under site_by node" \
  || pass "effective recipe leaves topology.sites to the nodes"
expect_exit 2 'topology.sites = 3 but topology.site_by = "node" finds 1 sites' "site_by node with a wrong site count" -- \
  mpi 2 "$DILOCO_BIN" train recipes/quickstart.toml --set topology.site_by=node --set topology.sites=3 --out "$WORK/n3"
expect_exit 2 "give --sites" "launch without a rank count" -- scripts/launch -- train recipes/quickstart.toml
finish
