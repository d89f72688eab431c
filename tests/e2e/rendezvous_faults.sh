#!/usr/bin/env bash
# Sites launched apart, the two faults that used to break them (each site
# its own mpirun through a real ompi-server, 3 sites of one rank):
# 1. site 0, the door's keeper, frozen (SIGSTOP): the others go on; woken
#    (SIGCONT), it stops as a minority (exit 4) with a checkpoint; launched
#    again with --resume auto it finds the live group through the next
#    keeper's door and rejoins (it used to found a group of its own);
# 2. rounds of several seconds, a site killed and launched again with a
#    join timeout far shorter than a round: it waits queued at the door and
#    is admitted at the next boundary, and the survivors never stall (a
#    newcomer that gave up used to hang them in MPI's accept).
# Every process has a time limit and must end with its documented code; the
# sites end on the same global params.
source "$(dirname "$0")/lib.sh"
cd "$WORK"
start_ompi_server "rendezvous.run_id=faults-$$"
{ small_model_toml; printf '[sync]\ntimeout_s = 5\n[topology]\njoin = "rendezvous"\nsites = 3\n'
  printf '[checkpoint]\nevery = 2\n[metrics]\neval_every = 1\n[rendezvous]\njoin_timeout_s = 60\n'; } |
  sed -e "s|\[data\]|[data]\npaths = [\"/usr/share/games/fortunes\"]|" > recipe.toml
site() {  # site RUN INDEX [ARGS...]: site INDEX of run RUN in the background; log RUN-INDEX.log (appended)
  local run=$1 i=$2; shift 2
  ( timeout 200 "$MPIRUN" --ompi-server "file:$WORK/uri" -np 1 --bind-to none "$DILOCO_BIN" train recipe.toml \
      --set rendezvous.site="$i" --set run.out_dir="$WORK/$run-$i" --set rendezvous.run_id="faults-$$-$run" "$@" \
      >>"$WORK/$run-$i.log" 2>&1
    echo "exit $?" >>"$WORK/$run-$i.log" ) &
  pids+=($!)
}
pids=()
wait_sites() { wait "${pids[@]}"; pids=(); }  # not a bare wait: the server runs in the background too
pid_of() { pgrep -f "^$DILOCO_BIN train .*rendezvous.site=$2 .*rendezvous.run_id=faults-$$-$1( |\$)" | head -1; }
has() { grep -q "$2" "$WORK/$1/metrics.jsonl" 2>/dev/null; }
wait_has() {  # wait_has OUTDIR PATTERN SECONDS
  for _ in $(seq $(( $3 * 10 ))); do has "$1" "$2" && return 0; sleep 0.1; done; return 1
}
last() { python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readlines()[-1])[sys.argv[2]])' \
  "$WORK/$1/metrics.jsonl" "$2" 2>/dev/null; }
exits() {  # exits RUN CODE0 CODE1 CODE2: the last exit line of each site's log
  local run=$1; shift
  for i in 0 1 2; do
    local want=$1; shift
    local got; got=$(grep "^exit " "$WORK/$run-$i.log" | tail -1)
    [[ $got == "exit $want" ]] || { fail "$run: site $i ended with '${got:-no exit}', not exit $want:" \
      "$(grep -v '^ \|^--\|^$' "$WORK/$run-$i.log" | tail -4)"; return 1; }
  done
}

# 1. The keeper frozen, woken, launched again.
for i in 0 1 2; do site keeper $i --set outer.rounds=90 --set sync.H=20; done
wait_rows "$WORK/keeper-2/metrics.jsonl" 3 || fail "keeper: three sites did not train"
kill -STOP "$(pid_of keeper 0)"
stopped=$(date +%s.%N)
wait_has keeper-1 '"left":\["site-0"\]' 30 && pass "keeper frozen: sites 1 and 2 went on $(echo "$(date +%s.%N) - $stopped" | bc) s later" \
  || fail "keeper frozen: the others did not go on"
kill -CONT "$(pid_of keeper 0)"
for _ in $(seq 300); do grep -q "^exit [0-9]" "$WORK/keeper-0.log" && break; sleep 0.1; done
grep -q "^exit 4" "$WORK/keeper-0.log" && grep -q "checkpoint of round" "$WORK/keeper-0.log" \
  && pass "woken, site 0 stopped as a minority (exit 4) with a checkpoint" || fail "woken site 0: $(tail -3 "$WORK/keeper-0.log")"
site keeper 0 --set outer.rounds=90 --set sync.H=20 --resume auto
wait_has keeper-1 '"joined":\["site-0"\]' 60 && pass "site 0 launched again with --resume auto rejoined the live group" \
  || fail "site 0 launched again did not rejoin: $(grep -v '^ \|^--\|^$' "$WORK/keeper-0.log" | tail -3)"
grep -q "door 1 of run" "$WORK/keeper-0.log" && pass "it came in through the new keeper's door" \
  || fail "site 0 did not name the door it joined through"
wait_sites
exits keeper 0 0 0 && pass "keeper: every site ended with exit 0"
[[ $(last keeper-1 members) == 3 && $(last keeper-0 members) == 3 ]] && pass "keeper: three sites at the end" \
  || fail "keeper: $(last keeper-1 members) members at the end"
[[ $(last keeper-0 eval_loss) == "$(last keeper-1 eval_loss)" && $(last keeper-1 eval_loss) == "$(last keeper-2 eval_loss)" ]] \
  && pass "keeper: the three sites end on the same global params" \
  || fail "keeper: final eval losses differ: $(last keeper-0 eval_loss) $(last keeper-1 eval_loss) $(last keeper-2 eval_loss)"

# 2. Long rounds; a relaunched site with a 3 s join timeout waits queued.
for i in 0 1 2; do site long $i --set outer.rounds=16 --set sync.H=150; done
wait_rows "$WORK/long-2/metrics.jsonl" 2 || fail "long rounds: three sites did not train"
kill -9 "$(pid_of long 2)"
wait_has long-0 '"left":\["site-2"\]' 60 || fail "long rounds: the survivors did not go on after kill -9"
site long 2 --set outer.rounds=16 --set sync.H=150 --resume auto --set rendezvous.join_timeout_s=3
wait_has long-0 '"joined":\["site-2"\]' 60 && pass "long rounds: the site launched again waited queued and was admitted" \
  || fail "long rounds: the site launched again was not admitted: $(grep -v '^ \|^--\|^$' "$WORK/long-2.log" | tail -3)"
wait_sites
exits long 0 0 0 && pass "long rounds: every site ended with exit 0 (nobody stalled)"
python3 - "$WORK/long-0/metrics.jsonl" <<'PY' && pass "long rounds: the survivors completed every round" || fail "long rounds: rounds missing"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["round"] for r in rows] == list(range(1, 17)), [r["round"] for r in rows]
assert rows[-1]["members"] == 3, rows[-1]["members"]
PY
finish
