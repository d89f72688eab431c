# The sites of bench/faults.sh, sourced by it: how a cell starts a site and
# reads its progress, for either kind of site program.
#  - the membership harness (tests/mpi/membership_site): rounds of ROUND_S
#    seconds, one line per round with the leaders' sums, which stand in for
#    the global params;
#  - the real trainer (build/diloco, chosen when the program's name is
#    diloco): `diloco train` on a small GPT, checkpoints every 2 rounds, a
#    lost site launched again with --resume auto, the fault raised by the
#    recipe's [debug] fault_* keys; the sites' metrics.jsonl tell the rounds,
#    members and the final eval loss (the trainer itself compares a hash of
#    the global params every round and stops on a mismatch, exit 3);
#    a relaunched site's first row says it took the group's state and
#    cleared its error-feedback residual (int8 keeps one);
#    SYNC_OVERLAP=delayed overlaps each round's exchange with the next
#    round's inner steps (sync.overlap); SYNC_OVERLAP=streaming syncs the
#    model in 2 fragments inside each round, each overlapping a quarter of
#    the round's steps; SYNC_MODE=data-parallel averages every inner
#    step's gradients instead (sync.mode).
# Both read the cell's dir, run, n (sites), rounds and round_s, and
# `capacity` (sites the run may hold: n, or n + 1 with a newcomer).
# Each function takes a site by NAME (its log is DIR/NAME.log).
# stop_rounds ROUND_S: the rounds a stopped site's cell adds, so the
# survivors are still training when the woken site has stopped and is
# launched again (a trainer takes seconds from its launch to its knock; the
# harness none).
if [[ $(basename "$SITE") == diloco ]]; then
  stop_rounds() { awk -v s="$1" 'BEGIN { printf "%d", 12 + 12 / s }'; }
  SITES_PATTERN="^$SITE train .*rendezvous.run_id=c[0-9]"
  # Inner steps per round for rounds of about round_s seconds (3 sites on 2
  # cores, about 17 ms a step); long rounds (admission cells) half as long
  # again, as a trainer takes about 3 s from its launch to its knock.
  steps_for() { awk -v s="$1" 'BEGIN { printf "%d", s < 1 ? s * 60 : s * 90 }'; }
  # start NAME INDEX [FAULT]: FAULT is "SIGNAL PHASE ROUND" ([debug] fault_*).
  start() {
    local log=$dir/$1.log out=$dir/site-$2 fault=()
    if [[ -n ${3:-} ]]; then
      local sig phase round
      read -r sig phase round <<<"$3"
      fault=(--set debug.fault_site="$2" --set debug.fault_signal="$sig" --set debug.fault_phase="$phase"
        --set debug.fault_round="$round")
    fi
    local H overlap=()
    H=$(steps_for "$round_s")
    [[ -n ${SYNC_OVERLAP:-} ]] && overlap=(--set sync.overlap="$SYNC_OVERLAP")
    [[ ${SYNC_OVERLAP:-} == streaming ]] && overlap+=(--set sync.fragments=2 --set sync.overlap_steps=$((H / 4)))
    [[ -n ${SYNC_MODE:-} ]] && overlap+=(--set sync.mode="$SYNC_MODE")
    echo "$out" >"$dir/$1.out"
    ( timeout 240 "$MPIRUN" --ompi-server "file:$work/uri" -np 1 --bind-to none "$SITE" train "$work/recipe.toml" \
        --set rendezvous.site="$2" --set run.out_dir="$out" --set rendezvous.run_id="$run" \
        --set topology.sites="${capacity:-$n}" --set outer.rounds="$rounds" --set sync.H="$H" \
        "${overlap[@]}" --resume auto "${fault[@]}" >"$log" 2>&1
      echo "exit $?" >>"$log" ) &
    pids+=($!)
    [[ -z ${3:-} ]] && stays+=($!)
    return 0
  }
  metrics_of() { echo "$(cat "$dir/$1.out")/metrics.jsonl"; }
  pid_of() { pgrep -f "^$SITE train .*rendezvous.site=$1 .*rendezvous.run_id=$run( |\$)" | head -1; }
  rounds_done() { sed -n 's/^{"round":\([0-9]*\),.*/\1/p' "$(metrics_of "$1")" 2>/dev/null | tail -1; }
  wait_round() { wait_for "$(metrics_of "$1")" "^{\"round\":$2," "$3"; }
  mark() { echo $(($(wc -l <"$(metrics_of "$1")") + 1)); }
  wait_sites() { wait_for "$(metrics_of "$1")" "\"members\":$2," "$3" "$4"; }
  # joined_round NAME INDEX WATCH: the round at whose end NAME (site INDEX) was admitted.
  joined_round() {
    python3 -c 'import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if any(sys.argv[2] in m.get("joined", []) for m in r.get("membership", [])): print(r["round"])' \
      "$(metrics_of "$3")" "site-$2" | tail -1
  }
  # ended NAME EXPECT: empty when NAME finished every round with EXPECT sites; else why not.
  ended() {
    python3 -c 'import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
last = rows[-1] if rows else {}
if last.get("round") != int(sys.argv[2]) or last.get("members") != int(sys.argv[3]):
    print("ended at round", last.get("round"), "with", last.get("members"), "sites")' \
      "$(metrics_of "$1")" "$rounds" "$2" 2>&1 | tail -1
  }
  # What every site ended on: the final eval loss (equal global params give equal losses).
  final_state() { sed -n 's/.*"eval_loss":\([^,]*\),.*/\1/p' "$(metrics_of "$1")" | tail -1; }
  # took_state NAME JOINED: empty when NAME, relaunched and admitted after
  # round JOINED, took the group's state of that round once and cleared its
  # error-feedback residual (int8 keeps one; one resumed from a checkpoint
  # held some before); else why not.
  took_state() {
    python3 - "$(metrics_of "$1")" "$2" "$dir/$1.log" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
took = [r["took_state"] for r in rows if "took_state" in r]
resumed = "resuming from" in open(sys.argv[3]).read()
if len(took) != 1:
    sys.exit(print(f"{len(took)} of its rows say it took the group's state"))
t = took[0]
if t["round"] != int(sys.argv[2]) or t["residual_after"] != 0 or (resumed and t["residual_before"] == 0):
    print(f"it took the group's state as {t} (admitted after round {sys.argv[2]}, resumed: {resumed})")
PY
  }
  # The harness's recipe's keys the cells rely on: deadline D = 3 s, ping 2 s;
  # before round 1 the founder waits join_timeout_s for a site it has room for.
  { printf '[model]\nd_model = 64\n[data]\nbatch_size = 8\npaths = ["/usr/share/games/fortunes"]\n'
    printf '[inner]\nlr = 2e-3\nwarmup_steps = 10\n[sync]\ntimeout_s = 3\n[topology]\njoin = "rendezvous"\n'
    printf '[rendezvous]\nping_s = 2\njoin_timeout_s = 12\n[checkpoint]\nevery = 2\n[metrics]\neval_every = 1000\n'
    printf '[compression]\ncodec = "int8"\n'
  } >"$work/recipe.toml"
