"""Paper-table rows: what the papers state about them, checked on the configs themselves."""
import os.path as osp

import pytest
import torch
import torch.nn as nn
from mmengine.config import Config

from tools.analysis.params_flops import count_flops, count_params
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



def test_posmlp_video_table3_in1k_row_is_the_in1k_model_tested_as_the_ablations():
    """Table 3's "PoTGU+PoSGU (IN-1K)" row: the IN-1K pre-trained S with its own training, tested 16x1x1 like
    the other rows of the table (Sec. 4.3), where the main config tests 1 clip x 3 crops (Table 9's views)."""
    in1k = Config.fromfile(osp.join(VIDEO, 'posmlp-video-s_4xb8-u16-60e_sthv1-rgb.py')).to_dict()
    row = Config.fromfile(osp.join(VIDEO, 'paper_tables',
                                   'posmlp-video-s-imagenet-pretrained_4xb8-u16-60e_sthv1-rgb-16x1x1.py')).to_dict()
    scratch = Config.fromfile(osp.join(VIDEO, 'posmlp-video-s-scratch_4xb8-u16-60e_sthv1-rgb.py')).to_dict()
    assert row['model']['backbone']['init_cfg']['checkpoint'].endswith('posmlp-video-s_8xb120_in1k.pth')
    assert sorted(k for k in set(in1k) | set(row) if in1k.get(k) != row.get(k)) == ['test_dataloader',
                                                                                  'test_pipeline']
    assert row['test_dataloader'] == scratch['test_dataloader']
    crops = [t for t in row['test_pipeline'] if 'Crop' in t['type']]
    assert [t.get('spatial_indices') for t in crops] == [(0, )]


# ---------------------------------------------------------------------------------------------- Wave-MLP "All"
TINY = dict(depths=[1, 1, 1, 1], embed_dims=[8, 16, 16, 32], mlp_ratios=[2, 2, 2, 2])


def test_wavemlp_all_window_connects_every_token_of_a_row_and_a_column():
    """Table 7 "All": the token-FC of the h branch reads the whole row, the w branch the whole column; a
    7-token window does not reach 8 tokens away. 64x64 input: stage 0 is 16x16."""
    from mmposmlp.models.backbones.wave_mlp import WaveMLP
    torch.manual_seed(0)
    model = WaveMLP(TINY, window_size='all', img_size=64).eval()
    assert model.stage_grids == [(16, 16), (8, 8), (4, 4), (2, 2)]
    windowed = WaveMLP(TINY).eval()
    for patm, grid in ((model.stages[0][0].token_mixer, 16), (windowed.stages[0][0].token_mixer, None)):
        for conv, far in ((patm.token_fc_h, (0, 15)), (patm.token_fc_w, (15, 0))):
            conv.weight.data.normal_()
            y = torch.zeros(1, 16, 16, 16)  # the 2C = 16 [cos | sin] channels of stage 0
            y[..., 0, 0] = 1.  # one token at the corner; read at the far end of its row / column
            out = conv(y)
            assert (out[..., far[0], far[1]].abs().sum() > 0) == (grid is not None), (grid, far)
        assert patm(torch.randn(1, 8, 16, 16)).shape == (1, 8, 16, 16)
    # the kernels are 2L-1 long: one weight per channel and offset, as the windowed layers
    assert tuple(model.stages[0][0].token_mixer.token_fc_h.weight.shape) == (8, 2, 1, 31)
    assert tuple(model.stages[3][0].token_mixer.token_fc_w.weight.shape) == (32, 2, 3, 1)
    assert model(torch.randn(1, 3, 64, 64))[0].shape == (1, 32, 2, 2)


@pytest.mark.parametrize('kwargs,match', [
    (dict(window_size='all'), r"fixes the input size: give img_size, e\.g\. img_size=224"),
    (dict(window_size=7, img_size=224), r"img_size=224 is only used with window_size='all'.*remove img_size"),
    (dict(window_size='All', img_size=224), r"positive odd int .* or 'all', got 'All'"),
])
def test_wavemlp_all_window_options_are_refused_in_one_sentence(kwargs, match):
    from mmposmlp.models.backbones.wave_mlp import WaveMLP
    with pytest.raises(ValueError, match=match) as err:
        WaveMLP(TINY, **kwargs)
    assert '\n' not in str(err.value)


