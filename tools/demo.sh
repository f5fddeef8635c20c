#!/usr/bin/env bash
# `make demo`: generate the toy datasets, train a Mask R-CNN with a PosMLP-T backbone on toy COCO
# for a few minutes (CPU), evaluate it (bbox/segm mAP) and save a picture of its predictions.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
CONFIG=configs/posmlp/toy/mask-rcnn_posmlp-t_1x_toy-coco.py
WORK=${WORK:-work_dirs/demo}

$PY tools/misc/make_toy_datasets.py --out data/toy
$PY tools/train.py "$CONFIG" --work-dir "$WORK"
CKPT=$(cat "$WORK/last_checkpoint")
$PY tools/test.py "$CONFIG" "$CKPT" --work-dir "$WORK/test"
IMG=$(ls data/toy/coco/val2017/*.jpg | head -n1)
$PY tools/misc/inference_demo.py "$CONFIG" "$CKPT" "$IMG" --out "$WORK/prediction.jpg" --score-thr 0.3
echo "demo done: metrics above, checkpoint $CKPT, picture $WORK/prediction.jpg"
