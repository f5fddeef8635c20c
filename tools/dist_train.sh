#!/usr/bin/env bash
# tools/dist_train.sh CONFIG GPUS [train.py args...]   (mmdet 3.3.0's interface, on torchrun)
# Env: NNODES (1), NODE_RANK (0), MASTER_ADDR (127.0.0.1), PORT (a free port when unset).
# Without CUDA the processes train on CPU with gloo (tools/train.py sets it up).
set -euo pipefail
CONFIG=$1
GPUS=$2
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON=${PYTHON:-python}
PORT=${PORT:-$($PYTHON -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')}
PYTHONPATH="$ROOT":${PYTHONPATH:-} \
$PYTHON -m torch.distributed.run --nnodes="$NNODES" --node_rank="$NODE_RANK" --master_addr="$MASTER_ADDR" \
    --nproc_per_node="$GPUS" --master_port="$PORT" "$ROOT/tools/train.py" "$CONFIG" --launcher pytorch "${@:3}"
