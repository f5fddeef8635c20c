#!/usr/bin/env bash
# A throw-away single-node Slurm cluster for tests (Debian/Ubuntu, root). Nothing goes to /etc/slurm:
# every file lives under BASE and clients find the cluster through SLURM_CONF=BASE/etc/slurm.conf.
#
#   bash tools/misc/slurm_cluster.sh up   BASE   # install (if missing), start munged+slurmctld+slurmd, wait idle
#   bash tools/misc/slurm_cluster.sh down BASE   # cancel jobs, stop the daemons by pid, remove BASE
#
# Knobs (env): NODE (hostname -s), PARTITION (debug), CTLD_PORT (6817), SLURMD_PORT (6818),
# FAKE_GPUS (0: a CPU-only node; N>0 declares N fake GPUs backed by /dev/null so --gres=gpu:N is accepted),
# SLURM_MEM_MB (90% of what slurmd -C reports).
# Traps met when this was worked out are in ../shared/research/slurm_local_cluster.md (daemons are not started
# by apt without systemd, MailProg, node topology must match slurmd -C, fake GPU files must be devices, ...).
set -euo pipefail
CMD=${1:?usage: $0 up|down BASE}
BASE=${2:?usage: $0 up|down BASE}
NODE=${NODE:-$(hostname -s)}
PARTITION=${PARTITION:-debug}
CTLD_PORT=${CTLD_PORT:-6817}
SLURMD_PORT=${SLURMD_PORT:-6818}
FAKE_GPUS=${FAKE_GPUS:-0}
export SLURM_CONF=$BASE/etc/slurm.conf

log() { printf '[slurm_cluster] %s\n' "$*" >&2; }

stop_pid() {  # stop_pid PIDFILE EXPECTED_COMM
  local f=$1 comm=$2 pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f" 2>/dev/null || true)
  [ -n "$pid" ] || return 0
  if [ "$(cat /proc/$pid/comm 2>/dev/null || true)" = "$comm" ]; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

down() {
  if [ -f "$SLURM_CONF" ] && command -v squeue >/dev/null; then
    ids=$(timeout 5 squeue -h -o %i 2>/dev/null || true)
    [ -z "$ids" ] || timeout 5 scancel $ids 2>/dev/null || true
    sleep 0.5
  fi
  stop_pid "$BASE/run/slurmd.pid" slurmd
  stop_pid "$BASE/run/slurmctld.pid" slurmctld
  stop_pid "$BASE/run/munged.pid" munged
  rm -rf "$BASE"
}

install_packages() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v srun >/dev/null \
      && command -v munged >/dev/null; then
    return 0
  fi
  [ "$(id -u)" = 0 ] || { log "not root: cannot install Slurm"; return 1; }
  log "installing slurmctld slurmd slurm-client munge (apt, --no-install-recommends)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null 2>&1 || {
    apt-get update -q >/dev/null 2>&1 && \
    apt-get install -y -q --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null; }
}

up() {
  [ "$(id -u)" = 0 ] || { log "root is required (munged, slurmd)"; exit 3; }
  install_packages || exit 4
  mkdir -p "$BASE"/{etc,run,log,spool/ctld,spool/d,dev} "$BASE/munge-key"
  chmod 0755 "$BASE" "$BASE/run"; chmod 0700 "$BASE/munge-key"
  dd if=/dev/urandom of="$BASE/munge-key/munge.key" bs=1024 count=1 status=none
  chmod 0600 "$BASE/munge-key/munge.key"
  munged --key-file="$BASE/munge-key/munge.key" --socket="$BASE/run/munge.socket" \
      --pid-file="$BASE/run/munged.pid" --log-file="$BASE/log/munged.log" --seed-file="$BASE/run/munged.seed"

  local topo mem gres=""
  topo=$(slurmd -C | head -n1 | tr ' ' '\n' | grep -E '^(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=' | tr '\n' ' ')
  mem=${SLURM_MEM_MB:-$(( $(slurmd -C | head -n1 | tr ' ' '\n' | sed -n 's/^RealMemory=//p') * 9 / 10 ))}
  : > "$BASE/etc/gres.conf"
  if [ "$FAKE_GPUS" -gt 0 ]; then
    for i in $(seq 0 $((FAKE_GPUS - 1))); do ln -sf /dev/null "$BASE/dev/fakegpu$i"; done
    echo "NodeName=$NODE Name=gpu File=$BASE/dev/fakegpu[0-$((FAKE_GPUS - 1))]" > "$BASE/etc/gres.conf"
    gres="Gres=gpu:$FAKE_GPUS"
  fi
  cat > "$SLURM_CONF" <<EOF
ClusterName=mmposmlp-test
SlurmctldHost=$(hostname -s)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$BASE/run/munge.socket
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
StateSaveLocation=$BASE/spool/ctld
SlurmdSpoolDir=$BASE/spool/d
SlurmctldPidFile=$BASE/run/slurmctld.pid
SlurmdPidFile=$BASE/run/slurmd.pid
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$BASE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MailProg=/bin/true
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
KillWait=2
GresTypes=gpu
NodeName=$NODE $topo RealMemory=$mem $gres State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
  slurmctld -i
  if [ "$NODE" = "$(hostname -s)" ]; then slurmd; else slurmd -N "$NODE"; fi
  for _ in $(seq 1 100); do
    state=$(sinfo -h -n "$NODE" -o %t 2>/dev/null || true)
    [ "$state" = idle ] && { log "node $NODE idle; export SLURM_CONF=$SLURM_CONF"; echo "export SLURM_CONF=$SLURM_CONF"; return 0; }
    sleep 0.2
  done
  log "node did not become idle (state: ${state:-?})"; tail -n 20 "$BASE"/log/*.log >&2 || true
  exit 5
}

case "$CMD" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down BASE" >&2; exit 2 ;;
esac
