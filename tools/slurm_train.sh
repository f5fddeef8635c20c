#!/usr/bin/env bash
# Train on a Slurm cluster (interface of mmdet 3.3.0's slurm_train.sh).
#   [GPUS=8] [GPUS_PER_NODE=8] [CPUS_PER_TASK=5] [SRUN_ARGS=...] \
#     bash tools/slurm_train.sh PARTITION JOB_NAME CONFIG WORK_DIR [train.py args...]
# CPU mode (no --gres, gloo backend, DDP without device ids) is chosen without editing this script when
# SLURM_CPU_ONLY=1, or GPUS_PER_NODE=0, or the partition declares no GPUs (sinfo -o %G is "(null)").
# Then GPUS is the number of tasks and TASKS_PER_NODE (default: GPUS_PER_NODE, or GPUS if that is 0) their
# number per node. MASTER_PORT: kept if exported, else every job derives its own from SLURM_JOB_ID
# (mmposmlp/utils/dist.py), so jobs sharing a node do not collide. See docs/cluster.md.
set -eo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 PARTITION JOB_NAME CONFIG WORK_DIR [train.py args...]" >&2; exit 2
fi
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
WORK_DIR=$4
PY_ARGS=("${@:5}")
TOOL=train.py
TOOL_ARGS=("$CONFIG" "--work-dir=$WORK_DIR")
source "$(cd "$(dirname "$0")" && pwd)/slurm_common.inc"
