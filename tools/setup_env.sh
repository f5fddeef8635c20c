#!/usr/bin/env bash
# Create (or reuse) the per-machine virtual environment for mmposmlp and link it to ./.venv.
#
# Idempotent: every step checks whether its result is already there. The venv and the mmcv wheel
# live outside the clone (MMPOSMLP_CACHE, default ~/.cache/mmposmlp) so that every clone on one
# machine reuses them. The traps this script works around are explained in DEVELOPERS.md.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
TORCH_VERSION=2.13.0
TORCHVISION_VERSION=0.28.0
MMCV_VERSION=2.1.0
CACHE=${MMPOSMLP_CACHE:-$HOME/.cache/mmposmlp}
PYTAG=$($PY -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")')
VENV=${MMPOSMLP_VENV:-$CACHE/venv-$PYTAG-torch$TORCH_VERSION}
WHEELS=$CACHE/wheels/torch$TORCH_VERSION-$PYTAG
STAMP=$VENV/.mmposmlp-deps-v2
PROGRESS_EVERY=${MMPOSMLP_PROGRESS_EVERY:-15}

log() { printf '[setup_env] %s\n' "$*"; }
T0=$SECONDS
# step WHAT CMD...: run CMD, print what runs and a line with the elapsed time every PROGRESS_EVERY
# seconds while it does (downloads and the mmcv build are otherwise silent), then its total time.
step() {
  local what=$1 start=$SECONDS pid rc=0 t
  shift
  log "$what ..."
  "$@" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    t=$((SECONDS - start))
    if [ "$t" -gt 0 ] && [ $((t % PROGRESS_EVERY)) -eq 0 ] && kill -0 "$pid" 2>/dev/null; then
      log "  ... $what: $((t / 60))m$((t % 60))s so far"
    fi
  done
  wait "$pid" || rc=$?
  if [ "$rc" -ne 0 ]; then
    log "FAILED after $((SECONDS - start))s (exit $rc): $what"
    exit "$rc"
  fi
  log "done in $((SECONDS - start))s: $what (total $((SECONDS - T0))s)"
}

mkdir -p "$CACHE" "$WHEELS"
if [ ! -x "$VENV/bin/python" ]; then
  log "creating venv $VENV"
  $PY -m venv "$VENV"
fi
# Every later install is constrained to this torch/torchvision and to setuptools < 81: without it, a
# package's resolution can silently replace torch (seen here: timm + onnxscript + openmim took torch
# 2.12.1 from the machine-wide find-links, breaking the mmcv ops built against 2.13) or setuptools.
CONSTRAINTS=$VENV/mmposmlp-constraints.txt
printf 'torch==%s\ntorchvision==%s\nsetuptools>=77,<81\n' "$TORCH_VERSION" "$TORCHVISION_VERSION" > "$CONSTRAINTS"
PIP=("$VENV/bin/python" -m pip)
VPY="$VENV/bin/python"

if [ ! -f "$STAMP" ]; then
  step "upgrading pip" "${PIP[@]}" install -q --upgrade pip
  # 1. torch + torchvision: the machine-wide find-links holds a CPU-only torch wheel that pip prefers,
  #    but no torchvision exists for it. --isolated ignores that configuration and takes both from PyPI.
  if ! "$VPY" -c "import torch, torchvision, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION' or torchvision.__version__.split('+')[0] != '$TORCHVISION_VERSION')" 2>/dev/null; then
    step "installing torch $TORCH_VERSION + torchvision $TORCHVISION_VERSION (PyPI, ~1 min)" \
        "${PIP[@]}" --isolated install -q "torch==$TORCH_VERSION" "torchvision==$TORCHVISION_VERSION"
  fi
  # 2. build tools: mmcv's setup.py and mmengine <= 0.10.7 import pkg_resources (gone in setuptools >= 81/82).
  step "installing build tools and mmengine 0.10.7" \
      "${PIP[@]}" install -q -c "$CONSTRAINTS" "setuptools>=77,<81" wheel ninja "numpy" "opencv-python-headless" \
      addict packaging Pillow pyyaml yapf "mmengine==0.10.7"
  # 3. mmcv with ops: no wheel for this torch. Build once, keyed by torch+python, outside the repo.
  MMCV_WHL=$(ls "$WHEELS"/mmcv-$MMCV_VERSION-*.whl 2>/dev/null | head -n1 || true)
  if [ -z "$MMCV_WHL" ]; then
    # --no-cache-dir: otherwise pip silently reuses a wheel built against another torch.
    build_mmcv() {
      cd "$WHEELS" && MMCV_WITH_OPS=1 MAX_JOBS=${MAX_JOBS:-2} "${PIP[@]}" wheel -q --no-cache-dir --no-deps \
          --no-build-isolation "mmcv==$MMCV_VERSION" -w "$WHEELS"
    }
    step "building mmcv $MMCV_VERSION with ops against torch $TORCH_VERSION (~9 min on 2 cores, once per machine)" \
        build_mmcv
    MMCV_WHL=$(ls "$WHEELS"/mmcv-$MMCV_VERSION-*.whl | head -n1)
  fi
  step "installing the mmcv wheel" "${PIP[@]}" install -q --no-deps "$MMCV_WHL"
  # 4. the OpenMMLab libraries. torch is already installed, so nothing here replaces it. Also what their
  #    tools import (mmdet's benchmark: psutil; the four libraries' tools/analysis_tools: seaborn, pandas;
  #    not grad-cam (mmseg's visualization_cam.py; it pulls opencv-python next to the headless build) nor
  #    motmetrics (mmdet's MOT analysis)), timm (reference models in tests), the ONNX stack and what `mim`
  #    (openmim, below) imports.
  step "installing mmdet, mmsegmentation, mmaction2, mmpretrain and the tools' packages" \
      "${PIP[@]}" install -q -c "$CONSTRAINTS" "mmdet==3.3.0" "mmsegmentation==1.2.2" "mmaction2==1.2.0" "mmpretrain==1.2.0" \
      ftfy regex av decord scipy matplotlib pycocotools terminaltables shapely \
      pytest pytest-timeout fvcore cvxpy \
      psutil seaborn pandas timm onnx onnxruntime onnxscript \
      click colorama model-index requests rich tabulate
  # openmim without its dependencies: they include opendatalab -> openxlab, whose pins would downgrade
  # setuptools to 60.2 (torch 2.13 requires >= 77), requests, rich, packaging and filelock (pip --dry-run);
  # mim itself imports only the packages above (openxlab is a CLI that `mim download` shells out to).
  step "installing openmim" "${PIP[@]}" install -q --no-deps openmim
  touch "$STAMP"
fi

# 5. mmaction2 1.2.0's PyPI release lacks mmaction/models/localizers/drn (open-mmlab/mmaction2#2714),
#    so `import mmaction.models` fails. Patched in place, idempotently (see tools/misc/patch_mmaction.py).
"$VPY" "$ROOT/tools/misc/patch_mmaction.py"

# 6. mmposmlp itself, editable (PEP 660: a finder maps `mmposmlp` to the clone).
#    Checked from / so that the clone's own directory on sys.path cannot fake an installed package.
if ! (cd / && "$VPY" -c "import mmposmlp, os, sys; sys.exit(os.path.dirname(os.path.dirname(os.path.realpath(mmposmlp.__file__))) != '$ROOT')") 2>/dev/null; then
  step "installing mmposmlp (editable)" "${PIP[@]}" install -q --no-deps --no-build-isolation -e "$ROOT"
fi
# 7. `_base_ = 'mmposmlp::...'` under any library's tools, and `mim`, for the editable install.
#    a) mmengine and mim look for the package at <site-packages>/mmposmlp (the dist-info's location), where a
#       PEP 660 editable install has nothing: link it to the clone's package (its .mim/ links to configs/...).
#    b) the wheel ships mmposmlp-config.pth (setup.py); an editable install gets the same line here (it loads
#       mmposmlp/utils/import_hooks.py, see there).
SITE=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ -L "$SITE/mmposmlp" ] || [ ! -e "$SITE/mmposmlp" ]; then
  ln -sfn "$ROOT/mmposmlp" "$SITE/mmposmlp"
