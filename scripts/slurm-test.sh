#!/usr/bin/env bash
# Integration test of `study slurm` / `run-one` / `merge` against a real,
# single-node Slurm: installs Debian's slurm-wlm and munge when missing,
# starts munged, slurmctld and slurmd on loopback with a generated config
# (all state in a temporary directory; nothing under /etc is touched), submits
# a small study (2 variants x 2 seeds) as an array job, waits (bounded),
# merges, and checks the merged summary equals a local `study` run of the same
# study. Then it removes one run, checks that `merge` refuses and names it,
# resubmits that task alone with `sbatch --array=I`, and merges again.
#
# Needs root (slurmd launches jobs; apt-get installs). Where the packages
# cannot be installed or the daemons do not come up, it says so and exits 1:
# it never passes without having run the study on Slurm.
#
# Environment:
#   STUDY_BIN            the study binary (default: $CARGO_TARGET_DIR or target, /debug/study;
#                        built if missing)
#   SLURM_TEST_TIMEOUT   seconds to wait for each array job (default 300)
#   SLURM_TEST_KEEP=1    keep the temporary directory (logs, results) for inspection
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
STUDY_BIN=${STUDY_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/study}
TIMEOUT=${SLURM_TEST_TIMEOUT:-300}
T0=$(date +%s.%N)

say() { printf 'slurm-test: %s\n' "$*"; }
fail() {
    printf 'slurm-test: FAILED: %s\n' "$*" >&2
    exit 1
}
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }'; }

# --- 1. Slurm and munge ------------------------------------------------------
T=$(date +%s.%N)
if [ "$(id -u)" -ne 0 ]; then
    fail "this test must run as root (slurmd launches the jobs; apt-get installs Slurm); Slurm was not tested"
fi
missing=()
for tool in munged mungekey slurmctld slurmd sbatch squeue sinfo scontrol; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
    say "installing slurm-wlm and munge with apt-get (missing: ${missing[*]})"
    export DEBIAN_FRONTEND=noninteractive
    install() { apt-get install -y -q --no-install-recommends slurm-wlm munge >/dev/null; }
    # The package lists may be stale or absent in a fresh container: update once and retry.
    if ! install && ! { apt-get update -q >/dev/null && install; }; then
        fail "could not install Debian's slurm-wlm and munge with apt-get; Slurm was not tested"
    fi
    for tool in "${missing[@]}"; do
        command -v "$tool" >/dev/null 2>&1 || fail "$tool is still missing after installing slurm-wlm and munge"
    done
fi
say "$(slurmctld -V), $(munged --version 2>&1 | awk '{print $1}') ready ($(elapsed "$T"))"

if [ ! -x "$STUDY_BIN" ]; then
    say "building the study binary"
    (cd "$ROOT" && cargo build --locked --bin study)
fi
if [ ! -x "$STUDY_BIN" ]; then
    echo "slurm-test: FAILED: no study binary at $STUDY_BIN" >&2
    exit 1
fi
STUDY_BIN=$(readlink -f "$STUDY_BIN")

