#!/usr/bin/env bash
# Three small, independent Slurm clusters side by side on this machine, one per site of
# examples/fabrics/three-site-slurm.yaml, with fake GPU devices so GRES scheduling is real.
#
#   scripts/slurm.sh start     install Slurm + munge if missing (root), start the clusters,
#                              print one line per site: SITE SLURM_CONF
#   scripts/slurm.sh stop      stop every daemon by PID (munged too, if start started it) and
#                              delete the clusters' files
#   scripts/slurm.sh status    the daemons' PIDs, alive or not
#
# The clusters live under $ONECLUSTER_SLURM_DIR (default /tmp/onecluster-slurm), each in its
# own directory with its own ports; munge is shared.  Daemons are stopped by PID, never by
# name (see ../shared/notes/scheduler.md §6 for what was measured to work here).
set -euo pipefail

BASE=${ONECLUSTER_SLURM_DIR:-/tmp/onecluster-slurm}
HOST=$(hostname -s)
# site  ctld-port  gres (type:count,...)
SITES=(
    "shanghai 6817 h800:4,a100:2"
    "singapore 6827 h100:4"
    "tokyo 6837 h100:2,l40s:2"
)

log() { echo "slurm.sh: $*" >&2; }

ensure_installed() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
        && command -v sbatch >/dev/null && command -v munged >/dev/null; then
        return 0
    fi
    if [[ $(id -u) -ne 0 ]]; then
        log "Slurm is not installed; run this once as root to install it"
        exit 1
    fi
    log "installing slurmctld slurmd slurm-client munge with apt-get"
    if ! ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1; then
        apt-get update -q >&2
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurmctld slurmd slurm-client munge >&2
}

start_munge() {
    install -d -o munge -g munge -m 755 /run/munge /var/log/munge /var/lib/munge
    if [[ ! -s /etc/munge/munge.key ]]; then
        runuser -u munge -- /usr/sbin/mungekey --create >&2 || true
    fi
    if [[ -S /run/munge/munge.socket.2 ]] && munge -n >/dev/null 2>&1; then
        return 0
    fi
    runuser -u munge -- /usr/sbin/munged
    mkdir -p "$BASE"
    touch "$BASE/munged.started"  # ours to stop again
    for _ in $(seq 50); do munge -n >/dev/null 2>&1 && return 0; sleep 0.1; done
    log "munged did not start"
    exit 1
}

write_site() {  # site port gres
    local site=$1 port=$2 gres=$3 dir="$BASE/$1"
    mkdir -p "$dir/spool" "$dir/slurmd" "$dir/log" "$dir/dev"
    local gres_conf="AutoDetect=off"$'\n' node_gres="" first=0 type count i
    IFS=, read -ra parts <<<"$gres"
    for part in "${parts[@]}"; do
        type=${part%%:*}; count=${part##*:}
        for ((i = first; i < first + count; i++)); do
            [[ -e "$dir/dev/nvidia$i" ]] || mknod "$dir/dev/nvidia$i" c 195 "$i"
        done
        gres_conf+="NodeName=$site-node Name=gpu Type=$type File=$dir/dev/nvidia[$first-$((first + count - 1))]"$'\n'
        node_gres+="${node_gres:+,}gpu:$type:$count"
        first=$((first + count))
    done
    printf '%s' "$gres_conf" >"$dir/gres.conf"
    cat >"$dir/slurm.conf" <<CONF
ClusterName=$site
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$dir/spool
SlurmdSpoolDir=$dir/slurmd
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
GresTypes=gpu
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MinJobAge=3600
KillWait=5
NodeName=$site-node NodeAddr=127.0.0.1 Port=$((port + 1)) CPUs=32 RealMemory=64000 Gres=$node_gres State=UNKNOWN
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
}

pid_alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

start() {
    ensure_installed
    start_munge
    for entry in "${SITES[@]}"; do
        read -r site port gres <<<"$entry"
        local dir="$BASE/$site"
        write_site "$site" "$port" "$gres"
        if ! pid_alive "$dir/slurmctld.pid"; then
            SLURM_CONF=$dir/slurm.conf slurmctld -i
        fi
        if ! pid_alive "$dir/slurmd.pid"; then
            SLURM_CONF=$dir/slurm.conf slurmd -N "$site-node"
        fi
    done
    for entry in "${SITES[@]}"; do
        read -r site _ _ <<<"$entry"
        local dir="$BASE/$site" ok=0
        for _ in $(seq 100); do
            if SLURM_CONF=$dir/slurm.conf sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
                ok=1; break
            fi
            sleep 0.1
        done
        if ((ok == 0)); then
            log "the cluster of $site did not come up; see $dir/log"
            exit 1
        fi
        echo "$site $dir/slurm.conf"
    done
}

stop() {
    for entry in "${SITES[@]}"; do
        read -r site _ _ <<<"$entry"
        local dir="$BASE/$site"
        for daemon in slurmd slurmctld; do
            if pid_alive "$dir/$daemon.pid"; then
                kill "$(cat "$dir/$daemon.pid")" 2>/dev/null || true
            fi
        done
    done
    for entry in "${SITES[@]}"; do
        read -r site _ _ <<<"$entry"
        local dir="$BASE/$site"
        for daemon in slurmd slurmctld; do
            for _ in $(seq 50); do pid_alive "$dir/$daemon.pid" || break; sleep 0.1; done
            if pid_alive "$dir/$daemon.pid"; then kill -9 "$(cat "$dir/$daemon.pid")" 2>/dev/null || true; fi
        done
    done
    if [[ -f "$BASE/munged.started" && -f /run/munge/munged.pid ]]; then
        kill "$(cat /run/munge/munged.pid)" 2>/dev/null || true
    fi
    rm -rf "$BASE"
}

status() {
    for entry in "${SITES[@]}"; do
        read -r site _ _ <<<"$entry"
        for daemon in slurmctld slurmd; do
            local pidfile="$BASE/$site/$daemon.pid"
            if pid_alive "$pidfile"; then
                echo "$site $daemon $(cat "$pidfile") alive"
            else
                echo "$site $daemon - down"
            fi
        done
    done
}

case "${1:-start}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: scripts/slurm.sh [start|stop|status]" >&2; exit 2 ;;
esac
