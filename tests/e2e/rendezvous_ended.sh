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
after=$(python3 -c 'import sys; print(f"{float(sys.argv[2]) - float(sys.argv[1]):.1f}")' "${at0:-0}" "${at2:-0}")
if [[ $code2 == 0 ]] && grep -q "run \"ended-$$\" ended at round 2 before a round boundary admitted this site" "$WORK/site2.log" \
   && python3 -c 'import sys; sys.exit(float(sys.argv[1]) > 10)' "$after"; then
  pass "the queued newcomer learned that the run ended and exited 0, ${after} s after the group's keeper"
else
  fail "the queued newcomer: exit ${code2:-none}, ${after} s after the group's keeper (wanted 0, the run's end named, within 10 s)"
  tail -n 5 "$WORK/site2.log"
fi
[[ ! -e $WORK/s2/metrics.jsonl && -z $(find "$WORK/s2" -path '*checkpoint*' -type f 2>/dev/null) ]] \
  && pass "the newcomer wrote no metrics and no checkpoint" || fail "the newcomer wrote training output"
finish
