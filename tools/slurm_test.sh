#!/usr/bin/env bash
# Test a checkpoint on a Slurm cluster (interface of mmdet 3.3.0's slurm_test.sh).
#   [GPUS=8] [GPUS_PER_NODE=8] [CPUS_PER_TASK=5] [SRUN_ARGS=...] \
#     bash tools/slurm_test.sh PARTITION JOB_NAME CONFIG CHECKPOINT [test.py args...]
# CPU mode and MASTER_PORT as in slurm_train.sh (see docs/cluster.md).
set -eo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 PARTITION JOB_NAME CONFIG CHECKPOINT [test.py args...]" >&2; exit 2
fi
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
CHECKPOINT=$4
PY_ARGS=("${@:5}")
TOOL=test.py
TOOL_ARGS=("$CONFIG" "$CHECKPOINT")
source "$(cd "$(dirname "$0")" && pwd)/slurm_common.inc"
