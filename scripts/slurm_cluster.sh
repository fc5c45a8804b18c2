#!/usr/bin/env bash
# A real Slurm cluster on this one machine, for tests and local campaigns.
#
#   scripts/slurm_cluster.sh up      install (if missing), configure, start, wait until usable
#   scripts/slurm_cluster.sh down    stop every daemon this script started
#   scripts/slurm_cluster.sh status  exit 0 when sinfo and sacct both work
#   scripts/slurm_cluster.sh env     print the exports callers need (eval "$(... env)")
#
# Cluster "archbench": two virtual nodes n1, n2 on this host (one slurmd each),
# partition "debug", accounting through slurmdbd + MariaDB so that sacct works
# (the Slurm executor plugin polls sacct). Both nodes carry the feature "bench" (for
# --constraint) and the QOS "bench" exists and is granted to root (for --qos). Each node
# declares 2 GPUs as generic resources (GresTypes=gpu, Gres=gpu:2), so jobs can ask
# --gres=gpu:N or --gpus=N, Slurm sets CUDA_VISIBLE_DEVICES in them, and sacct shows
# gres/gpu in their TRES. Nothing here is a GPU: Slurm 22.05's slurmd drops a GPU without a
# File= ("Removing file-less GPU") and sets CUDA_VISIBLE_DEVICES only from device files, so
# gres.conf names $STATE/dev/gpu0, gpu1: links to /dev/null (a character device; with
# TaskPlugin=task/none nothing constrains or opens them). Daemons are started by hand (no systemd);
# all state, configs, logs and pid files live in $ARCHBENCH_SLURM_DIR
# (default /tmp/archbench-slurm) and SLURM_CONF points there. One exception:
# snakemake-executor-plugin-slurm-jobstep removes SLURM_CONF from the environment
# of the srun it runs inside each job, so `up` also links /etc/slurm/slurm.conf to
# our config when that file is absent (never replacing a real one; `down` unlinks it).
# Ports: slurmctld 16817, slurmdbd 16819, MariaDB 16306 (127.0.0.1), slurmd 17001-17002.
set -euo pipefail

STATE=${ARCHBENCH_SLURM_DIR:-/tmp/archbench-slurm}
TIMEOUT=${ARCHBENCH_SLURM_TIMEOUT:-120}   # seconds to wait for the cluster in `up`
CLUSTER=archbench
NODES=(n1 n2)
CTLD_PORT=16817
DBD_PORT=16819
DB_PORT=16306
NODE_MEM_MB=4096                          # RealMemory of each virtual node
NODE_FEATURE=bench                        # node feature a job can ask for (--constraint)
QOS=bench                                 # QOS a job can ask for (--qos), besides "normal"
NODE_GPUS=2                               # GPUs per virtual node (gres on /dev/null links)
PACKAGES=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server)

export SLURM_CONF=$STATE/etc/slurm.conf
SYSTEM_CONF=/etc/slurm/slurm.conf
# Default munge socket: Slurm 22.05's slurmdbd connections ignore AuthInfo=socket=.
MUNGE_SOCKET=/run/munge/munge.socket.2
DB_SOCKET=$STATE/mysql/run/mysqld.sock

log() { echo "slurm_cluster: $*" >&2; }
die() { log "$*"; exit 1; }

# ---------------------------------------------------------------- processes ----
# alive PIDFILE NAME: the pid in PIDFILE is running and is the program NAME
# (guards against a stale pid file whose number was reused).
alive() {
    local pid
    [ -r "$1" ] || return 1
    pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]
}

# stop PIDFILE NAME: TERM, wait up to 15 s, then KILL; removes the pid file.
stop() {
    local pid i
    if alive "$1" "$2"; then
        pid=$(cat "$1")
        kill -TERM "$pid" 2>/dev/null || true
        for i in $(seq 150); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "$2 ($pid) ignored TERM, killing"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        log "stopped $2 ($pid)"
    fi
    rm -f "$1"
}

# wait_for SECONDS DESCRIPTION COMMAND...: retry COMMAND every 0.5 s until it succeeds.
wait_for() {
    local secs=$1 what=$2 end
    shift 2
    end=$((SECONDS + secs))
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $end ] || die "timed out after ${secs}s waiting for $what (logs: $STATE/log)"
        sleep 0.5
    done
}

# ------------------------------------------------------------------- checks ----
sinfo_ok() {
    # Both nodes answer and can take jobs (idle, or busy with jobs already).
    local states
    states=$(sinfo -h -N -p debug -o '%N %t' 2>/dev/null) || return 1
    [ "$(grep -cE '^n[12] (idle|mix|alloc|comp)$' <<<"$states")" -eq 2 ]
}
sacct_ok() { sacct -n -X -S now-1hours >/dev/null 2>&1; }
status() { [ -r "$SLURM_CONF" ] && sinfo_ok && sacct_ok; }

