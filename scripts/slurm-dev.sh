#!/usr/bin/env bash
# Start a throw-away one-node Slurm (munge + slurmctld + slurmd) for Horus's tests and benchmarks.
#
#   bash scripts/slurm-dev.sh [DIR]         # prints the SLURM_CONF path: DIR/etc/slurm.conf
#   export SLURM_CONF=$(bash scripts/slurm-dev.sh /tmp/horus-slurm)
#   bash scripts/slurm-dev.sh stop [DIR]
#
# Debian's slurm-wlm 22.05 without systemd: a private munged (own key and socket), slurmctld -D
# and slurmd -D in the background, state, spool, logs and pid files under DIR (default
# /tmp/horus-slurm). The node has HORUS_SLURM_GPUS (default 4) fake GPU devices (plain files
# DIR/dev/nvidia0.., mknod) declared as typed GRES gpu:fake:N, and 16 CPUs whatever the machine has
# (SlurmdParameters=config_overrides), so that several pilots fit on one node.
# Idempotent: a daemon that answers is left alone. Run as root (slurmd runs jobs as their users;
# Debian's slurm-wlm and munge packages must be installed: apt-get install slurm-wlm munge).
#
# Environment knobs:
#   HORUS_SLURM_GPUS       fake GPUs on the node (default 4)
#   HORUS_SLURM_PORT       slurmctld's port; slurmd uses the next one (default 16817)
set -euo pipefail

CMD=start
if [ "${1:-}" = stop ] || [ "${1:-}" = start ]; then CMD=$1; shift; fi
DIR=$(realpath -m "${1:-/tmp/horus-slurm}")
GPUS=${HORUS_SLURM_GPUS:-4}
PORT=${HORUS_SLURM_PORT:-16817}
CONF=$DIR/etc/slurm.conf
say() { echo "slurm-dev: $*" >&2; }

stop_pid() {  # the daemon whose pid file is $1, by its id; waits up to 10 s for it to go
    local f=$1 pid
    [ -f "$f" ] || return 0
    pid=$(cat "$f" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
    fi
    rm -f "$f"
}

if [ "$CMD" = stop ]; then
    stop_pid "$DIR/run/slurmd.pid"
    stop_pid "$DIR/run/slurmctld.pid"
    stop_pid "$DIR/run/munged.pid"
    exit 0
fi

for bin in munged slurmctld slurmd sinfo; do
    if ! command -v "$bin" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$bin" ]; then
        say "$bin not found: install Debian's slurm-wlm and munge (apt-get install slurm-wlm munge)"
        exit 1
    fi
done
if [ "$(id -u)" != 0 ]; then
    say "slurmd must run as root (it starts jobs as their users)"
    exit 1
fi
export PATH=$PATH:/usr/sbin
HOST=$(hostname -s)
mkdir -p "$DIR"/{etc,state,spool,log,run,dev,munge}
chmod 700 "$DIR/munge"

# --- munge: a private daemon with its own key and socket
if [ ! -s "$DIR/munge/munge.key" ]; then
    dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$DIR/munge/munge.key"
fi
SOCK=$DIR/munge/munge.socket
if ! munge -s "$SOCK" -n </dev/null >/dev/null 2>&1; then
    rm -f "$SOCK" "$SOCK.lock"
    munged -f --socket="$SOCK" --key-file="$DIR/munge/munge.key" --pid-file="$DIR/run/munged.pid" \
        --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed"
fi

# --- fake GPU devices and the configuration
# (character devices with NVIDIA's major number and no driver behind them: slurmd wants devices)
for i in $(seq 0 $((GPUS - 1))); do
    [ -c "$DIR/dev/nvidia$i" ] || { rm -f "$DIR/dev/nvidia$i"; mknod "$DIR/dev/nvidia$i" c 195 "$i"; }
done
cat >"$DIR/etc/gres.conf" <<EOF
NodeName=$HOST Name=gpu Type=fake File=$DIR/dev/nvidia[0-$((GPUS - 1))]
EOF
cat >"$CONF.new" <<EOF
ClusterName=horus-dev
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SOCK
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmdParameters=config_overrides
KillWait=5
MinJobAge=120
InactiveLimit=0
MessageTimeout=10
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=16 RealMemory=8000 Gres=gpu:fake:$GPUS State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
mv "$CONF.new" "$CONF"
export SLURM_CONF=$CONF

if ! scontrol ping 2>/dev/null | grep -q UP; then
    stop_pid "$DIR/run/slurmctld.pid"
    # -i: ignore state that does not match the configuration (a GPU count changed, say)
    nohup slurmctld -D -i -f "$CONF" >>"$DIR/log/slurmctld.out" 2>&1 &
    echo $! >"$DIR/run/slurmctld.pid"
fi
if ! { [ -f "$DIR/run/slurmd.pid" ] && kill -0 "$(cat "$DIR/run/slurmd.pid")" 2>/dev/null; }; then
    nohup slurmd -D -f "$CONF" >>"$DIR/log/slurmd.out" 2>&1 &
    echo $! >"$DIR/run/slurmd.pid"
fi

# --- wait (up to 60 s) for the node to take jobs
for _ in $(seq 300); do
    state=$(sinfo -h -n "$HOST" -o %t 2>/dev/null || true)
    case "$state" in
        idle* | mix* | alloc*) echo "$CONF"; exit 0 ;;
        down* | drain*) scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1 || true ;;
    esac
    sleep 0.2
done
say "the node did not come up (state: ${state:-none}); see $DIR/log/"
tail -n 20 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 2>/dev/null || true
exit 1
