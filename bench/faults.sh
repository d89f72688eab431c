#!/usr/bin/env bash
# The membership's fault matrix: sites launched apart (each its own mpirun,
# one real ompi-server), tests/mpi/membership_site as the sites (rounds of
# 0.5 s (2 s in admission cells), sync deadline D = 3 s, ping_s 2 s). In each cell one site
# kills (SIGKILL) or stops (SIGSTOP) itself at a phase of round 6:
#   inner      halfway through the round's compute
#   exchange   as the others enter the round's collective
#   admission  as the others admit a newcomer (one is queued at the door)
#   recovery   as it enters a recovery from another site's loss (a second
#              loss: no strict majority of the last membership is left)
# A stopped site is woken once the survivors went on (it must find itself
# expelled: exit 4); a lost site is then launched again and must be admitted.
# Checks per cell: every process ended with its documented exit code, none
# is left at the cell's time limit, the survivors completed every round with
# the same sums (the harness's stand-in for equal global params), the
# relaunched site was admitted within 2 rounds of its knock. Prints one
# markdown row per cell: outcome, recovery seconds (fault to the survivors'
# next round), rounds from the knock to the admission; exit 1 if any fails.
#   bench/faults.sh [--report] MPIRUN SITE_PROGRAM [CELL...]   CELL: SITES:SIGNAL:VICTIM:PHASE
# Without cells: 3 and 4 sites x kill, stop x every site x every phase.
# --report: exit 0 even when a cell fails (the table says which).
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
fi
ROUNDS=16
FAULT_ROUND=6
SITES_PATTERN="^$SITE c[0-9]"  # this matrix's sites only
source "$(dirname "$0")/../tests/mpi/rendezvous_lib.sh"
last_round() { sed -n 's/^site [0-9]* round \([0-9]*\) epoch.*/\1/p' "$1" | tail -1; }

