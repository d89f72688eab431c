# A rank that fails on its own (an error only it meets, as a CUDA
# out-of-memory would be) ends the whole job at once, its message printed
# and exit 1, even while an exchange is in flight: the job is aborted before
# any destructor waits on the other ranks (~Trainer waiting for the exchange;
# on GPUs, NCCL's collective ncclCommDestroy).
source "$(dirname "$0")/lib.sh"

# One exchange of this model (0.1M params, fp32) takes about 7 s over the
# emulated 0.5 Mbit/s link; rank 1 fails 2 steps into the round whose
# exchange (delayed overlap) travels meanwhile.
args=(recipes/quickstart.toml --set model.d_model=64 --set sync.overlap=delayed --set sync.H=5 --set outer.rounds=4
      --set links.latency_ms=[1.0,1.0] --set links.bandwidth_mbps=[0.5,0.5] --set sync.timeout_s=60
      --set checkpoint.every=0 --set debug.throw_rank=1 --set debug.throw_step=7)
mpi 2 "$DILOCO_BIN" train "${args[@]}" --out "$WORK/throw" > "$WORK/throw.log" 2>&1 &
job=$!
for _ in $(seq 600); do grep -q "\[debug\] failing" "$WORK/throw.log" 2>/dev/null && break; sleep 0.1; done
start=$(date +%s.%N)
wait $job; rc=$?
took=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$(date +%s.%N)")
grep -q "\[debug\] failing at inner step 7" "$WORK/throw.log" || { tail -20 "$WORK/throw.log"; fail "the fault did not fire"; }
[[ $rc -eq 1 ]] && python3 -c "import sys; sys.exit(float(sys.argv[1]) > 3.0)" "$took" \
  && pass "a failing rank ends the job in ${took}s (an exchange needed ~7 s more), exit 1" \
  || { tail -20 "$WORK/throw.log"; fail "failing rank: exit $rc after ${took}s"; }
grep -q "rank 1: internal error: \[debug\] injected failure at inner step 7" "$WORK/throw.log" \
  && pass "its message is printed" || { tail -20 "$WORK/throw.log"; fail "no message from the failing rank"; }
finish
