#!/usr/bin/env bash
# Batch body of `slurm_train.sh --requeue` (runs inside the allocation; not meant to be called by hand):
#   slurm_requeue_job.sh WORK_DIR [srun options...] -- COMMAND...
# Runs COMMAND with srun. A signal Slurm sends to this shell (--signal=B:SIG@GRACE, `scancel --batch --signal=SIG`)
# is passed on to every task. When the tasks saved on a signal (mmposmlp.PreemptionHook writes WORK_DIR/preempted),
# the job requeues itself; the requeued job runs this script again and COMMAND resumes (--resume).
set -u
WORK_DIR=$1; shift
SRUN_OPTS=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do SRUN_OPTS+=("$1"); shift; done
shift
rm -f "$WORK_DIR/preempted"
echo "job $SLURM_JOB_ID (restart ${SLURM_RESTART_COUNT:-0}) on $(hostname): $*"
srun "${SRUN_OPTS[@]}" "$@" &
SRUN=$!
# to the tasks of every step (not to this shell again)
SIGNALLED=0
forward() { SIGNALLED=1; scancel --signal="$1" "$SLURM_JOB_ID" 2>/dev/null || kill -s "$1" "$SRUN" 2>/dev/null || true; }
trap 'forward USR1' USR1
trap 'forward USR2' USR2
trap 'true' TERM  # Slurm sends SIGTERM to the tasks itself; this shell stays to requeue the job
while :; do
  wait "$SRUN"; rc=$?
  if [ "$rc" -gt 128 ] && kill -0 "$SRUN" 2>/dev/null; then continue; fi  # a trapped signal woke wait
  break
done
if [ -f "$WORK_DIR/preempted" ]; then
  echo "saved on a signal ($(cat "$WORK_DIR/preempted")): requeueing job $SLURM_JOB_ID"
elif [ "$SIGNALLED" = 1 ]; then  # told to stop before training began (or it could not save): go on later
  echo "signalled before a checkpoint could be saved (srun exit code $rc): requeueing job $SLURM_JOB_ID"
else
  exit "$rc"
fi
scontrol requeue "$SLURM_JOB_ID" && exit 0
echo "ERROR: scontrol requeue $SLURM_JOB_ID failed: resubmit the same command; it resumes from the work dir." >&2
exit "$rc"
