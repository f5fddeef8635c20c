#!/usr/bin/env bash
# A throw-away Slurm cluster for tests (Debian/Ubuntu, root). Nothing goes to /etc/slurm:
# every file lives under BASE and clients find the cluster through SLURM_CONF=BASE/etc/slurm.conf.
# NODES=1 (default): one slurmd on this host. NODES=N>1: N nodes node0..node{N-1}, each a slurmd in its own
# network namespace (Debian's Slurm has no multiple-slurmd build), joined by a bridge in this namespace
# where slurmctld, munged and the clients (srun, sbatch) run; the filesystem (munge socket, spool) is shared.
#
#   bash .dev_scripts/slurm_cluster.sh up   BASE   # install (if missing), start munged+slurmctld+slurmd, wait idle
#   bash .dev_scripts/slurm_cluster.sh down BASE   # cancel jobs, stop the daemons by pid, remove BASE
#
# Knobs (env): NODE (hostname -s), PARTITION (debug), CTLD_PORT (6817), SLURMD_PORT (6818),
# FAKE_GPUS (0: a CPU-only node; N>0 declares N fake GPUs backed by /dev/null so --gres=gpu:N is accepted),
# SLURM_MEM_MB (90% of what slurmd -C reports).
# Multi-node knobs: NODES (1), NODE_PREFIX (node), NET_PREFIX (10.<from BASE>.78: node i gets .(i+1), the
# bridge .254), IFACE (slurmnet: the interface name inside every namespace, so GLOO_SOCKET_IFNAME=IFACE
# works on all nodes). `up` prints the exports a job needs (SLURM_CONF, GLOO_SOCKET_IFNAME); `down` removes the
# namespaces and the bridge (their names are in BASE/net.env).
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
NODES=${NODES:-1}
NODE_PREFIX=${NODE_PREFIX:-node}
IFACE=${IFACE:-slurmnet}
TAG=$(printf '%s' "$BASE" | cksum | cut -c1-6)  # names of namespaces and links (<= 15 characters)
NET_PREFIX=${NET_PREFIX:-10.$((16 + TAG % 200)).78}
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
  local f
  for f in "$BASE"/run/slurmd*.pid; do stop_pid "$f" slurmd; done
  stop_pid "$BASE/run/slurmctld.pid" slurmctld
  stop_pid "$BASE/run/munged.pid" munged
  if [ -f "$BASE/net.env" ]; then  # NETNS=... BRIDGE=...
    local NETNS="" BRIDGE="" n
    . "$BASE/net.env"
    for n in $NETNS; do ip netns del "$n" 2>/dev/null || true; done  # takes its veth pair with it
    [ -z "$BRIDGE" ] || ip link del "$BRIDGE" 2>/dev/null || true
  fi
  rm -rf "$BASE"
}

# NODES>1: a bridge here (NET_PREFIX.254) and per node a namespace whose interface IFACE has NET_PREFIX.(i+1)
make_network() {
  command -v ip >/dev/null || { log "NODES=$NODES needs the ip tool (iproute2)"; exit 3; }
  local br="mmsb$TAG" i ns
  ip link add "$br" type bridge 2>/dev/null || { log "cannot create a bridge (ip link add type bridge)"; exit 3; }
  echo "BRIDGE=$br" > "$BASE/net.env"
  ip addr add "$NET_PREFIX.254/24" dev "$br"
  ip link set "$br" up
  for i in $(seq 0 $((NODES - 1))); do
    ns="mmsn$TAG$i"
    ip netns add "$ns" 2>/dev/null || { log "cannot create network namespaces (ip netns add)"; exit 3; }
    echo "NETNS=\"\${NETNS:-} $ns\"" >> "$BASE/net.env"
    ip link add "mmsh$TAG$i" type veth peer name "mmsp$TAG$i"
    ip link set "mmsp$TAG$i" netns "$ns"
    ip -n "$ns" link set "mmsp$TAG$i" name "$IFACE"
    ip -n "$ns" addr add "$NET_PREFIX.$((i + 1))/24" dev "$IFACE"
    ip -n "$ns" link set "$IFACE" up
    ip -n "$ns" link set lo up
    ip link set "mmsh$TAG$i" master "$br"
    ip link set "mmsh$TAG$i" up
  done
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
  local nodes_conf ctld_host slurmd_files
  if [ "$NODES" -gt 1 ]; then
    make_network
    ctld_host="$(hostname -s)($NET_PREFIX.254)"
    nodes_conf=""
    for i in $(seq 0 $((NODES - 1))); do
      nodes_conf+="NodeName=$NODE_PREFIX$i NodeAddr=$NET_PREFIX.$((i + 1)) NodeHostname=$(hostname -s) $topo RealMemory=$mem State=UNKNOWN"$'\n'
    done
    NODE="$NODE_PREFIX[0-$((NODES - 1))]"
    slurmd_files="SlurmdSpoolDir=$BASE/spool/d-%n
SlurmdPidFile=$BASE/run/slurmd.%n.pid
SlurmdLogFile=$BASE/log/slurmd.%n.log"
  else
    ctld_host=$(hostname -s)
    nodes_conf="NodeName=$NODE $topo RealMemory=$mem $gres State=UNKNOWN"
    slurmd_files="SlurmdSpoolDir=$BASE/spool/d
SlurmdPidFile=$BASE/run/slurmd.pid
SlurmdLogFile=$BASE/log/slurmd.log"
  fi
  cat > "$SLURM_CONF" <<EOF
ClusterName=mmposmlp-test
SlurmctldHost=$ctld_host
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$BASE/run/munge.socket
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
StateSaveLocation=$BASE/spool/ctld
SlurmctldPidFile=$BASE/run/slurmctld.pid
SlurmctldLogFile=$BASE/log/slurmctld.log
$slurmd_files
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
$nodes_conf
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
  slurmctld -i
  if [ "$NODES" -gt 1 ]; then
    for i in $(seq 0 $((NODES - 1))); do
      mkdir -p "$BASE/spool/d-$NODE_PREFIX$i"
      # nsenter, not `ip netns exec`: that one also remounts /sys, hiding the cgroup mounts slurmd needs
      nsenter --net="/run/netns/mmsn$TAG$i" slurmd -N "$NODE_PREFIX$i" \
        || { log "slurmd $NODE_PREFIX$i did not start"; tail -n 20 "$BASE/log/slurmd.$NODE_PREFIX$i.log" >&2; exit 5; }
    done
  elif [ "$NODE" = "$(hostname -s)" ]; then slurmd; else slurmd -N "$NODE"; fi
  for _ in $(seq 1 100); do
    state=$(sinfo -h -n "$NODE" -o %t 2>/dev/null | sort -u | tr '\n' ' ' || true)
    if [ "$state" = "idle " ]; then
      log "node(s) $NODE idle; export SLURM_CONF=$SLURM_CONF"
      echo "export SLURM_CONF=$SLURM_CONF"
      [ "$NODES" -le 1 ] || echo "export GLOO_SOCKET_IFNAME=$IFACE"
      return 0
    fi
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