# ------------------------------------------------------------------ install ----
install_packages() {
    local missing=() p
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing ${missing[*]}"
    # Keep package scripts from starting system-wide daemons; we start our own.
    local policy=/usr/sbin/policy-rc.d own_policy=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && own_policy=1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 \
        "${missing[@]}" >/dev/null || { [ $own_policy = 1 ] && rm -f "$policy"; die "apt-get install failed"; }
    [ $own_policy = 1 ] && rm -f "$policy"
    return 0
}

# ------------------------------------------------------------------ configs ----
# write_if_changed FILE: replace FILE with stdin when the content differs;
# returns 0 when it changed (so the daemon reading it is restarted).
write_if_changed() {
    local tmp
    tmp=$(mktemp "$1.XXXX")
    cat >"$tmp"
    if [ -f "$1" ] && cmp -s "$tmp" "$1"; then
        rm -f "$tmp"
        return 1
    fi
    chmod 644 "$tmp"
    mv "$tmp" "$1"
}

CONF_CHANGED=0
write_configs() {
    local host cpus pass
    host=$(hostname -s)
    cpus=$(nproc)
    install -d -m 755 "$STATE" "$STATE/etc" "$STATE/log" "$STATE/run" "$STATE/spool"
    install -d -m 755 -o slurm -g slurm "$STATE/spool/ctld" "$STATE/log/slurm" "$STATE/run/slurm"
    install -d -m 1777 "$STATE/tmp" "${NODES[@]/#/$STATE/tmp/}"
    install -d -m 755 -o munge -g munge "$STATE/munge"
    install -d -m 755 -o mysql -g mysql "$STATE/mysql" "$STATE/mysql/run"
    [ -s "$STATE/etc/db.pass" ] || (umask 077; head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$STATE/etc/db.pass")
    pass=$(cat "$STATE/etc/db.pass")

    write_if_changed "$SLURM_CONF" <<EOF && CONF_CHANGED=1 || true
# Generated by scripts/slurm_cluster.sh: local test cluster, two virtual nodes on $host.
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=slurm
AuthType=auth/munge
StateSaveLocation=$STATE/spool/ctld
SlurmctldPidFile=$STATE/run/slurm/slurmctld.pid
SlurmctldLogFile=$STATE/log/slurm/slurmctld.log
# %n expands to the virtual node name: one spool/pid/log per slurmd.
SlurmdSpoolDir=$STATE/spool/slurmd-%n
SlurmdPidFile=$STATE/run/slurmd-%n.pid
SlurmdLogFile=$STATE/log/slurmd-%n.log
# Per-node temporary space: PMIx creates its per-step directories there, which would
# collide between two slurmd of one host in a shared /tmp.
TmpFS=$STATE/tmp/%n
# Node lines describe virtual nodes, not this machine's hardware.
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Without a default, a job without --mem takes the whole node's memory.
DefMemPerCPU=1000
MailProg=/bin/true
# Finished jobs stay visible to scontrol/squeue for 5 minutes.
MinJobAge=300
ReturnToService=2
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
# GPUs are generic resources (counts, gres.conf); sacct's TRES fields show gres/gpu.
GresTypes=gpu
AccountingStorageTRES=gres/gpu
NodeName=n[1-2] NodeHostname=$host NodeAddr=127.0.0.1 Port=17001-17002 CPUs=$cpus RealMemory=$NODE_MEM_MB Features=$NODE_FEATURE Gres=gpu:$NODE_GPUS State=UNKNOWN
PartitionName=debug Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP
EOF

    # GPUs: links to /dev/null, not devices (see the header); nothing to detect.
    install -d -m 755 "$STATE/dev"
    for i in $(seq 0 $((NODE_GPUS - 1))); do ln -sfn /dev/null "$STATE/dev/gpu$i"; done
    write_if_changed "$STATE/etc/gres.conf" <<EOF && CONF_CHANGED=1 || true
# Generated by scripts/slurm_cluster.sh: $NODE_GPUS GPUs per node on /dev/null links.
AutoDetect=off
NodeName=n[1-2] Name=gpu File=$STATE/dev/gpu[0-$((NODE_GPUS - 1))]
EOF

    # slurmdbd refuses a config that others can read or that its SlurmUser does not own.
    write_if_changed "$STATE/etc/slurmdbd.conf" <<EOF && CONF_CHANGED=1 || true
# Generated by scripts/slurm_cluster.sh
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=slurm
PidFile=$STATE/run/slurm/slurmdbd.pid
LogFile=$STATE/log/slurm/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$pass
StorageLoc=slurm_acct_db
EOF
    chown slurm:slurm "$STATE/etc/slurmdbd.conf"
    chmod 600 "$STATE/etc/slurmdbd.conf"

    link_system_conf
}

# Default config path for srun inside Snakemake jobs (see the header).
link_system_conf() {
    if [ -L "$SYSTEM_CONF" ] || [ ! -e "$SYSTEM_CONF" ]; then
        install -d -m 755 "$(dirname "$SYSTEM_CONF")"
        ln -sfn "$SLURM_CONF" "$SYSTEM_CONF"
    elif [ "$(readlink -f "$SYSTEM_CONF")" != "$SLURM_CONF" ]; then
        log "warning: $SYSTEM_CONF exists; srun inside Snakemake jobs will use it, not $SLURM_CONF"
    fi
}

# ------------------------------------------------------------------ daemons ----
start_munge() {
    alive "$STATE/munge/munged.pid" munged && return 0
    # A munged already serving the default socket (e.g. the system's) is reused.
    munge -n >/dev/null 2>&1 && return 0
    install -d -m 755 -o munge -g munge /run/munge
    [ -s /etc/munge/munge.key ] || { mungekey --create --keyfile=/etc/munge/munge.key; chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key; }
    install -d -m 700 -o munge -g munge "$STATE/munge/lib"
    log "starting munged"
    runuser -u munge -- munged --socket="$MUNGE_SOCKET" --pid-file="$STATE/munge/munged.pid" \
        --log-file="$STATE/munge/munged.log" --seed-file="$STATE/munge/lib/munge.seed" --force 9>&-
    wait_for 20 munged munge -S "$MUNGE_SOCKET" -n
}

db() { mariadb --no-defaults --socket="$DB_SOCKET" -u root "$@"; }

start_mariadb() {
    local data=$STATE/mysql/data pass
    alive "$STATE/mysql/run/mariadbd.pid" mariadbd && return 0
    if [ ! -d "$data/mysql" ]; then
        log "initialising MariaDB in $data"
        rm -rf "$data"
        mariadb-install-db --no-defaults --user=mysql --datadir="$data" \
            --auth-root-authentication-method=socket --skip-test-db >"$STATE/log/mariadb-install.log" 2>&1 \
            || die "mariadb-install-db failed (see $STATE/log/mariadb-install.log)"
    fi
    log "starting mariadbd"
    # setsid: own session, so it survives the caller's shell and terminal.
    setsid mariadbd --no-defaults --user=mysql --datadir="$data" --socket="$DB_SOCKET" \
        --pid-file="$STATE/mysql/run/mariadbd.pid" --port=$DB_PORT --bind-address=127.0.0.1 \
        --skip-name-resolve --innodb-lock-wait-timeout=900 \
        --log-error="$STATE/mysql/mariadbd.err" </dev/null >/dev/null 2>&1 9>&- &
    wait_for 60 MariaDB db -e 'SELECT 1'
    pass=$(cat "$STATE/etc/db.pass")
    db -e "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
           ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
           GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;"
}

start_slurmdbd() {
    alive "$STATE/run/slurm/slurmdbd.pid" slurmdbd && return 0
    log "starting slurmdbd"
    # slurmdbd reads slurmdbd.conf from the directory of $SLURM_CONF.
    slurmdbd 2>>"$STATE/log/slurmdbd.stderr" 9>&-
    wait_for 60 slurmdbd sacctmgr -n show cluster
}

# Register cluster, account, QOS and root user once (sacctmgr -i: no confirmation prompt).
register_accounting() {
    sacctmgr -n -P show cluster format=cluster | grep -qx "$CLUSTER" ||
        sacctmgr -i add cluster "$CLUSTER" >/dev/null
    sacctmgr -n -P show account format=account | grep -qx "$CLUSTER" ||
        sacctmgr -i add account "$CLUSTER" Cluster="$CLUSTER" Description="archbench runs" Organization=archbench >/dev/null
    sacctmgr -n -P show user format=user,defaultaccount | grep -qx "root|$CLUSTER" ||
        sacctmgr -i add user root Account="$CLUSTER" DefaultAccount="$CLUSTER" Cluster="$CLUSTER" >/dev/null
    sacctmgr -n -P show qos format=name | grep -qx "$QOS" ||
        sacctmgr -i add qos "$QOS" >/dev/null
    sacctmgr -n -P show assoc user=root format=qos | tr ',' '\n' | grep -qx "$QOS" ||
        sacctmgr -i modify user root set qos+="$QOS" >/dev/null
}

start_slurm() {
    local n restart=$1
    if [ "$restart" = 1 ]; then
        # slurmctld and every slurmd must restart together after a config change.
        for n in "${NODES[@]}"; do stop "$STATE/run/slurmd-$n.pid" slurmd; done
        stop "$STATE/run/slurm/slurmctld.pid" slurmctld
    fi
    if ! alive "$STATE/run/slurm/slurmctld.pid" slurmctld; then
        log "starting slurmctld"
        slurmctld 2>>"$STATE/log/slurmctld.stderr" 9>&-
    fi
    wait_for 30 slurmctld scontrol ping
    for n in "${NODES[@]}"; do
        alive "$STATE/run/slurmd-$n.pid" slurmd && continue
        log "starting slurmd $n"
        install -d -m 755 "$STATE/spool/slurmd-$n"
        slurmd -N "$n" 2>>"$STATE/log/slurmd-$n.stderr" 9>&-
    done
}

# Wait for both nodes; nodes left DOWN by an earlier crash are resumed once.
wait_ready() {
    local end=$((SECONDS + TIMEOUT)) resumed=0
    until sinfo_ok && sacct_ok; do
        [ $SECONDS -lt $end ] || { sinfo -N >&2 || true; die "cluster not ready after ${TIMEOUT}s (logs: $STATE/log)"; }
        if [ $resumed = 0 ] && sinfo -h -N -p debug -o '%t' 2>/dev/null | grep -qE '^(down|drain)'; then
            scontrol update NodeName=n[1-2] State=RESUME 2>/dev/null || true
            resumed=1
        fi
        sleep 1
    done
}

# Close every descriptor above 2 this script inherited, so the daemons it starts keep
# none: a caller's lock (`flock LOCKFILE slurm_cluster.sh up`) held open by slurmdbd or
# mariadbd would stay locked for as long as the cluster runs.
close_inherited_fds() {
    local fd
    for fd in $(ls /proc/$$/fd); do
        [ "$fd" -gt 2 ] && [ "$fd" != 255 ] && eval "exec $fd>&-" 2>/dev/null || true
    done
}

# ----------------------------------------------------------------- commands ----
cmd_up() {
    if [ "$(id -u)" != 0 ]; then
        echo "slurm_cluster: 'up' must run as root (installs packages and starts daemons)" >&2
        exit 3
    fi
    # Fast path, when the running cluster was started by this version of the script;
    # the pid check avoids sinfo's retry delay when slurmctld is not running.
    local version
    version=$(sha256sum "$0" | cut -c1-16)
    if [ "$(cat "$STATE/.script-version" 2>/dev/null)" = "$version" ] \
        && alive "$STATE/run/slurm/slurmctld.pid" slurmctld && status; then
        link_system_conf
        log "already up (SLURM_CONF=$SLURM_CONF)"
        return 0
    fi
    local t0=$SECONDS
    close_inherited_fds
    install_packages
    install -d -m 755 "$STATE"
    # One `up` at a time; daemons below are started with fd 9 closed (9>&-) so
    # they do not keep holding the lock after this script exits.
    exec 9>"$STATE/.lock"
    flock -w 300 9 || die "another 'up' holds $STATE/.lock"
    write_configs
    start_munge
    start_mariadb
    start_slurmdbd
    register_accounting
    start_slurm "$CONF_CHANGED"
    wait_ready
    echo "$version" >"$STATE/.script-version"
    log "up in $((SECONDS - t0))s: $(sinfo -h -o '%P %D %t' | tr '\n' ' ')(SLURM_CONF=$SLURM_CONF)"
}

cmd_down() {
    local n
    for n in "${NODES[@]}"; do stop "$STATE/run/slurmd-$n.pid" slurmd; done
    stop "$STATE/run/slurm/slurmctld.pid" slurmctld
    stop "$STATE/run/slurm/slurmdbd.pid" slurmdbd
    stop "$STATE/mysql/run/mariadbd.pid" mariadbd
    stop "$STATE/munge/munged.pid" munged
    if [ -L "$SYSTEM_CONF" ] && [ "$(readlink "$SYSTEM_CONF")" = "$SLURM_CONF" ]; then
        rm -f "$SYSTEM_CONF"
    fi
}

case ${1:-} in
    up) cmd_up ;;
    down) cmd_down ;;
    status) status ;;
    env) echo "export SLURM_CONF=$SLURM_CONF" ;;
    *) echo "usage: $0 up|down|status|env" >&2; exit 2 ;;
esac
