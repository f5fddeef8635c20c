"""Every shipped PosMLP config builds (without data) and runs a forward; paper param counts."""
import glob
import os

import pytest

from mmposmlp.testing import build_model_from_cfg, count_params, dummy_forward

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = sorted(glob.glob(os.path.join(ROOT, 'configs', 'posmlp', '**', '*.py'), recursive=True))

# Table 8 (detectors) of the paper; Table 2 (classifiers, rounded to 1M) for the ImageNet configs.
PAPER_PARAMS = {
    'mask-rcnn_posmlp-t_1x_coco.py': 40.5e6,
    'mask-rcnn_posmlp-s_1x_coco.py': 56.1e6,
    'retinanet_posmlp-t_1x_coco.py': 31.1e6,
    'retinanet_posmlp-s_1x_coco.py': 47.3e6,
}


def test_configs_found():
    names = {os.path.basename(c) for c in CONFIGS}
    for required in ['mask-rcnn_posmlp-t_1x_coco.py', 'retinanet_posmlp-t_1x_coco.py',
                     'mask-rcnn_posmlp-s_1x_coco.py', 'retinanet_posmlp-s_1x_coco.py',
                     'mask-rcnn_posmlp-t_ms-crop-3x_coco.py', 'posmlp-t_8xb120_in1k.py',
                     'fpn_posmlp-t_4xb4-80k_ade20k-512x512.py', 'upernet_posmlp-t_8xb2-160k_ade20k-512x512.py']:
        assert required in names


@pytest.mark.parametrize('path', CONFIGS, ids=[os.path.relpath(c, ROOT) for c in CONFIGS])
def test_config_builds_and_forwards(path):
    model, scope = build_model_from_cfg(path)
    name = os.path.basename(path)
    backbone = model.backbone
    if name.startswith('tsn_'):  # a 2-D recognizer takes one tensor: PosMLP inside SingleTensorBackbone
        assert backbone.__class__.__name__ == 'SingleTensorBackbone'
        backbone = backbone.backbone
    # the gMLP rows of Tables 1/3/10 use the isotropic gMLP backbone with PosMLP's gating units
    assert backbone.__class__.__name__ == ('GMLP' if name.startswith('gmlp') else 'PosMLP')
    if name in PAPER_PARAMS:
        n = count_params(model)
        assert abs(n - PAPER_PARAMS[name]) / PAPER_PARAMS[name] < 0.01, n
    if name in ('mask-rcnn_posmlp-t_1x_coco.py', 'retinanet_posmlp-t_1x_coco.py',
                                   'fpn_posmlp-t_4xb4-80k_ade20k-512x512.py', 'posmlp-t_8xb120_in1k.py',
                                   'upernet_posmlp-t_8xb2-160k_ade20k-512x512.py'):
        shape = (1, 3, 64, 64) if scope == 'mmpretrain' else (1, 3, 75, 101)  # not multiples of 32
        out = dummy_forward(model, scope, shape)
        assert out is not None
