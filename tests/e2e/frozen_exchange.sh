# A site leader frozen (SIGSTOP) in the middle of an exchange over emulated
# slow links ends the job within sync.timeout_s + 5 s, naming the frozen rank,
# in every overlap mode: the emulated communicator, its duplicate on the comm
# thread and the main thread's wait for that thread are all timed.
source "$(dirname "$0")/lib.sh"

timeout_s=8
# About 120k params: a 480 KB fp32 payload takes ~2 s at 2 Mbit/s, so the
# exchange is most of a round and a stop 1 s after a round ends lands in it.
{ small_model_toml; cat; } > "$WORK/frozen.toml" <<TOML
[outer]
rounds = 30
[sync]
H = 5
timeout_s = $timeout_s
startup_timeout_s = $timeout_s
[topology]
sites = 2
[links]
latency_ms = [100.0, 100.0]
bandwidth_mbps = [2.0, 2.0]
[metrics]
eval_every = 1000
TOML

for mode in ${MODES:-none delayed streaming}; do
  extra=(--set "sync.overlap=$mode")
  [[ $mode == streaming ]] && extra+=(--set sync.fragments=2 --set sync.overlap_steps=2)
  out="$WORK/frozen-$mode"
  mpi 2 "$DILOCO_BIN" train "$WORK/frozen.toml" "${extra[@]}" --out "$out" > "$out.log" 2>&1 &
  job=$!
  if ! wait_rows "$out/metrics.jsonl" 1; then
    kill -9 $job 2>/dev/null; tail -20 "$out.log"; fail "$mode: no first round"; continue
  fi
  sleep 1
  victim=$(rank_pid "$out" 2)  # world rank 1: site 1's leader
  kill -STOP "$victim"; start=$(date +%s.%N)
  wait $job; rc=$?
  took=$(python3 -c "import sys, time; print(round(time.time() - float(sys.argv[1]), 1))" "$start")
  kill -9 "$victim" 2>/dev/null
  if [[ $rc -ne 0 ]] && python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) + 5 else 1)" "$took" "$timeout_s"; then
    pass "$mode: job ended ${took}s after the freeze (limit $((timeout_s + 5))s), exit $rc"
  else
    tail -20 "$out.log"; fail "$mode: exit $rc after ${took}s"
  fi
  grep -q "lost: rank 1 (site 1)" "$out.log" && pass "$mode: frozen leader named" \
    || { grep diloco: "$out.log"; fail "$mode: frozen leader not named"; }
done
finish
