#!/usr/bin/env bash
# tools/dist_test.sh CONFIG CHECKPOINT GPUS [test.py args...]   (mmdet 3.3.0's interface, on torchrun)
set -euo pipefail
CONFIG=$1
CHECKPOINT=$2
GPUS=$3
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON=${PYTHON:-python}
PORT=${PORT:-$($PYTHON -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')}
PYTHONPATH="$ROOT":${PYTHONPATH:-} \
$PYTHON -m torch.distributed.run --nnodes="$NNODES" --node_rank="$NODE_RANK" --master_addr="$MASTER_ADDR" \
    --nproc_per_node="$GPUS" --master_port="$PORT" "$ROOT/tools/test.py" "$CONFIG" "$CHECKPOINT" \
    --launcher pytorch "${@:4}"
