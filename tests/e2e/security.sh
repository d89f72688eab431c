#!/usr/bin/env bash
# [security] key_file between sites launched apart, through a real
# ompi-server: two sites with the shared key train; one of them forges its
# payload's HMAC in round 4 (debug.forge_site): every site leaves it out of
# that round as "unauthenticated" and the round goes on; a site with another
# key, or with none, is refused at the door (exit 2) and the group records
# the refusal; a key file too short is refused before anything starts.
# The refusals are tried while the founder waits for its second site, so the
# group is alive for them however fast or slow its rounds are.
source "$(dirname "$0")/lib.sh"
cd "$WORK"
start_ompi_server "run.out_dir=$WORK/out-"
head -c 32 /dev/urandom | base64 > key
head -c 32 /dev/urandom | base64 > other-key
printf 'short\n' > short-key
{ small_model_toml; printf '[outer]\nrounds = 24\n[sync]\nH = 20\ntimeout_s = 10\n'
  printf '[topology]\njoin = "rendezvous"\nsites = 2\n[metrics]\neval_every = 1\n'
  printf '[security]\nkey_file = "%s/key"\n[rendezvous]\njoin_timeout_s = 120\nrun_id = "sec-%s"\n' "$WORK" $$; } |
  sed -e "s|\[data\]|[data]\npaths = [\"/usr/share/games/fortunes\"]|" > recipe.toml
run_site() {  # run_site INDEX LOG [ARGS...]
  local i=$1 log=$2; shift 2
  timeout 240 "$MPIRUN" --ompi-server "file:$WORK/uri" -np 1 --bind-to none "$DILOCO_BIN" train recipe.toml \
    --set rendezvous.site="$i" --set run.out_dir="$WORK/out-$log" "$@" >"$WORK/$log.log" 2>&1
  local rc=$?
  cat "$WORK/$log.log"
  return $rc
}
( run_site 0 s0 --set debug.forge_site=1 --set debug.forge_round=4 >/dev/null; echo "exit $?" >>"$WORK/s0.log" ) &
s0=$!
expect_exit 2 "key does not match" "a site with another key is refused at the door" -- \
  run_site 1 intruder --set security.key_file="$WORK/other-key" --set rendezvous.join_timeout_s=5
expect_exit 2 "requires a key" "a site without a key is refused at the door" -- \
  run_site 1 keyless --set security.key_file=""
expect_exit 2 "short-key" "a key file under 16 bytes is refused, naming it" -- \
  run_site 1 short --set security.key_file="$WORK/short-key"
( run_site 1 s1 --set debug.forge_site=1 --set debug.forge_round=4 >/dev/null; echo "exit $?" >>"$WORK/s1.log" ) &
s1=$!
wait $s0 $s1
for i in 0 1; do grep -q "^exit 0" "$WORK/s$i.log" || fail "site $i did not finish: $(tail -3 "$WORK/s$i.log")"; done
python3 - "$WORK" <<'PY' && pass "round 4: the forged payload was left out on both sites (unauthenticated), training went on" \
  || fail "the forged payload was not left out"
import json, sys
for s in (0, 1):
    rows = [json.loads(l) for l in open(f"{sys.argv[1]}/out-s{s}/metrics.jsonl")]
    assert len(rows) == 24, len(rows)
    forged = [r for r in rows if r["excluded"]]
    assert [r["round"] for r in forged] == [4], [(r["round"], r["excluded"]) for r in forged]
    assert forged[0]["excluded"][0]["reason"] == "unauthenticated", forged[0]["excluded"]
    assert rows[-1]["train_loss"] < rows[3]["train_loss"]
PY
grep -q '"refused":\[' "$WORK/out-s0/metrics.jsonl" && grep -q "key does not match" "$WORK/out-s0/metrics.jsonl" \
  && pass "the group recorded the refusals in its metrics" || fail "no refusal in the group's metrics"
finish
