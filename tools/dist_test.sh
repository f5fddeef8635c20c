#!/usr/bin/env bash
# Distributed testing with torchrun (interface of mmdet 3.3.0's dist_test.sh).
#   bash tools/dist_test.sh CONFIG CHECKPOINT GPUS [test.py args...]
# Env as in dist_train.sh (NNODES, NODE_RANK, MASTER_ADDR, PORT).
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 CONFIG CHECKPOINT GPUS [test.py args...]" >&2; exit 2
fi
CONFIG=$1
CHECKPOINT=$2
GPUS=$3
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
PYTHONPATH="$TOOLS/..":${PYTHONPATH:-} \
exec $PYTHON -m mmposmlp.utils.launch \
    --nnodes="$NNODES" --node_rank="$NODE_RANK" --master_addr="$MASTER_ADDR" \
    --nproc_per_node="$GPUS" --master_port="$PORT" \
    "$TOOLS/test.py" "$CONFIG" "$CHECKPOINT" --launcher pytorch "${@:4}"
