#!/usr/bin/env bash
# A one-node SLURM cluster on this Debian machine, for the slurm tests (pytest -m slurm) and for trying
# launcher=slurm: Debian's SLURM (slurmctld, slurmd, slurm-client), munge, and slurmdbd on MariaDB (so that sacct
# answers and submitit sees when a job ends), started without systemd. Run as root.
#
#   scripts/slurm-cluster.sh up       install what is missing (apt-get), write the configs, start what is not
#                                     running, wait until the node is idle; prints the time it took
#   scripts/slurm-cluster.sh down     stop the daemons (by their PID files) and remove the PID files
#   scripts/slurm-cluster.sh status   the daemons, sinfo, the partitions; exit 0 when the node answers
#
# Two partitions: `batch` (the default; its jobs are requeued when preempted, with SLURM_GRACE_S seconds and the
# job's --signal to checkpoint first) and `urgent` (a higher priority tier that preempts `batch`); other names from
# SARNMT_SLURM_PARTITION and SARNMT_SLURM_PREEMPT_PARTITION, which the slurm tests read too. The node line is
# `slurmd -C`'s (the machine's real CPUs and memory: a larger request fails at submission, EnforcePartLimits=ALL).
# Idempotent: `up` on a running cluster only checks it (and restarts it when its config changed). Every wait is
# bounded (SLURM_WAIT_S seconds, default 60); every SLURM client call has a timeout, since sinfo and scontrol
# block while slurmctld is down.
set -euo pipefail

WAIT_S=${SLURM_WAIT_S:-60}
GRACE_S=${SLURM_GRACE_S:-60}
PARTITION=${SARNMT_SLURM_PARTITION:-batch}
PREEMPT_PARTITION=${SARNMT_SLURM_PREEMPT_PARTITION:-urgent}
CLUSTER=${SLURM_CLUSTER_NAME:-sarnmt}
ETC=/etc/slurm
LOGS=/var/log/slurm
STATE=/var/lib/slurm
PACKAGES=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server)

say() { echo "slurm-cluster: $*"; }
die() { echo "slurm-cluster: error: $*" >&2; exit 1; }
q() { timeout 10 "$@" 2>/dev/null; }   # a client call that may block while a daemon is down

# wait_for SECONDS WHAT COMMAND...: run COMMAND every half second until it succeeds, at most SECONDS
wait_for() {
  local seconds=$1 what=$2 deadline
  shift 2
  deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { say "$what: not ready after ${seconds}s"; return 1; }
    sleep 0.5
  done
}

pid_alive() {  # pid_alive PIDFILE NAME: the PID in PIDFILE runs NAME
  local pid
  [[ -s $1 ]] || return 1
  pid=$(<"$1")
  [[ $pid =~ ^[0-9]+$ ]] && [[ -r /proc/$pid/comm ]] && [[ $(</proc/"$pid"/comm) == "$2"* ]]
}

stop_daemon() {  # stop_daemon NAME PIDFILE: TERM, at most 20 s, then KILL; the PID file removed either way
  local name=$1 pidfile=$2 pid deadline
  if pid_alive "$pidfile" "$name"; then
    pid=$(<"$pidfile")
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 20))
    while [[ -d /proc/$pid ]] && ((SECONDS < deadline)); do sleep 0.2; done
    if [[ -d /proc/$pid ]]; then
      say "$name (PID $pid) still runs after 20 s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    say "stopped $name (PID $pid)"
  fi
  rm -f "$pidfile"  # a stale PID file makes the packages' scripts (removal included) fail
}

install_packages() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  command -v apt-get >/dev/null || die "no apt-get: this script sets up SLURM on Debian (or Ubuntu) only"
  say "installing ${missing[*]}"
  # no service is started by the packages' scripts (there is no systemd here): this script starts them
  local policy=/usr/sbin/policy-rc.d ours=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && ours=1
  fi
  local ok=1
  if ! timeout 300 env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    >/tmp/slurm-cluster-apt.log 2>&1; then
    timeout 120 apt-get update -qq >/dev/null 2>&1 || true
    timeout 300 env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
      >/tmp/slurm-cluster-apt.log 2>&1 || ok=0
  fi
  [[ $ours == 1 ]] && rm -f "$policy"
  [[ $ok == 1 ]] || { tail -20 /tmp/slurm-cluster-apt.log >&2; die "apt-get install failed"; }
}