# cell N SIGNAL VICTIM PHASE: prints "outcome|recovery s|knock->admitted rounds"; 0 when it holds.
cell() {
  local n=$1 sig=$2 v=$3 phase=$4 run="c$RANDOM$RANDOM" dir round_s=0.5 rounds=$ROUNDS
  # A stopped site is woken, must find itself expelled, and is then launched
  # again: the survivors need rounds left for all of it.
  [[ $sig == stop ]] && rounds=$((ROUNDS + 12))
  # Admission cells: rounds long enough that a newcomer launched as round 6
  # begins is queued at the door before that round's boundary.
  [[ $phase == admission ]] && round_s=2
  dir=$work/$run
  mkdir -p "$dir"
  local -a pids=() stays=()
  start() {  # start LOG INDEX [FAULT]
    local log=$dir/$1.log
    ( MEMBERSHIP_FAULT=${3:-} timeout 150 "$MPIRUN" --ompi-server "file:$work/uri" -np 1 "$SITE" "$run" "$2" "$n" \
        "$rounds" "$round_s" 3 >"$log" 2>&1
      echo "exit $?" >>"$log" ) &
    pids+=($!)
    [[ -z ${3:-} ]] && stays+=($!)
  }
  local other=$(((v + 1) % n)) watcher
  for ((i = 0; i < n; ++i)); do
    if ((i == v)); then start "s$i" "$i" "$sig $phase $FAULT_ROUND"
    elif [[ $phase == recovery && $i == "$other" ]]; then start "s$i" "$i" "kill inner $FAULT_ROUND"
    else start "s$i" "$i"; fi
  done
  watcher=$(((v + 2) % n))  # a site that stays
  if [[ $phase == admission ]]; then  # a newcomer queued at the door before round 6's boundary
    wait_for "$dir/s$watcher.log" "round $((FAULT_ROUND - 1)) " 60 || { echo "no start||"; return 1; }
    start newcomer "$n"
  fi
  wait_for "$dir/s$v.log" "fault:" 60 || { echo "fault not reached||"; return 1; }
  local fault_at from_line
  fault_at=$(date +%s.%N)
  from_line=$(($(wc -l <"$dir/s$watcher.log") + 1))
  if [[ $phase == recovery ]]; then  # two losses of n: every other process stops, exit 4
    wait "${stays[@]}" 2>/dev/null
    local bad=0
    for ((i = 0; i < n; ++i)); do
      ((i == v || i == other)) && continue
      grep -q "^exit 4" "$dir/s$i.log" || bad=1
    done
    if [[ $sig == stop ]]; then
      kill -CONT "$(pgrep -f "^$SITE $run $v " | head -1)" 2>/dev/null
    fi
    wait "${pids[@]}" 2>/dev/null
    ((bad)) && { echo "a survivor did not stop with exit 4||"; return 1; }
    [[ $sig == stop ]] && ! grep -q "^exit 4" "$dir/s$v.log" && { echo "the woken site did not exit 4||"; return 1; }
    echo "no majority left: every remaining site stops (exit 4)|-|-"
    return 0
  fi
  local after=$((n - 1))
  [[ $phase == admission ]] && after=$n  # and the newcomer admitted
  wait_for "$dir/s$watcher.log" "sites $after sum" 40 "$from_line" || { echo "survivors did not go on||"; return 1; }
  local recovery
  recovery=$(echo "$(date +%s.%N) - $fault_at" | bc)
  if [[ $sig == stop ]]; then
    kill -CONT "$(pgrep -f "^$SITE $run $v " | head -1)"
    wait_for "$dir/s$v.log" "^exit" 30 || { echo "the woken site did not end||"; return 1; }
    grep -q "^exit 4" "$dir/s$v.log" || { echo "the woken site did not exit 4||"; return 1; }
  fi
  start again "$v"
  wait_for "$dir/again.log" "knocked at door" 40 || { echo "the relaunched site did not knock|$recovery|"; return 1; }
  local knock_round
  knock_round=$(last_round "$dir/s$watcher.log")
  wait "${pids[@]}" 2>/dev/null
  local expect_sites=$n
  [[ $phase == admission ]] && expect_sites=$((n + 1))
  for f in "$dir"/*.log; do
    [[ $f == "$dir/s$v.log" || $f == "$dir/s$other.log" && $phase == recovery ]] && continue
    grep -q "^exit 0" "$f" || { echo "$(basename "$f" .log) did not finish (exit 0)||"; return 1; }
    grep -q "round $rounds epoch .* sites $expect_sites" "$f" ||
      { echo "$(basename "$f" .log) did not end with all $expect_sites sites||"; return 1; }
  done
  local finals
  finals=$(for f in "$dir"/*.log; do
    [[ $f == "$dir/s$v.log" ]] || grep "round $rounds epoch" "$f" | sed 's/^site [0-9]* //'
  done | sort -u | wc -l)
  ((finals == 1)) || { echo "the sites ended with different sums||"; return 1; }
  if [[ $phase == admission ]]; then
    local newcomer_at
    newcomer_at=$(sed -n 's/.*joined late at round \([0-9]*\).*/\1/p' "$dir/newcomer.log")
    ((newcomer_at >= FAULT_ROUND)) || { echo "the newcomer was admitted before the fault (cell missed)|$recovery|"; return 1; }
  fi
  local joined
  joined=$(sed -n 's/.*joined late at round \([0-9]*\).*/\1/p' "$dir/again.log")
  [[ -n $joined ]] || { echo "the relaunched site was not admitted||"; return 1; }
  local wait_rounds=$((joined - knock_round))
  ((wait_rounds <= 2)) || { echo "admitted $wait_rounds rounds after its knock|$recovery|$wait_rounds"; return 1; }
  printf 'survivors went on; %s; relaunched site rejoined|%.1f|%d\n' \
    "$([[ $sig == stop ]] && echo "woken site exited 4" || echo "killed")" "$recovery" "$wait_rounds"
  return 0
}

echo "| sites | fault | site | phase | outcome | recovery (s) | knock -> admitted (rounds) |"
echo "|---:|---|---:|---|---|---:|---:|"
failed=0
for c in "${cells[@]}"; do
  IFS=: read -r n sig v phase <<<"$c"
  out=$(cell "$n" "$sig" "$v" "$phase")
  rc=$?
  IFS='|' read -r outcome rec rounds <<<"$out"
  ((rc == 0)) || { outcome="**FAILED**: $outcome"; failed=1; }
  echo "| $n | $sig | $v | $phase | $outcome | $rec | $rounds |"
  pkill -9 -f "^$SITE c" 2>/dev/null
done
((report)) && exit 0
exit $failed
