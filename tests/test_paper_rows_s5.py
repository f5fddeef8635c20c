"""Paper-table rows: what the papers state about them, checked on the configs themselves."""
import os.path as osp

import pytest
from mmengine.config import Config

from mmposmlp.analysis.complexity import count_flops, count_params
from mmposmlp.testing import build_model_from_cfg

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
VIDEO = osp.join(ROOT, 'configs', 'posmlp_video')

#: PosMLP-Video Table 4 (group numbers g, SSv1, default windows, no pre-training): config -> g per stage
TABLE4 = {
    'paper_tables/posmlp-video-s-g1_4xb8-u16-60e_sthv1-rgb.py': [1, 1, 1, 1],
    'posmlp-video-s-scratch_4xb8-u16-60e_sthv1-rgb.py': [8, 16, 32, 64],
    'paper_tables/posmlp-video-s-g12-24-48-96_4xb8-u16-60e_sthv1-rgb.py': [12, 24, 48, 96],
}


def _table4_models():
    for rel, groups in TABLE4.items():
        model, _ = build_model_from_cfg(Config.fromfile(osp.join(VIDEO, rel)))
        assert list(model.backbone.arch_settings['groups']) == groups, rel
        yield model


def test_posmlp_video_table4_params_grow_with_g():
    """Sec. 4.4: "increasing g will monotonically raise the model size (parameters)". Whole recogniser
    (174 classes), as the README rows print them."""
    params = [count_params(model) for model in _table4_models()]
    assert params == [13_198_137, 13_509_537, 13_671_617]  # the README rows
    assert params == sorted(set(params))


@pytest.mark.slow
def test_posmlp_video_table4_flops_do_not_depend_on_g():
    """The relative position biases are looked up, not multiplied: the FLOPs are the same for every g (on
    a 4 x 56 x 56 clip; g changes nothing the input size does). ~20 s: three fvcore traces."""
    flops = [count_flops(model.backbone.eval(), (1, 3, 4, 56, 56))[0] for model in _table4_models()]
    assert len(set(flops)) == 1, flops


def test_posmlp_video_table4_default_row_is_the_table3_and_table5_model():
    """The default g row of Table 4 reuses the figures Tables 3 and 5 print for the same model and protocol:
    the README row and the scratch config must agree on that model (no pre-training, default windows)."""
    scratch = Config.fromfile(osp.join(VIDEO, 'posmlp-video-s-scratch_4xb8-u16-60e_sthv1-rgb.py'))
    assert scratch.model.backbone.get('init_cfg') is None
    g1 = Config.fromfile(osp.join(VIDEO, 'paper_tables', 'posmlp-video-s-g1_4xb8-u16-60e_sthv1-rgb.py'))
    for key in ('window_sizes', 'block_type', 'gate_type'):
        assert g1.model.backbone.get(key) == scratch.model.backbone.get(key), key
    with open(osp.join(VIDEO, 'README.md')) as f:
        row = next(line for line in f if line.startswith('| T4 g = (8, 16, 32, 64)'))
    assert '(posmlp-video-s-scratch_4xb8-u16-60e_sthv1-rgb.py)' in row and '46.31' in row and '13,509,537' in row


if __name__ == '__main__':
    pytest.main([__file__, '-q'])