# --- configs -------------------------------------------------------------------------------------------------------
write_if_changed() {  # write_if_changed PATH MODE OWNER < content; returns 0 when it changed
  local path=$1 mode=$2 owner=$3 tmp
  tmp=$(mktemp)
  cat >"$tmp"
  if [[ -f $path ]] && cmp -s "$tmp" "$path"; then
    rm -f "$tmp"
    return 1
  fi
  install -m "$mode" -o "${owner%:*}" -g "${owner#*:}" "$tmp" "$path"
  rm -f "$tmp"
  return 0
}

node_line() {
  # slurmd -C: "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=23000"
  local line
  line=$(slurmd -C | head -1)
  [[ $line == NodeName=* ]] || die "slurmd -C gave no node line: $line"
  echo "$line NodeAddr=127.0.0.1 State=UNKNOWN"
}

write_configs() {  # sets CHANGED=1 when a config changed
  local host node pass
  host=$(hostname -s)
  node=$(node_line)
  mkdir -p "$ETC" "$LOGS" "$STATE/slurmctld" "$STATE/slurmd" /run/munge /run/mysqld
  chown slurm:slurm "$LOGS" "$STATE" "$STATE/slurmctld"
  chown munge:munge /run/munge && chmod 755 /run/munge
  chown mysql:mysql /run/mysqld
  if [[ ! -s /etc/munge/munge.key ]]; then
    say "creating the munge key"
    if command -v mungekey >/dev/null; then mungekey --create --force; else dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null; fi
  fi
  chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
  pass=$(sed -n 's/^StoragePass=//p' "$ETC/slurmdbd.conf" 2>/dev/null || true)
  [[ -n $pass ]] || pass=$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
  DB_PASS=$pass
  CHANGED=0
  write_if_changed "$ETC/slurmdbd.conf" 600 slurm:slurm <<EOF && CHANGED=1
# written by scripts/slurm-cluster.sh
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=slurm
PidFile=/run/slurmdbd.pid
LogFile=$LOGS/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$pass
StorageLoc=slurm_acct_db
EOF
  write_if_changed "$ETC/slurm.conf" 644 root:root <<EOF && CHANGED=1
# written by scripts/slurm-cluster.sh: a one-node cluster (no systemd, no cgroups)
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmUser=slurm
AuthType=auth/munge
# credentials expire after 10 s instead of 120: a requeued job is eligible again after that long
AuthInfo=cred_expire=10
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
StateSaveLocation=$STATE/slurmctld
SlurmdSpoolDir=$STATE/slurmd
# no cgroups here: processes tracked through /proc, no task binding
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
# a request no node of the partition can hold fails at submission instead of pending forever
EnforcePartLimits=ALL
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
DefMemPerCPU=1024
# the pending jobs (a requeued one once it is eligible again) are looked at every 2 s
SchedulerParameters=sched_interval=2,bf_interval=2
KillWait=30
MinJobAge=600
# preemption by partition priority: a job of $PREEMPT_PARTITION requeues jobs of $PARTITION; they first get their
# --signal (submitit: SIGUSR2), and GraceTime seconds to checkpoint
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
SlurmctldParameters=preempt_send_user_signal
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobCompType=jobcomp/none
$node
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE GraceTime=$GRACE_S
PartitionName=$PREEMPT_PARTITION Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF
EOF
  return 0
}

# --- daemons -------------------------------------------------------------------------------------------------------
start_munge() {
  pid_alive /run/munge/munged.pid munged && return 0
  runuser -u munge -- /usr/sbin/munged --force
  wait_for "$WAIT_S" munged bash -c 'munge -n | unmunge' || die "munged does not answer (/var/log/munge/munged.log)"
}

