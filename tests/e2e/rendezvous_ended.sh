#!/usr/bin/env bash
# A newcomer queued when the group ends (docs/membership.md, "Joining"):
# sites 0 and 1 of three, launched apart with a key, start as a group of two
# (rendezvous.min_sites) and train 2 rounds with blocking sync, which admits
# a knock at the next round boundary and never after the last. Site 2,
# launched once round 1 is done, knocks during round 2 and is queued. When
# the group has trained its last round, the door's keeper tells it, sealed
# with the key, that the run ended: it exits 0 within seconds of the group
# (not after its rendezvous.join_timeout_s of 60 s), naming the run and the
# round, and writes no metrics and no checkpoint. The group's sites exit 0.
# Then sites launched after the door closed learn it from the published end.
source "$(dirname "$0")/lib.sh"
cd "$WORK"
start_ompi_server "rendezvous.run_id=ended-$$"
head -c 32 /dev/urandom | base64 > key
{ small_model_toml; printf '[outer]\nrounds = 2\n[sync]\nH = 1500\ntimeout_s = 10\n'
  printf '[topology]\njoin = "rendezvous"\nsites = 3\n[checkpoint]\nevery = 1\n[metrics]\neval_every = 1000\n'
  printf '[security]\nkey_file = "%s/key"\n' "$WORK"
  printf '[rendezvous]\nmin_sites = 2\njoin_timeout_s = 4\nrun_id = "ended-%s"\n' $$; } > r.toml
sed -e "s|\[data\]|[data]\npaths = [\"/usr/share/games/fortunes\"]|" r.toml > recipe.toml
site() {  # site INDEX [ARGS...]: launches site INDEX in the background
  local i=$1; shift
  ( timeout 80 "$MPIRUN" --ompi-server "file:$WORK/uri" -np 1 --bind-to none "$DILOCO_BIN" train recipe.toml \
      --set rendezvous.site="$i" --set run.out_dir="$WORK/s$i" "$@" >"$WORK/site$i.log" 2>&1
    echo "exit $? at $(date +%s.%N)" >>"$WORK/site$i.log" ) &
}
ended() {  # ended INDEX: waits (at most 90 s) for site INDEX's exit line; prints its code and time
  for _ in $(seq 900); do
    grep -qE "^exit [0-9]+ at " "$WORK/site$1.log" 2>/dev/null && break
    sleep 0.1
  done
  grep -E "^exit [0-9]+ at " "$WORK/site$1.log" | tail -1 | cut -d' ' -f2,4
}

site 0; site 1
wait_rows "$WORK/s0/metrics.jsonl" 1 || { fail "the group of two did not train round 1"; tail -n 5 "$WORK"/site[01].log; }
[[ $(rows "$WORK/s0/metrics.jsonl") -eq 1 ]] || fail "the group had finished round 2 before site 2 was launched (rounds too short)"
site 2 --set rendezvous.join_timeout_s=60
read -r code0 at0 <<< "$(ended 0)"
read -r code1 _ <<< "$(ended 1)"
read -r code2 at2 <<< "$(ended 2)"
[[ $code0 == 0 && $code1 == 0 ]] && pass "the group of two trained its 2 rounds and exited 0" \
  || { fail "the group's sites exited ${code0:-?} and ${code1:-?}"; tail -n 5 "$WORK/site0.log" "$WORK/site1.log"; }
grep -q "queued until the group's next round boundary" "$WORK/site2.log" \
  || { fail "site 2 was not queued at the door during round 2"; tail -n 5 "$WORK/site2.log"; }
took() {  # took FROM TO: the seconds between two of `date +%s.%N`
  python3 -c 'import sys; print(f"{float(sys.argv[2]) - float(sys.argv[1]):.1f}")' "$1" "$2"
}
told_ended() {  # told_ended INDEX CODE SECONDS LIMIT LINE WHO: site INDEX exited CODE 0 within LIMIT s, saying LINE
  local i=$1 code=$2 secs=$3 limit=$4 line=$5 who=$6
  if [[ $code == 0 ]] && grep -q "$line" "$WORK/site$i.log" \
     && python3 -c 'import sys; sys.exit(float(sys.argv[1]) > float(sys.argv[2]))' "$secs" "$limit"; then
    pass "$who learned that the run ended and exited 0 (${secs} s)"
  else
    fail "$who: exit ${code:-none} (${secs} s; wanted 0, the run's end named, within $limit s)"
    tail -n 5 "$WORK/site$i.log"
  fi
}
told_ended 2 "$code2" "$(took "${at0:-0}" "${at2:-0}")" 10 \
  "run \"ended-$$\" ended at round 2 before a round boundary admitted this site" "the queued newcomer (after the keeper)"
[[ ! -e $WORK/s2/metrics.jsonl && -z $(find "$WORK/s2" -path '*checkpoint*' -type f 2>/dev/null) ]] \
  && pass "the newcomer wrote no metrics and no checkpoint" || fail "the newcomer wrote training output"

# After the door has closed, the end the keeper published tells the same:
# site 2, and the founder launched again with the same rounds, exit 0 at
# once, the founder's metrics and checkpoints untouched (it would otherwise
# wait out a recovery's length, 44 s here, and found the run again).
rows_before=$(rows "$WORK/s0/metrics.jsonl")
checkpoints_before=$(find "$WORK/s0" -path '*checkpoint*' -type f | sort | xargs md5sum | md5sum)
for i in 2 0; do
  launched=$(date +%s.%N)
  site "$i" --set rendezvous.join_timeout_s=60
  read -r code at <<< "$(ended "$i")"
  told_ended "$i" "$code" "$(took "$launched" "${at:-0}")" 15 \
    "run \"ended-$$\" ended at round 2 and this site trains 2 rounds" "site $i, launched after the door closed,"
done
[[ $(rows "$WORK/s0/metrics.jsonl") == "$rows_before" && ! -e $WORK/s2/metrics.jsonl \
   && $(find "$WORK/s0" -path '*checkpoint*' -type f | sort | xargs md5sum | md5sum) == "$checkpoints_before" ]] \
  && pass "their metrics and checkpoints are as the group left them" || fail "a site launched after the end wrote output"

# The founder launched with more rounds takes the run further: it founds at
# once (the group is gone), resumes from its round-2 checkpoint and trains
# round 3 alone.
launched=$(date +%s.%N)
site 0 --set outer.rounds=3 --set rendezvous.min_sites=1 --resume auto
read -r code at <<< "$(ended 0)"
founded=$(grep -c "founded run \"ended-$$\"" "$WORK/site0.log")
if [[ $code == 0 && $founded == 1 && $(rows "$WORK/s0/metrics.jsonl") == 3 ]] \
   && grep -q "resuming from .*(round 2)" "$WORK/site0.log" \
   && python3 -c 'import sys; sys.exit(float(sys.argv[1]) > 40)' "$(took "$launched" "${at:-0}")"; then
  pass "the founder with outer.rounds = 3 founded the run again at once and trained round 3 ($(took "$launched" "${at:-0}") s)"
else
  fail "the founder with outer.rounds = 3: exit ${code:-none}, founded ${founded} times, $(rows "$WORK/s0/metrics.jsonl") rows, $(took "$launched" "${at:-0}") s"
  tail -n 8 "$WORK/site0.log"
fi
finish
