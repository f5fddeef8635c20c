#!/usr/bin/env bash
# Distributed training on one or more nodes with torchrun (interface of mmdet 3.3.0's dist_train.sh).
# torchrun runs through mmposmlp.utils.launch: a failed, killed or stalled rank ends the job with one sentence.
#   bash tools/dist_train.sh CONFIG GPUS [train.py args...]
# Env: NNODES (1), NODE_RANK (0), MASTER_ADDR (127.0.0.1), PORT (default: a free port on single-node runs,
# 29500 on multi-node runs, where every node must be given the same PORT). GPUS = processes per node; on
# machines without CUDA the processes train on CPU with the gloo backend (see docs/cluster.md).
# SIGTERM or SIGUSR1 to this script reaches every rank (torchrun passes it on); with mmposmlp.PreemptionHook they
# save one checkpoint and the script exits 99 (continue with --resume). torchrun SIGKILLs ranks still running
# TORCH_ELASTIC_SHUTDOWN_TIMEOUT seconds (default 30) after passing the signal on.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 CONFIG GPUS [train.py args...]" >&2; exit 2
fi
CONFIG=$1
GPUS=$2
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
PYTHON=${PYTHON:-python}
TOOLS=$(cd "$(dirname "$0")" && pwd)
if [ -z "${PORT:-}" ]; then
  if [ "$NNODES" -gt 1 ]; then PORT=29500; else
    PORT=$($PYTHON -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
    export MMPOSMLP_AUTO_PORT=1  # picked here: the launcher may pick another if a concurrent job takes it
  fi
elif [ "$NODE_RANK" -eq 0 ] && ! $PYTHON -c "import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('', int(sys.argv[1])))" "$PORT" 2>/dev/null; then
  echo "ERROR: PORT=$PORT is already in use on $(hostname): choose another PORT or unset it to pick a free one." >&2
  exit 1
fi
# --total-batch-size must split evenly over the processes; say so before starting any of them.
check_total_batch() {  # check_total_batch WORLD_SIZE ARGS...
  local world=$1 prev="" a total=""; shift
  for a in "$@"; do
    case "$a" in --total-batch-size=*) total=${a#*=} ;; esac
    [ "$prev" = "--total-batch-size" ] && total=$a
    prev=$a
  done
  if [ -n "$total" ] && [ $((total % world)) -ne 0 ]; then
    echo "ERROR: --total-batch-size $total is not divisible by the world size $world: use a multiple of $world or change the number of processes." >&2
    exit 1
  fi
}
check_total_batch $((GPUS * NNODES)) "${@:3}"
PYTHONPATH="$TOOLS/..":${PYTHONPATH:-} \
exec $PYTHON -m mmposmlp.utils.launch \
    --nnodes="$NNODES" --node_rank="$NODE_RANK" --master_addr="$MASTER_ADDR" \
    --nproc_per_node="$GPUS" --master_port="$PORT" \
    --signals-to-handle="${SIGNALS_TO_HANDLE:-SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1}" \
    "$TOOLS/train.py" "$CONFIG" --launcher pytorch "${@:3}"