def test_wavemlp_all_window_refuses_other_input_sizes():
    from mmposmlp.models.backbones.wave_mlp import WaveMLP
    from mmposmlp.models.layers.patm import PATM
    model = WaveMLP(TINY, window_size='all', img_size=64).eval()
    with pytest.raises(ValueError, match=r"takes 64x64 inputs only and got 96x64: resize the input or build it "
                                         r"with img_size=\(96, 64\)\."):
        model(torch.randn(1, 3, 96, 64))
    with pytest.raises(ValueError, match=r"got 96x96: .* with img_size=96\."):
        model(torch.randn(1, 3, 96, 96))
    patm = PATM(8, window_size='all', token_grid=(16, 16))
    with pytest.raises(ValueError, match=r"connects the tokens of 16x16 feature maps and got 16x8"):
        patm(torch.randn(1, 8, 16, 8))
    with pytest.raises(ValueError, match=r"token_grid=\(16, 16\) is only used with window_size='all'"):
        PATM(8, window_size=7, token_grid=(16, 16))
    for grid in (None, 16, (16, 0)):
        with pytest.raises(ValueError, match=r"needs token_grid=\(H, W\)"):
            PATM(8, window_size='all', token_grid=grid)


def test_wavemlp_all_params_vs_table7():
    """Table 7 (Wave-MLP-T*): "All" 16M against 15M for the windows. Ours: 15,515,848 (-3.0% of 16M; the
    windowed T* is 15,286,472)."""
    from mmposmlp.models.backbones.wave_mlp import WaveMLP
    head = 512 * 1000 + 1000
    n_all = count_params(WaveMLP('t-dw', window_size='all', img_size=224)) + head
    n_7 = count_params(WaveMLP('t-dw')) + head
    assert (n_7, n_all) == (15_286_472, 15_515_848)
    assert abs(n_all / 16e6 - 1) < 0.05 and round(n_all / 1e6) == 16 and round(n_7 / 1e6) == 15


def test_wavemlp_all_flops_vs_table7():
    """Table 7: 2.3G for "All" (2.1G for the windows). fvcore counts the products with the zero padding of
    the 2L-1 kernels too: 2.40G (+4.3%)."""
    from mmposmlp.models.backbones.wave_mlp import WaveMLP

    class Classifier(nn.Module):

        def __init__(self, backbone):
            super().__init__()
            self.backbone, self.fc = backbone, nn.Linear(512, 1000)

        def forward(self, x):
            return self.fc(self.backbone(x)[-1].mean((2, 3)))

    flops = count_flops(Classifier(WaveMLP('t-dw', window_size='all', img_size=224)).eval(), (1, 3, 224, 224))[0]
    assert abs(flops / 2.3e9 - 1) < 0.05, flops


if __name__ == '__main__':
    pytest.main([__file__, '-q'])


@pytest.mark.parametrize('size', ['t', 's', 'm'])
def test_wavemlp_3x_rows_warm_up_as_the_1x_config(size):
    """Wave-MLP Table 9 (3x + multi-scale) keeps the 1x config's warm-up, the official mmdet 2.x one."""
    from mmengine.config import Config
    one = Config.fromfile(osp.join(ROOT, 'configs', 'wavemlp', f'mask-rcnn_wavemlp-{size}_fpn_1x_coco.py'))
    three = Config.fromfile(osp.join(ROOT, 'configs', 'wavemlp', 'paper_tables',
                                     f'mask-rcnn_wavemlp-{size}_fpn_ms-3x_coco.py'))
    assert three.param_scheduler[0] == one.param_scheduler[0]
    assert three.param_scheduler[1]['milestones'] == [27, 33] and three.train_cfg.max_epochs == 36


@pytest.mark.parametrize('size', ['t', 's', 'm'])
def test_wavemlp_3x_rows_come_with_both_phase_estimations(size):
    """Table 9 does not say which phase estimation its backbones use: the depthwise-phase 3x config is the
    channel-FC one with the backbone of the depthwise-phase 1x config (Table 3's sizes), nothing else."""
    from mmengine.config import Config
    wave = osp.join(ROOT, 'configs', 'wavemlp')
    fc3 = Config.fromfile(osp.join(wave, 'paper_tables', f'mask-rcnn_wavemlp-{size}_fpn_ms-3x_coco.py')).to_dict()
    dw3 = Config.fromfile(osp.join(wave, 'paper_tables', f'mask-rcnn_wavemlp-{size}-dw_fpn_ms-3x_coco.py')).to_dict()
    dw1 = Config.fromfile(osp.join(wave, f'mask-rcnn_wavemlp-{size}-dw_fpn_1x_coco.py')).to_dict()
    # `pretrained` is the config variable naming the backbone's official file, which follows the backbone
    assert [k for k in sorted(set(fc3) | set(dw3)) if fc3.get(k) != dw3.get(k) and k != 'pretrained'] == ['model']
    assert dw3['model'] == dw1['model'] and dw3['model'] != fc3['model']
    assert dw3.get('pretrained') == dw1.get('pretrained')