# --- 2. Daemons on loopback, all state in a temporary directory ---------------
WORK=$(mktemp -d /tmp/rewardlab-slurm.XXXXXX)
chmod 755 "$WORK"
PIDS=()
cleanup() {
    local rc=$?
    set +e
    if [ -n "${JOB:-}" ]; then scancel "$JOB" >/dev/null 2>&1; fi
    # Our daemons, by the pids they wrote, in reverse order of starting.
    for pidfile in "$WORK/slurmd.pid" "$WORK/slurmctld.pid" "$WORK/munge/munged.pid"; do
        [ -f "$pidfile" ] || continue
        pid=$(cat "$pidfile")
        kill "$pid" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null
    done
    if [ "$rc" -ne 0 ]; then
        for log in "$WORK"/slurmctld.log "$WORK"/slurmd.log "$WORK"/munge/munged.log "$WORK"/shared/results/tiny/slurm/logs/*; do
            [ -f "$log" ] || continue
            printf '\n--- last lines of %s\n' "$log" >&2
            tail -n 25 "$log" >&2
        done
    fi
    if [ "${SLURM_TEST_KEEP:-0}" = 1 ]; then
        say "kept $WORK"
    else
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

T=$(date +%s.%N)
mkdir -m 700 "$WORK/munge"
mungekey --create --keyfile="$WORK/munge/munge.key" 2>/dev/null ||
    dd if=/dev/urandom of="$WORK/munge/munge.key" bs=1024 count=1 status=none
chmod 600 "$WORK/munge/munge.key"
MUNGE_SOCKET=$WORK/munge/munge.socket
munged --force --key-file="$WORK/munge/munge.key" --socket="$MUNGE_SOCKET" \
    --pid-file="$WORK/munge/munged.pid" --log-file="$WORK/munge/munged.log" --seed-file="$WORK/munge/munged.seed" ||
    fail "munged did not start"
munge -n -S "$MUNGE_SOCKET" | unmunge -S "$MUNGE_SOCKET" >/dev/null || fail "munge cannot encode and decode a credential"

NODE=$(hostname -s)
# The node as slurmd sees it (CPUs, sockets, cores, threads, memory), renamed to our loopback node.
NODE_LINE=$(slurmd -C | head -n 1 | sed -e "s/^NodeName=[^ ]*/NodeName=$NODE NodeAddr=127.0.0.1/" -e 's/ UpTime=.*//')
CPUS=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$NODE_LINE")
# Ports of our own, away from a real Slurm's 6817/6818.
PORT=$((20000 + RANDOM % 20000))
mkdir -p "$WORK/state" "$WORK/spool" "$WORK/shared"
export SLURM_CONF=$WORK/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=rewardlab-test
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/slurmctld.log
SlurmdLogFile=$WORK/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups in a container: track processes by parentage, bind nothing.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
# Keep finished jobs visible to scontrol for the checks below.
MinJobAge=3600
$NODE_LINE State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -f "$SLURM_CONF" || fail "slurmctld did not start"
slurmd -f "$SLURM_CONF" -N "$NODE" || fail "slurmd did not start"
deadline=$(($(date +%s) + 60))
until [ "$(sinfo -h -n "$NODE" -o '%T' 2>/dev/null)" = idle ]; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "node $NODE is not idle after 60 s: $(sinfo -h -N -o '%N %T %E' 2>&1)"
    sleep 1
done
say "munged, slurmctld and slurmd up on 127.0.0.1:$PORT, node $NODE with $CPUS CPUs ($(elapsed "$T"))"

# --- 3. The study, submitted as an array job --------------------------------
STUDY=$WORK/shared/tiny.toml
cat >"$STUDY" <<EOF
# 2 variants x 2 seeds, 4 steps each: seconds per run with the proxy policy.
name = "tiny"
seeds = 2

[tasks]
source = "synthetic"
seed = 0
files = 40
commits = 2
tasks = 16
held_out_fraction = 0.25

[policy]
kind = "proxy"

[training]
total_steps = 4
prompts_per_step = 2
group_size = 4
eval_every = 4
checkpoint_every = 2

[[variants]]
name = "v2"
file = "$ROOT/rewards/codegrep_v2.reward"

[[variants]]
name = "v3"
file = "$ROOT/rewards/codegrep_v3.reward"
EOF
RESULTS=$WORK/shared/results
SCRIPT=$RESULTS/tiny/slurm/tiny.sbatch

# Waits until array job $1 has no task left in the queue, then checks every task completed.
wait_for() {
    local job=$1 start
    start=$(date +%s)
    while squeue -h -j "$job" -t PENDING,RUNNING,CONFIGURING,COMPLETING,SUSPENDED -o %i 2>/dev/null | grep -q .; do
        if [ $(($(date +%s) - start)) -ge "$TIMEOUT" ]; then
            squeue -j "$job" >&2
            fail "array job $job still queued or running after $TIMEOUT s"
        fi
        sleep 1
    done
    local states
    states=$(scontrol -o show job "$job" | grep -o 'JobState=[A-Z_]*' | sort | uniq -c | tr -s ' ')
    say "array job $job done:$states"
    if scontrol -o show job "$job" | grep -o 'JobState=[A-Z_]*' | grep -qv 'JobState=COMPLETED'; then
        fail "some tasks of job $job did not complete"
    fi
}

T=$(date +%s.%N)
cd "$WORK" # Tasks start in the submission directory; the script must not depend on it.
SBATCH_CMD=$("$STUDY_BIN" slurm "$STUDY" --results "$RESULTS" --partition debug --time 10 --cpus-per-task 1)
[ "$SBATCH_CMD" = "sbatch $SCRIPT" ] || fail "study slurm printed '$SBATCH_CMD', not 'sbatch $SCRIPT'"
grep -q '^#SBATCH --array=0-3$' "$SCRIPT" || fail "the script's array is not 0-3: $(grep array "$SCRIPT")"
JOB=$(sbatch --parsable "$SCRIPT")
say "submitted array job $JOB (4 tasks, $CPUS at a time)"
wait_for "$JOB"
ls "$RESULTS"/tiny/slurm/logs/tiny-"$JOB"_{0,1,2,3}.out >/dev/null || fail "a task's log file is missing"
say "array job of 4 runs took $(elapsed "$T")"

T=$(date +%s.%N)
"$STUDY_BIN" merge "$STUDY" --results "$RESULTS" >"$WORK/merge.out" || fail "study merge failed after every task completed"
say "merge took $(elapsed "$T")"

T=$(date +%s.%N)
"$STUDY_BIN" "$STUDY" --results "$WORK/local" --jobs 2 >/dev/null 2>"$WORK/local.err" || fail "the local study run failed"
say "local run of the same study took $(elapsed "$T")"
# No wall-clock column is in summary.csv/summary.md (timings.csv holds those), so byte equality.
for file in summary.csv summary.md baseline_bm25.csv; do
    cmp "$RESULTS/tiny/$file" "$WORK/local/tiny/$file" || {
        diff "$RESULTS/tiny/$file" "$WORK/local/tiny/$file" >&2
        fail "$file of the Slurm array differs from the local run's"
    }
done
for run in v2/seed-000 v2/seed-001 v3/seed-000 v3/seed-001; do
    cmp "$RESULTS/tiny/runs/$run/metrics.csv" "$WORK/local/tiny/runs/$run/metrics.csv" ||
        fail "runs/$run/metrics.csv of the Slurm array differs from the local run's"
done
say "merged summary.csv, summary.md and every run's metrics.csv equal the local run's"

# --- 4. A lost run: merge names it, resubmitting its task alone completes the study
T=$(date +%s.%N)
rm -rf "$RESULTS/tiny/runs/v3/seed-000"
if "$STUDY_BIN" merge "$STUDY" --results "$RESULTS" >/dev/null 2>"$WORK/merge2.err"; then
    fail "study merge succeeded with run 2 missing"
fi
grep -q "sbatch --array=2 $SCRIPT" "$WORK/merge2.err" || {
    cat "$WORK/merge2.err" >&2
    fail "study merge did not name the command resubmitting task 2"
}
JOB=$(sbatch --parsable --array=2 "$SCRIPT")
say "resubmitted task 2 alone as job $JOB"
wait_for "$JOB"
"$STUDY_BIN" merge "$STUDY" --results "$RESULTS" >/dev/null 2>&1 || fail "study merge failed after the resubmitted task"
cmp "$RESULTS/tiny/summary.csv" "$WORK/local/tiny/summary.csv" || fail "summary.csv differs after resubmitting task 2"
say "resubmitting one task took $(elapsed "$T")"

cat "$WORK/merge.out"
say "PASSED in $(elapsed "$T0")"