fi
"$VPY" - "$ROOT" "$SITE" <<'PY'
import ast, os, sys
root, site = sys.argv[1:]
tree = ast.parse(open(os.path.join(root, 'setup.py')).read())
values = {t.id: ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
          for t in n.targets if isinstance(t, ast.Name) and t.id in ('CONFIG_PTH', 'CONFIG_PTH_LINE')}
path = os.path.join(site, values['CONFIG_PTH'])
if not os.path.isfile(path) or open(path).read() != values['CONFIG_PTH_LINE']:
    with open(path, 'w') as f:
        f.write(values['CONFIG_PTH_LINE'])
PY

ln -sfn "$VENV" "$ROOT/.venv"
(cd / && "$VPY" - <<'PY'
import torch, torchvision, mmcv, mmengine, mmdet, mmseg, mmaction, mmpretrain, mmposmlp
from mmcv.ops import RoIAlign  # noqa: F401  (fails if mmcv was built without ops)
import mmaction.models  # noqa: F401
print('[setup_env] ok: torch', torch.__version__, 'torchvision', torchvision.__version__, 'mmcv', mmcv.__version__,
      'mmengine', mmengine.__version__, 'mmdet', mmdet.__version__, 'mmseg', mmseg.__version__,
      'mmaction', mmaction.__version__, 'mmpretrain', mmpretrain.__version__, 'mmposmlp', mmposmlp.__version__)
PY
)
