#!/usr/bin/env bash
# The membership's fault matrix: sites launched apart (each its own mpirun,
# one real ompi-server), SITE_PROGRAM as the sites: the real trainer
# (build/diloco) or the membership harness (tests/mpi/membership_site);
# bench/faults_sites.sh has both. Rounds of about 0.5 s (2 s in admission
# cells), sync deadline D = 3 s, ping_s 2 s. In each cell one site
# kills (SIGKILL) or stops (SIGSTOP) itself at a phase of round 6:
#   inner      halfway through the round's compute
#   exchange   as the others enter the round's collective
#   admission  as the others admit a newcomer (one is queued at the door)
#   recovery   as it enters a recovery from another site's loss (a second
#              loss: no strict majority of the last membership is left)
# A stopped site is woken once the survivors went on (it must find itself
# expelled: exit 4); a lost site is then launched again and must be admitted.
# Newcomer cells (SITE "new", PHASE "join-STEP"): a newcomer, launched as
# round 5 ends (rounds of 2 s), is killed (kill) or gives up (exit: exit 2,
# as its own join timeout would) at a step of joining: hello (sent), queued,
# port (received, "ready" not sent), ready (sent: the group is entering the
# accept), connected (before proving itself on the MPI connection), merged
# (before the roster). The group must go on without it; it is launched again
# and must be admitted.
# Checks per cell: every process ended with its documented exit code, none
# is left at the cell's time limit, the survivors completed every round with
# the same global params (the trainer: equal final eval loss, and its own
# hash check every round; the harness: equal sums), the
# relaunched site was admitted within 2 rounds of its knock (the trainer:
# and took the group's state, its residual cleared). Prints one
# markdown row per cell: outcome, recovery seconds (fault to the survivors'
# next round), rounds from the knock to the admission; exit 1 if any fails.
#   bench/faults.sh [--report] MPIRUN SITE_PROGRAM [CELL...]   CELL: SITES:SIGNAL:VICTIM:PHASE
# Without cells: 3 and 4 sites x kill, stop x every site x every phase, then
# 3 sites x kill, exit x every step of joining (VICTIM "new"), and 3 sites
# of the real trainer x a cut link to each (SIGNAL "cut", PHASE "link").
# --report: exit 0 even when a cell fails (the table says which). When a
# cell fails, the scratch folder with every cell's logs is kept (its path
# goes to stderr); KEEP_WORK=1 keeps it always.
set -uo pipefail
report=0
[[ ${1:-} == --report ]] && { report=1; shift; }
MPIRUN=$1
SITE=$2
shift 2
cells=("$@")
if ((${#cells[@]} == 0)); then
  for n in 3 4; do for sig in kill stop; do for ((v = 0; v < n; ++v)); do
    for phase in inner exchange admission recovery; do cells+=("$n:$sig:$v:$phase"); done
  done; done; done
  for sig in kill exit; do for step in hello queued port ready connected merged; do
    cells+=("3:$sig:new:join-$step")
  done; done
  for ((v = 0; v < 3; ++v)); do cells+=("3:cut:$v:link"); done
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=16
FAULT_ROUND=6
source "$(dirname "$0")/../tests/mpi/rendezvous_lib.sh"  # $work, the ompi-server, wait_for
source "$(dirname "$0")/faults_sites.sh"  # SITES_PATTERN (read by the cleanup), start, pid_of, ...

# rejoin_and_end INDEX WATCH EXPECT_SITES RECOVERY NAME...: launches site
# INDEX again (`start`, as "again"), waits for every process (the cell's
# `pids`), and checks that the sites NAME... and the relaunched one all
# ended with exit 0 and EXPECT_SITES sites on the same global params, that
# it was admitted within 2 rounds of its knock (rounds as site WATCH
# counts them) and took the group's state as designed (`took_state`). Sets the cell's wait_rounds (knock to admission); failing,
# prints "why|RECOVERY|" (the cell's outcome) and returns 1. Runs in the
# cell's shell: it waits on the cell's own processes.
rejoin_and_end() {
  local index=$1 watch=$2 expect=$3 recovery=$4 knock_round joined name why
  shift 4
  start again "$index"
  wait_for "$dir/again.log" "knocked at door" 60 || { echo "the relaunched site did not knock|$recovery|"; return 1; }
  knock_round=$(rounds_done "$watch")
  wait "${pids[@]}" 2>/dev/null
  for name in "$@" again; do
    grep -q "^exit 0" "$dir/$name.log" || { echo "$name did not finish (exit 0)|$recovery|"; return 1; }
    why=$(ended "$name" "$expect")
    [[ -z $why ]] || { echo "$name $why|$recovery|"; return 1; }
  done
  (($(for name in "$@" again; do final_state "$name"; done | sort -u | wc -l) == 1)) ||
    { echo "the sites ended on different global params|$recovery|"; return 1; }
  joined=$(joined_round again "$index" "$watch")
  [[ -n $joined ]] || { echo "the relaunched site was not admitted|$recovery|"; return 1; }
  why=$(took_state again "$joined")
  [[ -z $why ]] || { echo "the relaunched site: $why|$recovery|"; return 1; }
  (((joined - knock_round) <= 2)) ||
    { echo "admitted $((joined - knock_round)) rounds after its knock|$recovery|$((joined - knock_round))"; return 1; }
  wait_rounds=$((joined - knock_round))
}

# cell N SIGNAL VICTIM PHASE: prints "outcome|recovery s|knock->admitted rounds"; 0 when it holds.
cell() {
  local n=$1 sig=$2 v=$3 phase=$4 run="c$RANDOM$RANDOM" dir round_s=0.5 rounds=$ROUNDS capacity=$1
  # Admission cells: rounds long enough that a newcomer launched as round 6
  # begins is queued at the door before that round's boundary.
  [[ $phase == admission ]] && round_s=2 capacity=$((n + 1))
  # A stopped site is woken, must find itself expelled, and is then launched
  # again: the survivors need rounds left for all of it.
  [[ $sig == stop ]] && rounds=$((ROUNDS + $(stop_rounds "$round_s")))
  dir=$work/$run
  mkdir -p "$dir"
  local -a pids=() stays=()
  local other=$(((v + 1) % n)) watcher
  for ((i = 0; i < n; ++i)); do
    if ((i == v)); then start "s$i" "$i" "$sig $phase $FAULT_ROUND"
    elif [[ $phase == recovery && $i == "$other" ]]; then start "s$i" "$i" "kill inner $FAULT_ROUND"
    else start "s$i" "$i"; fi
  done
  watcher=$(((v + 2) % n))  # a site that stays
  if [[ $phase == admission ]]; then  # a newcomer queued at the door before round 6's boundary
    wait_round "s$watcher" $((FAULT_ROUND - 1)) 90 || { echo "no start||"; return 1; }
    start newcomer "$n"
  fi
  wait_for "$dir/s$v.log" "fault:" 90 || { echo "fault not reached||"; return 1; }
  local fault_at from_line
  fault_at=$(date +%s.%N)
  from_line=$(mark "s$watcher")
  if [[ $phase == recovery ]]; then  # two losses of n: every other process stops, exit 4
    wait "${stays[@]}" 2>/dev/null
    local bad=0
    for ((i = 0; i < n; ++i)); do
      ((i == v || i == other)) && continue
      grep -q "^exit 4" "$dir/s$i.log" || bad=1
    done
    if [[ $sig == stop ]]; then
      kill -CONT "$(pid_of "$v")" 2>/dev/null
    fi
    wait "${pids[@]}" 2>/dev/null
    ((bad)) && { echo "a survivor did not stop with exit 4||"; return 1; }
    [[ $sig == stop ]] && ! grep -q "^exit 4" "$dir/s$v.log" && { echo "the woken site did not exit 4||"; return 1; }
    echo "no majority left: every remaining site stops (exit 4)|-|-"
    return 0
  fi
  local after=$((n - 1))
  [[ $phase == admission ]] && after=$n  # and the newcomer admitted
  wait_sites "s$watcher" "$after" 40 "$from_line" || { echo "survivors did not go on||"; return 1; }
  local recovery
  recovery=$(echo "$(date +%s.%N) - $fault_at" | bc)
  if [[ $sig == stop ]]; then
    kill -CONT "$(pid_of "$v")"
    wait_for "$dir/s$v.log" "^exit [0-9]" 30 || { echo "the woken site did not end||"; return 1; }
    grep -q "^exit 4" "$dir/s$v.log" || { echo "the woken site did not exit 4||"; return 1; }
  fi
  local names=() wait_rounds
  for f in "$dir"/*.log; do [[ $f == "$dir/s$v.log" ]] || names+=("$(basename "$f" .log)"); done
  local expect_sites=$n
  [[ $phase == admission ]] && expect_sites=$((n + 1))
  rejoin_and_end "$v" "s$watcher" "$expect_sites" "$recovery" "${names[@]}" || return 1
  if [[ $phase == admission ]]; then
    local newcomer_at
    newcomer_at=$(joined_round newcomer "$n" "s$watcher")
    ((${newcomer_at:-0} >= FAULT_ROUND)) || { echo "the newcomer was admitted before the fault (cell missed)|$recovery|"; return 1; }
  fi
  printf 'survivors went on; %s; relaunched site rejoined|%.1f|%d\n' \
    "$([[ $sig == stop ]] && echo "woken site exited 4" || echo "killed")" "$recovery" "$wait_rounds"
  return 0
}

# newcomer_cell N SIGNAL STEP: a newcomer (site N) lost at a step of joining.
newcomer_cell() {
  local n=$1 sig=$2 step=$3 run="c$RANDOM$RANDOM" dir rounds=$ROUNDS round_s=2 capacity=$(($1 + 1))
  dir=$work/$run
  mkdir -p "$dir"
  local -a pids=() stays=()
  for ((i = 0; i < n; ++i)); do start "s$i" "$i"; done
  wait_round s0 $((FAULT_ROUND - 1)) 90 || { echo "no start||"; return 1; }
  start newcomer "$n" "$sig $step 0"
  wait_for "$dir/newcomer.log" "fault:" 60 || { echo "fault not reached||"; return 1; }
  local fault_at from_line
  fault_at=$(date +%s.%N)
  from_line=$(mark s1)
  # The group goes on without it: a round of n sites completed after the fault.
  wait_sites s1 "$n" 40 "$from_line" || { echo "the group did not go on||"; return 1; }
  local recovery
  recovery=$(echo "$(date +%s.%N) - $fault_at" | bc)
  wait_for "$dir/newcomer.log" "^exit [0-9]" 30 || { echo "the newcomer did not end|$recovery|"; return 1; }
  local want=137
  [[ $sig == exit ]] && want=2
  grep -q "^exit $want" "$dir/newcomer.log" || { echo "the newcomer ended otherwise than exit $want|$recovery|"; return 1; }
  local wait_rounds
  local names=()
  for ((i = 0; i < n; ++i)); do names+=("s$i"); done
  rejoin_and_end "$n" s1 $((n + 1)) "$recovery" "${names[@]}" || return 1
  local how
  how=$(grep -hoE "refused.*site-$n: [^;]*" "$dir"/s*.log | head -1 | sed 's/.*\(site-\)/\1/')
  [[ -n $how ]] && how="refused $how"
  printf 'group went on (%s); newcomer %s; relaunched, admitted|%.1f|%d\n' "${how:-it was never admitted}" \
    "$([[ $sig == exit ]] && echo "gave up (exit 2)" || echo "killed")" "$recovery" "$wait_rounds"
  return 0
}

# wait_for_pid PID SECONDS: whether the process ended within SECONDS.
wait_for_pid() {
  local i
  for ((i = 0; i < $2 * 10; ++i)); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  return 1
}

# dump_stacks PATTERN DIR: every thread's stack of each process whose command
# line matches PATTERN, to DIR/stacks-PID.txt, and the main thread's top
# frames of each to stderr (what a hung site was doing).
dump_stacks() {
  local pid
  for pid in $(pgrep -f "$1"); do
    echo "still running: $(tr '\0' ' ' <"/proc/$pid/cmdline" | cut -c1-160)" >&2
    command -v gdb >/dev/null || continue
    timeout 60 gdb -p "$pid" -batch -ex "thread apply all bt 30" >"$2/stacks-$pid.txt" 2>&1
    awk '/^Thread 1 /{main=1; next} /^Thread /{main=0} main && /^#[0-9]+ /' "$2/stacks-$pid.txt" | head -12 |
      cut -c1-200 | sed 's/^/    /' >&2
  done
}

# cut_cell N VICTIM: the real trainer (DILOCO_BIN, default build/diloco),
# N sites in network namespaces (scripts/netsim --rendezvous, needs root):
# VICTIM's link is cut after 8 s; the cut-off site must stop as a minority
# (exit 4), the others go on; 6 s after the cut its link is back and it is
# launched again with --resume auto; all must finish every round on the
# same global params (equal eval loss; the trainer's own check compares the
# params' hash every round and would stop them, exit 3).
# The group must still be running well after the relaunched site knocks
# (cut at 8 s, relaunched at 14 s, a knock seconds later). With 30 rounds
# of H 20 (28 s in a failed run on 2 cores), once the inner step got faster, the
# group could end right after a late knock, leaving the newcomer queued at a
# door that closed, then alone until rendezvous.join_timeout_s (exit 2).
cut_cell() {
  local n=$1 v=$2 dir=$work/cut$v rounds=60 bin=${DILOCO_BIN:-$ROOT/build/diloco}
  "$ROOT/scripts/netsim" --check >/dev/null 2>&1 || { echo "skipped: $("$ROOT/scripts/netsim" --check 2>&1 | tail -1)||"; return 0; }
  local mbps; mbps=$(printf '100%.0s,' $(seq "$n")); mbps=${mbps%,}
  ( cd "$ROOT" && timeout 300 scripts/netsim --sites "$n" --mbps "$mbps" --bin "$bin" --rendezvous "$dir" \
      --cut "$v@8+6" -- train recipes/quickstart.toml --set outer.rounds=$rounds --set sync.H=20 \
      --set data.batch_size=8 --set sync.timeout_s=5 --set checkpoint.every=2 --set metrics.eval_every=1 \
      --set rendezvous.run_id="cut-$$-$v" >"$dir.log" 2>&1 ) &
  local netsim=$! other=$(((v + 1) % n))
  wait_for "$dir.log" "cut site" 60 || { wait $netsim; echo "the cut was not reached||"; return 1; }
  local cut_at recovery="" knock_round=""
  cut_at=$(date +%s.%N)
  local m=$dir/site-$other/metrics.jsonl
  wait_for "$m" "\"left\":\[\"site-$v\"\]" 60 && recovery=$(echo "$(date +%s.%N) - $cut_at" | bc)
  wait_for "$dir/site-$v-again.log" "knocked at door" 90 && knock_round=$(wc -l <"$m")
  # Bounded well inside the test's own limit, so a site that hangs is named,
  # with every thread's stack (gdb), and the logs are kept (CUT_WAIT_S: the
  # bound in seconds, 150).
  if ! wait_for_pid "$netsim" "${CUT_WAIT_S:-150}"; then
    dump_stacks "^$bin train .*rendezvous.run_id=cut-$$-$v( |\$)" "$dir"
    # The sites and their mpiruns (not netsim: it then ends and removes its namespaces).
    pkill -9 -f "^(mpirun|$bin) .*rendezvous.run_id=cut-$$-$v( |\$)"
    wait $netsim
    echo "a site was still running ${CUT_WAIT_S:-150} s after the relaunch's knock (stacks in $dir/stacks-*.txt)|$recovery|"
    return 1
  fi
  wait $netsim
  local rc=$?
  [[ -n $recovery ]] || { echo "the connected sites did not go on||"; return 1; }
  grep -q "site $v (cut off) exited 4" "$dir.log" || { echo "the cut-off site did not stop with exit 4|$recovery|"; return 1; }
  ((rc == 0)) || { echo "a site's last process ended with exit $rc|$recovery|"; return 1; }
  [[ -n $knock_round ]] || { echo "the relaunched site did not knock|$recovery|"; return 1; }
  local verdict
  verdict=$(python3 - "$dir" "$n" "$v" "$rounds" "$knock_round" <<'PY'
import json, sys
out, n, v, rounds, knock = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
rows = [[json.loads(l) for l in open(f"{out}/site-{i}/metrics.jsonl")] for i in range(n)]
for i, r in enumerate(rows):
    if r[-1]["round"] != rounds or r[-1]["members"] != n:
        sys.exit(print(f"site {i} ended at round {r[-1]['round']} with {r[-1]['members']} sites"))
if len({r[-1]["eval_loss"] for r in rows}) != 1:
    sys.exit(print("the sites ended on different global params"))
joined = next((x["round"] for x in rows[(int(v) + 1) % n]
               if any(f"site-{v}" in m.get("joined", []) for m in x.get("membership", []))), None)
if joined is None:
    sys.exit(print("the relaunched site was not admitted"))
print(joined - knock)
PY
)
  [[ $verdict =~ ^-?[0-9]+$ ]] || { echo "$verdict|$recovery|"; return 1; }
  ((verdict <= 2)) || { echo "admitted $verdict rounds after its knock|$recovery|$verdict"; return 1; }
  printf 'connected sites went on; cut-off site exited 4; relaunched once its link was back, rejoined|%.1f|%d\n' \
    "$recovery" "$verdict"
}

echo "| sites | fault | site | phase | outcome | recovery (s) | knock -> admitted (rounds) |"
echo "|---:|---|---:|---|---|---:|---:|"
failed=0
for c in "${cells[@]}"; do
  IFS=: read -r n sig v phase <<<"$c"
  if [[ $sig == cut ]]; then out=$(cut_cell "$n" "$v")
  elif [[ $v == new ]]; then out=$(newcomer_cell "$n" "$sig" "$phase")
  else out=$(cell "$n" "$sig" "$v" "$phase"); fi
  rc=$?
  IFS='|' read -r outcome rec rounds <<<"$out"
  # A failing cell's logs are kept: the cleanup leaves the scratch folder and names it.
  ((rc == 0)) || { outcome="**FAILED**: $outcome"; failed=1; KEEP_WORK=1; }
  echo "| $n | $sig | $v | $phase | $outcome | $rec | $rounds |"
  pkill -9 -f "$SITES_PATTERN" 2>/dev/null
done
((report)) && exit 0
exit $failed