start_mariadb() {
  local sql
  if ! pid_alive /run/mysqld/mysqld.pid mariadbd; then
    [[ -d /var/lib/mysql/mysql ]] || mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
    setsid /usr/sbin/mariadbd --user=mysql --pid-file=/run/mysqld/mysqld.pid --socket=/run/mysqld/mysqld.sock \
      --bind-address=127.0.0.1 </dev/null >>/var/log/slurm/mariadb.log 2>&1 &
  fi
  wait_for "$WAIT_S" mariadb mariadb-admin --connect-timeout=2 ping || die "MariaDB does not answer ($LOGS/mariadb.log)"
  sql="CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
  timeout 30 mariadb -e "$sql" || die "could not create the accounting database"
}

start_slurmdbd() {
  pid_alive /run/slurmdbd.pid slurmdbd || slurmdbd
  # slurmctld exits when it starts before slurmdbd answers
  wait_for "$WAIT_S" slurmdbd q sacctmgr -n list cluster || die "slurmdbd does not answer ($LOGS/slurmdbd.log)"
  if ! q sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
    q sacctmgr -i add cluster "$CLUSTER" >/dev/null || die "sacctmgr could not add cluster $CLUSTER"
  fi
}

start_slurmctld() {
  pid_alive /run/slurmctld.pid slurmctld || { rm -f /run/slurmctld.pid; slurmctld; }
  wait_for "$WAIT_S" slurmctld bash -c 'timeout 5 scontrol ping | grep -q UP' \
    || die "slurmctld does not answer ($LOGS/slurmctld.log)"
}

start_slurmd() {
  pid_alive /run/slurmd.pid slurmd || { rm -f /run/slurmd.pid; slurmd; }
  local node
  node=$(slurmd -C | head -1 | sed 's/^NodeName=\([^ ]*\).*/\1/')
  wait_for "$WAIT_S" "node $node" node_ready "$node" || {
    q scontrol update nodename="$node" state=resume >/dev/null || true
    wait_for 10 "node $node" node_ready "$node" || die "node $node is not idle: $(q sinfo -h -N -o '%T %E')"
  }
}

node_ready() {  # the node answers: idle, or running jobs
  local state
  state=$(timeout 5 sinfo -h -N -n "$1" -o %T 2>/dev/null | head -1)
  [[ $state == idle* || $state == mixed* || $state == allocated* || $state == completing* ]]
}

up() {
  [[ $(id -u) == 0 ]] || die "run as root (it installs packages and starts daemons)"
  local start=$SECONDS
  install_packages
  write_configs
  if [[ $CHANGED == 1 ]] && pid_alive /run/slurmctld.pid slurmctld; then
    say "the configuration changed: restarting the SLURM daemons"
    stop_daemon slurmd /run/slurmd.pid
    stop_daemon slurmctld /run/slurmctld.pid
    stop_daemon slurmdbd /run/slurmdbd.pid
  fi
  start_munge
  start_mariadb
  start_slurmdbd
  start_slurmctld
  start_slurmd
  say "up in $((SECONDS - start)) s"
  timeout 5 sinfo
}

down() {
  stop_daemon slurmd /run/slurmd.pid
  stop_daemon slurmctld /run/slurmctld.pid
  stop_daemon slurmdbd /run/slurmdbd.pid
  stop_daemon mariadbd /run/mysqld/mysqld.pid
  stop_daemon munged /run/munge/munged.pid
}

status() {
  local name pidfile rc=0
  for pair in munged:/run/munge/munged.pid mariadbd:/run/mysqld/mysqld.pid slurmdbd:/run/slurmdbd.pid \
    slurmctld:/run/slurmctld.pid slurmd:/run/slurmd.pid; do
    name=${pair%%:*} pidfile=${pair#*:}
    if pid_alive "$pidfile" "$name"; then say "$name: running (PID $(<"$pidfile"))"; else say "$name: not running"; rc=1; fi
  done
  command -v sinfo >/dev/null || { say "SLURM is not installed"; return 1; }
  timeout 5 sinfo || { say "sinfo does not answer"; return 1; }
  return $rc
}

case ${1:-} in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