else
  stop_rounds() { echo 12; }
  SITES_PATTERN="^$SITE c[0-9]"
  start() {
    local log=$dir/$1.log
    ( MEMBERSHIP_FAULT=${3:-} timeout 150 "$MPIRUN" --ompi-server "file:$work/uri" -np 1 "$SITE" "$run" "$2" "$n" \
        "$rounds" "$round_s" 3 >"$log" 2>&1
      echo "exit $?" >>"$log" ) &
    pids+=($!)
    [[ -z ${3:-} ]] && stays+=($!)
    return 0
  }
  pid_of() { pgrep -f "^$SITE $run $1 " | head -1; }
  rounds_done() { sed -n 's/^site [0-9]* round \([0-9]*\) epoch.*/\1/p' "$dir/$1.log" | tail -1; }
  wait_round() { wait_for "$dir/$1.log" "round $2 " "$3"; }
  mark() { echo $(($(wc -l <"$dir/$1.log") + 1)); }
  wait_sites() { wait_for "$dir/$1.log" "sites $2 sum" "$3" "$4"; }
  joined_round() { sed -n 's/.*joined late at round \([0-9]*\).*/\1/p' "$dir/$1.log"; }
  ended() { grep -q "round $rounds epoch .* sites $2" "$dir/$1.log" || echo "did not end with all $2 sites"; }
  final_state() { grep "round $rounds epoch" "$dir/$1.log" | sed 's/^site [0-9]* //'; }
  took_state() { :; }  # the harness has no training state beyond its sums
fi
