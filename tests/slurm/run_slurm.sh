# A real single-node Slurm cluster: munged, slurmctld and slurmd started here
# with a generated slurm.conf in a temporary folder, the project's own
# scripts/slurm/diloco.sbatch submitted with a tiny recipe, then a second job
# sent USR1 mid-run, which must checkpoint, requeue and resume past the
# checkpointed round. Every daemon started here is stopped by its pid.
# Exits 77 (skipped) only when Slurm or munge is not installed.
set -uo pipefail
cd "$(dirname "$0")/../.."
for tool in slurmctld slurmd munged sbatch scontrol; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed (scripts/setup installs slurm-wlm and munge)"; exit 77; }
done
[[ $EUID -eq 0 ]] || { echo "SKIP: starting slurmd needs root"; exit 77; }
DILOCO_BIN=$(realpath "${DILOCO_BIN:-build/diloco}")
T=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done; kill -9 "$p" 2>/dev/null; done
  rm -rf "$T"
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
dump() { for f in "$T"/*.log "$T"/job*.out; do [[ -f $f ]] && { echo "--- $f"; tail -20 "$f"; }; done; }

# munge: a fresh key, its own socket.
dd if=/dev/urandom bs=1 count=1024 of="$T/munge.key" 2>/dev/null
chmod 600 "$T/munge.key"
mkdir -p "$T/munge"
munged --force --foreground --key-file "$T/munge.key" --socket "$T/munge.sock" --pid-file "$T/munge/munged.pid" \
  --seed-file "$T/munge/seed" --log-file "$T/munged.log" &
pids+=($!)

host=$(hostname -s)
port=$((20000 + RANDOM % 20000))
mkdir -p "$T/state" "$T/spool"
cat > "$T/slurm.conf" <<CONF
ClusterName=dilocotest
SlurmctldHost=$host
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
# cred_expire is also how long a requeued job waits before it may start
# again (default 120 s, which with scheduling came within seconds of the
# 180 s the requeue check allows): 20 s keeps the check far from its deadline.
AuthInfo=socket=$T/munge.sock,cred_expire=20
CryptoType=crypto/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
JobRequeue=1
ReturnToService=2
MpiDefault=none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MinJobAge=600
NodeName=$host CPUs=$(getconf _NPROCESSORS_ONLN) State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
# Two jobs per core, so two sites of two ranks fit on this small node at once.
PartitionName=shared Nodes=ALL MaxTime=INFINITE State=UP OverSubscribe=FORCE:2
CONF
export SLURM_CONF=$T/slurm.conf
for _ in $(seq 50); do [[ -S $T/munge.sock ]] && break; sleep 0.1; done
slurmctld -D -f "$SLURM_CONF" > "$T/slurmctld.stdout.log" 2>&1 &
pids+=($!)
sleep 1
slurmd -D -f "$SLURM_CONF" > "$T/slurmd.stdout.log" 2>&1 &
pids+=($!)
up=0
for _ in $(seq 100); do
  sinfo -h -o %T 2>/dev/null | grep -qE "^idle" && { up=1; break; }
  sleep 0.2
done
((up)) && pass "slurm cluster up ($host, port $port)" || { dump; fail "slurm did not come up"; exit 1; }

cat > "$T/tiny.toml" <<'TOML'
[model]
d_model = 32
[data]
batch_size = 4
[outer]
rounds = 6
[sync]
H = 10
[topology]
sites = 2
[checkpoint]
every = 1
[metrics]
eval_every = 1000
TOML
state_of() { scontrol show job "$1" 2>/dev/null | grep -oE "JobState=[A-Z_]+" | cut -d= -f2; }
rows() { python3 -c 'import sys; print(sum(1 for _ in open(sys.argv[1])))' "$1" 2>/dev/null || echo 0; }

# 1. A job runs to the end.
job=$(DILOCO_BIN=$DILOCO_BIN DILOCO_OUT=$T/out1 sbatch --parsable -N1 -n2 --ntasks-per-node=2 --output="$T/job1.out" \
      scripts/slurm/diloco.sbatch "$T/tiny.toml") || { fail "sbatch refused the script"; exit 1; }
for _ in $(seq 600); do [[ $(state_of "$job") =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL)$ ]] && break; sleep 0.2; done
[[ $(state_of "$job") == COMPLETED ]] && pass "job $job COMPLETED" || { dump; fail "job $job ended $(state_of "$job")"; }
grep -q "summary (2 sites, 2 ranks)" "$T/job1.out" && pass "job log has the summary" || fail "job log"
[[ $(rows "$T/out1/metrics.jsonl") -eq 6 ]] && pass "job metrics: 6 rounds" || fail "job metrics"

# 2. USR1 mid-run: checkpoint, requeue, resume past the checkpointed round.
job=$(DILOCO_BIN=$DILOCO_BIN DILOCO_OUT=$T/out2 sbatch --parsable -N1 -n2 --ntasks-per-node=2 --output="$T/job2.out" \
      scripts/slurm/diloco.sbatch "$T/tiny.toml" --set sync.H=300) || { fail "sbatch refused the script"; exit 1; }
for _ in $(seq 600); do [[ $(rows "$T/out2/metrics.jsonl") -ge 2 ]] && break; sleep 0.1; done
scancel --signal=USR1 --batch "$job"
stopped_at=0
for _ in $(seq 600); do grep -q "requeueing job" "$T/job2.out" 2>/dev/null && break; sleep 0.1; done
stopped_at=$(rows "$T/out2/metrics.jsonl")
grep -q "stopped by a signal after round" "$T/job2.out" && pass "USR1: ranks checkpointed and stopped after round $stopped_at" \
  || { dump; fail "USR1: no checkpoint stop"; }
for _ in $(seq 900); do [[ $(state_of "$job") == COMPLETED ]] && break; sleep 0.2; done
[[ $(state_of "$job") == COMPLETED ]] && pass "requeued job COMPLETED" || { dump; fail "requeued job ended $(state_of "$job")"; }
grep -q "SLURM_RESTART_COUNT=1" "$T/job2.out" && pass "SLURM_RESTART_COUNT=1 logged" || fail "restart count not logged"
grep -q "resuming from .*ckpt-0*$stopped_at" "$T/job2.out" && pass "resumed from the round-$stopped_at checkpoint" \
  || { grep -n "resum" "$T/job2.out"; fail "did not resume from round $stopped_at"; }
(( stopped_at < 6 )) && [[ $(rows "$T/out2/metrics.jsonl") -eq 6 ]] && pass "finished all 6 rounds after the requeue" \
  || fail "rounds after requeue: $(rows "$T/out2/metrics.jsonl") (stopped at $stopped_at)"

# 3. Two sites of two ranks, each its own job, joined through one rendezvous.
ompi-server --no-daemonize -r "$T/rendezvous.uri" > "$T/ompi-server.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [[ -s $T/rendezvous.uri ]] && break; sleep 0.1; done
site_jobs=()
for site in 0 1; do
  site_jobs+=("$(DILOCO_BIN=$DILOCO_BIN DILOCO_OUT=$T/site$site DILOCO_RENDEZVOUS=$T/rendezvous.uri DILOCO_SITE=$site \
    sbatch --parsable -p shared -N1 -n2 --ntasks-per-node=2 --output="$T/site$site.out" scripts/slurm/site.sbatch \
    "$T/tiny.toml" --set rendezvous.run_id=slurm-$$ --set rendezvous.join_timeout_s=120)")
done
for job in "${site_jobs[@]}"; do
  for _ in $(seq 900); do [[ $(state_of "$job") =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL)$ ]] && break; sleep 0.2; done
done
if [[ $(state_of "${site_jobs[0]}") == COMPLETED && $(state_of "${site_jobs[1]}") == COMPLETED ]] &&
   grep -q "summary (2 sites, 2 ranks)" "$T/site0.out" && grep -q "summary (2 sites, 2 ranks)" "$T/site1.out" &&
   [[ $(rows "$T/site0/metrics.jsonl") -eq 6 && $(rows "$T/site1/metrics.jsonl") -eq 6 ]]; then
  pass "two sites of two ranks as two jobs with a shared rendezvous: both COMPLETED, 6 rounds each"
else
  for f in "$T"/site*.out; do echo "--- $f"; grep -v '^ \|= \|^\[' "$f" | tail -15; done
  fail "two site jobs: ${site_jobs[*]} ended $(state_of "${site_jobs[0]}") $(state_of "${site_jobs[1]}")"
fi

if ((failures)); then echo "$failures check(s) failed"; exit 1; fi
echo "all checks passed"
