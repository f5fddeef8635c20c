#!/usr/bin/env bash
# Train on a Slurm cluster (interface of mmdet 3.3.0's slurm_train.sh).
#   [GPUS=8] [GPUS_PER_NODE=8] [CPUS_PER_TASK=5] [SRUN_ARGS=...] \
#     bash tools/slurm_train.sh PARTITION JOB_NAME CONFIG WORK_DIR [train.py args...]
# CPU mode (no --gres, gloo backend, DDP without device ids) is chosen without editing this script when
# SLURM_CPU_ONLY=1, or GPUS_PER_NODE=0, or the partition declares no GPUs (sinfo -o %G is "(null)").
# Then GPUS is the number of tasks and TASKS_PER_NODE (default: GPUS_PER_NODE, or GPUS if that is 0) their
# number per node. MASTER_PORT: kept if exported, else every job derives its own from SLURM_JOB_ID
# (mmposmlp/utils/dist.py), so jobs sharing a node do not collide. See docs/cluster.md.
#
# Preemptible clusters: `bash tools/slurm_train.sh --requeue [--signal=USR1|TERM] [--grace=SECONDS] PARTITION ...`
# submits a batch job (sbatch --requeue --signal=B:USR1@GRACE; extra sbatch options in SBATCH_ARGS, e.g.
# --time=4:00:00) and prints its id. On the signal (GRACE s, default 120, before the time limit, or from
# `scancel --signal=USR1 [--batch] JOBID`) every rank saves one checkpoint (mmposmlp.PreemptionHook), the job
# requeues itself (scontrol requeue) and the requeued job resumes from that checkpoint. --signal=TERM relies on
# the SIGTERM Slurm sends at preemption (grace: the cluster's KillWait/GraceTime). Output: WORK_DIR/slurm-JOBID.out.
set -eo pipefail
REQUEUE=0; PREEMPT_SIGNAL=USR1; PREEMPT_GRACE=120
while [ $# -gt 0 ]; do
  case "$1" in
    --requeue) REQUEUE=1 ;;
    --signal=*) PREEMPT_SIGNAL=${1#--signal=}; PREEMPT_SIGNAL=${PREEMPT_SIGNAL#SIG} ;;
    --grace=*) PREEMPT_GRACE=${1#--grace=} ;;
    --*) echo "ERROR: unknown option $1 of $0: use --requeue, --signal=USR1|TERM, --grace=SECONDS (before PARTITION)." >&2; exit 2 ;;
    *) break ;;
  esac
  shift
done
case "$PREEMPT_SIGNAL" in USR1|USR2|TERM) ;; *)
  echo "ERROR: --signal=$PREEMPT_SIGNAL: use USR1, USR2 or TERM (the signals PreemptionHook can be told to handle)." >&2; exit 2 ;;
esac
[[ "$PREEMPT_GRACE" =~ ^[0-9]+$ ]] || { echo "ERROR: --grace=$PREEMPT_GRACE is not a number of seconds." >&2; exit 2; }
if [ $# -lt 4 ]; then
  echo "usage: $0 [--requeue [--signal=USR1|TERM] [--grace=SECONDS]] PARTITION JOB_NAME CONFIG WORK_DIR [train.py args...]" >&2; exit 2
fi
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
WORK_DIR=$4
PY_ARGS=("${@:5}")
TOOL=train.py
TOOL_ARGS=("$CONFIG" "--work-dir=$WORK_DIR")
source "$(cd "$(dirname "$0")" && pwd)/slurm_common.inc"
