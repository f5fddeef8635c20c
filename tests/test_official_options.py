"""Every constructor option of the official PosMLP / PosMLP-Video models: converted exactly
(fp64 < 1e-8 against the official model built with it, randomised; vectors in tests/data/*options*.pt
and posmlp_ape.pt, see tests/data/README_options.md) or refused with a ValueError naming it."""
import json
import os

import pytest
import torch
import torch.nn as nn

from mmposmlp.models.backbones.posmlp import PosMLP
from mmposmlp.models.converters.posmlp import convert_official_posmlp, official_arch_to_ours, official_convert_kwargs

from toolcfg import load_tool

DATA = os.path.join(os.path.dirname(__file__), 'data')
OPTION_FILES = ['posmlp_options_gates.pt', 'posmlp_options_layers.pt', 'posmlp_options_downsample.pt']


class Classifier(nn.Module):
    """backbone -> final norm -> GAP -> Linear: the official classifier."""

    def __init__(self, backbone, num_classes):
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(backbone.out_channels[-1], num_classes)

    def forward(self, x):
        return self.head(self.backbone(x)[-1].mean((2, 3)))


def _load(name):
    return torch.load(os.path.join(DATA, name), weights_only=True)


def _cases():
    out = []
    for f in OPTION_FILES:
        for name in _load(f)['cases']:
            out.append((f, name))
    return out


def build_official_posmlp(arch: dict, state: dict) -> Classifier:
    depth = int(arch.get('num_levels', 3))
    model = Classifier(PosMLP(**official_arch_to_ours(arch), out_indices=(depth - 1, )), arch['num_classes'])
    converted = convert_official_posmlp(state, **official_convert_kwargs(arch))
    result = model.load_state_dict({(k if k.startswith('head.') else 'backbone.' + k): v
                                    for k, v in converted.items()}, strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    return model.eval()


@pytest.mark.parametrize('file,name', _cases())
def test_posmlp_official_option_parity(file, name):
    d = _load(file)
    case = d['cases'][name]
    arch = json.loads(case['arch_json'])
    model = build_official_posmlp(arch, case['state_dict'])
    with torch.no_grad():
        for x, ref in zip(d['inputs'], case['outputs_fp64']):
            err = (model.double()(x.double()) - ref).abs().max().item()
            assert err < 1e-8, (name, err)
        for x, ref in zip(d['inputs'], case['outputs_fp32']):
            err = (model.float()(x) - ref).abs().max().item()
            assert err < 1e-4, (name, err)


def test_posmlp_official_ape_parity():
    d = _load('posmlp_ape.pt')
    a, b = d['ape_factors']
    u, v, w = d['input_factors']
    state = dict(d['state_dict'], absolute_pos_embed=(a[:, None] * b[None, :])[None])
    x = (u[:, None, None] * v[None, :, None] * w[None, None, :])[None]
    model = build_official_posmlp(json.loads(d['arch_json']), state)
    with torch.no_grad():
        err = (model.double()(x.double()) - d['outputs_fp64'][0]).abs().max().item()
    assert err < 1e-8
    # the embedding is resized to other maps (any input size still runs)
    with torch.no_grad():
        assert model.float()(torch.randn(1, 3, 160, 192)).shape == (1, 5)


@pytest.mark.parametrize('file,name,option', [
    ('posmlp_options_layers.pt', 'qpe_asymmetric', 'symmetric'),
    ('posmlp_options_layers.pt', 'qpe_no_softmax', 'use_softmax'),
    ('posmlp_options_layers.pt', 'layernorm_eps_1e5', 'norm_layer'),
    ('posmlp_options_gates.pt', 'chunks_1', None),
])
def test_option_vectors_are_sensitive(file, name, option):
    """Ignoring the option (building and converting with the official default) breaks fp64 equality."""
    d = _load(file)
    case = d['cases'][name]
    arch = json.loads(case['arch_json'])
    if option is None:  # chunks=1 vs a model that splits: the weights do not even fit
        with pytest.raises(RuntimeError):
            build_official_posmlp({k: v for k, v in arch.items() if k != 'chunks'}, case['state_dict'])
        return
    model = build_official_posmlp({k: v for k, v in arch.items() if k != option}, case['state_dict'])
    with torch.no_grad():
        err = (model.double()(d['inputs'][0].double()) - case['outputs_fp64'][0]).abs().max().item()
    assert err > 1e-7, (name, err)


@pytest.mark.parametrize('option,value,words', [
    ('gate_unit', 'Foo', 'gate_unit'),
    ('chunks', 3, 'chunks=3'),
    ('shift', True, 'num_blocks'),
    ('stem', 'OtherEmbed', 'stem'),
    ('pool_layer', 'PatchMerging', 'pool_layer=.PatchMerging. does not run'),
    ('pool_layer', 'OtherMerging', 'pool_layer'),
    ('gate_layer', 'Other', 'gate_layer'),
    ('act_layer', 'nn.ReLU', 'act_layer'),
    ('global_pool', 'max', 'global_pool'),
    ('norm_layer', 'nn.BatchNorm2d', 'norm_layer'),
    ('stem_norm', 'GN', 'stem_norm'),
    ('downsample_norm', 'GN', 'downsample_norm'),
    ('pretrained', 'x.pth', 'pretrained'),
    ('ape', True, 'ape'),
    ('not_an_option', 1, 'not_an_option'),
])
def test_posmlp_unsupported_official_options_are_refused(option, value, words):
    arch = dict(num_levels=4, embed_dims=[8, 16, 16, 16], depths=[1, 1, 2, 1], gamma=[2, 2, 2, 2],
                mlp_ratio=[2, 2, 2, 2], win_size=[7, 7, 7, 4], num_classes=5)
    arch[option] = value
    if option == 'shift':
        arch['num_blocks'] = 2
    with pytest.raises(ValueError, match=words):
        official_arch_to_ours(arch)


def test_posmlp_sgu_options_refused():
    arch = dict(num_levels=4, embed_dims=[8, 16, 16, 16], depths=[1, 1, 2, 1], gamma=[2, 2, 2, 2],
                mlp_ratio=[2, 2, 2, 2], win_size=[7, 7, 7, 4], gate_unit='SGU')
    with pytest.raises(ValueError, match='chunks=3'):
        official_arch_to_ours(dict(arch, chunks=3))
    with pytest.raises(ValueError, match='26th'):
        official_arch_to_ours(dict(arch, depths=[2, 2, 22, 2]))


def test_posmlp_unknown_official_keys_raise():
    d = _load('posmlp_options_gates.pt')
    state = dict(d['cases']['sgu']['state_dict'])
    state['levels.0.encoder.0.gate_unit.extra'] = torch.zeros(1)
    with pytest.raises(KeyError, match='gate_unit.extra'):
        convert_official_posmlp(state)


def test_posmlp_init_cfg_converts_with_the_models_options(tmp_path):
    """``init_cfg`` on a raw official file uses the model's own options (here: free Sigma,
    no token bias, LayerNorm stem) and the EMA weights unless told otherwise."""
    for file, name in (('posmlp_options_layers.pt', 'qpe_asymmetric'), ('posmlp_options_layers.pt',
                       'qpe_no_absolute_bias'), ('posmlp_options_gates.pt', 'ln_stem_bn_downsample_full_conv')):
        d = _load(file)
        case = d['cases'][name]
        arch = json.loads(case['arch_json'])
        wrong = {k: v + 1 if v.is_floating_point() else v for k, v in case['state_dict'].items()}
        path = tmp_path / f'{name}.pth.tar'
        torch.save({'epoch': 1, 'state_dict': wrong, 'state_dict_ema': case['state_dict']}, path)
        ref = build_official_posmlp(arch, case['state_dict']).backbone
        for prefer_ema in (True, False):
            kwargs = official_arch_to_ours(arch)
            model = PosMLP(**kwargs, init_cfg=dict(type='Pretrained', checkpoint=str(path), prefer_ema=prefer_ema))
            model.init_weights()
            model.eval()
            x = d['inputs'][0]
            with torch.no_grad():
                same = torch.allclose(model(x)[-1], ref(x)[-1], atol=1e-5)
            assert same == prefer_ema, (name, prefer_ema)


# ---------------------------------------------------------------------- PosMLP-Video
def _video_cases():
    return list(_load('posmlp_video_options.pt')['cases'])


@pytest.mark.parametrize('name', _video_cases())
def test_posmlp_video_official_option_parity(name):
    from mmposmlp.models.backbones.posmlp_video import PosMLPVideo
    from mmposmlp.models.converters.posmlp_video import convert_official_posmlp_video, official_cfg_to_ours
    d = _load('posmlp_video_options.pt')
    case = d['cases'][name]
    cfg = json.loads(case['arch_json'])
    backbone = PosMLPVideo(**official_cfg_to_ours(cfg))
    head = nn.Linear(backbone.out_channels[-1], cfg['MODEL']['NUM_CLASSES'])
    state = convert_official_posmlp_video(case['state_dict'])
    result = backbone.load_state_dict({k: v for k, v in state.items() if not k.startswith('head.')}, strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    head.load_state_dict({k[5:]: v for k, v in state.items() if k.startswith('head.')})
    backbone.eval()
    with torch.no_grad():
        for x, ref in zip(d['inputs'], case['outputs_fp64']):
            out = head.double()(backbone.double()(x.double()).mean((2, 3, 4)))
            assert (out - ref).abs().max() < 1e-8, name
    if name == 'transition_identity':
        assert backbone.stages[2].downsample is None
        every_stage = PosMLPVideo(**{**official_cfg_to_ours(cfg), 'out_indices': (0, 1, 2, 3)})
        assert [f['reduction'] for f in every_stage.feature_info] == [4, 8, 8, 16]


def test_posmlp_video_unknown_official_options_are_refused():
    from mmposmlp.models.backbones.posmlp_video import PosMLPVideo
    from mmposmlp.models.converters.posmlp_video import official_cfg_to_ours
    cfg = json.loads(_load('posmlp_video_options.pt')['cases']['shift_true']['arch_json'])
    cfg['POSMLP_VIDEO']['MLP_RATIO'] = 4
    with pytest.raises(ValueError, match='MLP_RATIO'):
        official_cfg_to_ours(cfg)
    with pytest.raises(ValueError, match='downsamples'):
        PosMLPVideo(arch=dict(depths=[1, 1, 1, 1], embed_dims=[8, 16, 16, 32]), downsamples=[True, True, False])


# ---------------------------------------------------------------------- Wave-MLP
@pytest.mark.parametrize('name', list(_load('wavemlp_options.pt')['cases']))
def test_wavemlp_official_option_parity(name):
    from mmposmlp.models.backbones.wave_mlp import WaveMLP
    from mmposmlp.models.converters.wave_mlp import convert_official_wavemlp, official_arch_to_ours
    d = _load('wavemlp_options.pt')
    case = d['cases'][name]
    arch = json.loads(case['arch_json'])
    backbone = WaveMLP(**official_arch_to_ours(arch)).eval()
    state = convert_official_wavemlp(case['state_dict'])
    result = backbone.load_state_dict({k[9:]: v for k, v in state.items() if k.startswith('backbone.')}, strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    head = None
    if not arch.get('fork_feat'):
        head = nn.Linear(arch['embed_dims'][-1], arch['num_classes'])
        head.load_state_dict({k[8:]: v for k, v in state.items() if k.startswith('head.fc.')})
    with torch.no_grad():
        for x, ref in zip(d['inputs'], case['outputs_fp64']):
            outs = backbone.double()(x.double())
            if head is None:
                out = torch.cat([o.flatten(1) for o in outs], 1)
            else:
                out = head.double()(outs[-1].mean((2, 3)))
            assert out.shape == ref.shape and (out - ref).abs().max() < 1e-8, name


@pytest.mark.parametrize('option,value,words', [
    ('norm_layer', 'nn.LayerNorm', 'norm_layer'),
    ('transitions', [False, True, True, True], 'transitions'),
    ('layers', [1, 1, 1], 'layers'),
    ('not_an_option', 1, 'not_an_option'),
])
def test_wavemlp_unsupported_official_options_are_refused(option, value, words):
    from mmposmlp.models.converters.wave_mlp import official_arch_to_ours
    arch = dict(layers=[1, 1, 1, 1], embed_dims=[8, 16, 16, 32], transitions=[True] * 4, mlp_ratios=[2] * 4)
    arch[option] = value
    with pytest.raises(ValueError, match=words):
        official_arch_to_ours(arch)


# ---------------------------------------------------------------------- Twins PCPVT (CPVTV2)
@pytest.mark.parametrize('name', list(_load('pcpvt_options.pt')['cases']))
def test_pcpvt_official_option_parity(name):
    from mmposmlp.models.backbones.pvt_peg import PVTPEG
    from mmposmlp.models.converters.pvt_peg import convert_pcpvt, convert_pcpvt_head, official_arch_to_ours
    d = _load('pcpvt_options.pt')
    case = d['cases'][name]
    arch = json.loads(case['arch_json'])
    dense = case['kind'] == 'seg'
    backbone = PVTPEG(**official_arch_to_ours(arch, dense=dense)).eval()
    state = convert_pcpvt(case['state_dict'], dense=dense)
    result = backbone.load_state_dict(state, strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    head = None
    if not dense:
        head = nn.Linear(arch['embed_dims'][-1], arch['num_classes'])
        head.load_state_dict({k[3:]: v for k, v in convert_pcpvt_head(case['state_dict']).items()})
    with torch.no_grad():
        for x, ref in zip(d['inputs'], case['outputs_fp64']):
            outs = backbone.double()(x.double())
            out = torch.cat([o.flatten(1) for o in outs], 1) if dense else head.double()(outs[-1].mean((2, 3)))
            assert out.shape == ref.shape and (out - ref).abs().max() < 1e-8, name


@pytest.mark.parametrize('option,value,words', [
    ('block_cls', 'SBlock', 'block_cls'),
    ('norm_layer', 'nn.BatchNorm2d', 'norm_layer'),
    ('extra_norm', True, 'dense=True'),
    ('not_an_option', 1, 'not_an_option'),
])
def test_pcpvt_unsupported_official_options_are_refused(option, value, words):
    from mmposmlp.models.converters.pvt_peg import official_arch_to_ours
    with pytest.raises(ValueError, match=words):
        official_arch_to_ours({option: value})


def test_posmlp_cli_official_arch(tmp_path, monkeypatch):
    """posmlp2mmposmlp.py --official-arch converts a checkpoint trained with symmetric=False exactly."""
    import sys
    tool = load_tool('tools/model_converters/posmlp2mmposmlp.py')
    d = _load('posmlp_options_layers.pt')
    case = d['cases']['qpe_asymmetric']
    src, dst = tmp_path / 'official.pth.tar', tmp_path / 'ours.pth'
    torch.save({'state_dict_ema': case['state_dict'], 'epoch': 1}, src)
    monkeypatch.setattr(sys, 'argv', ['posmlp2mmposmlp.py', str(src), str(dst), '--official-arch', case['arch_json']])
    tool.main()
    out = torch.load(dst, weights_only=True)['state_dict']
    ref = convert_official_posmlp(case['state_dict'], **official_convert_kwargs(json.loads(case['arch_json'])))
    assert all(torch.equal(out['backbone.' + k] if not k.startswith('head.') else out['head.fc.' + k[5:]], v)
               for k, v in ref.items())
    assert len(out) == len(ref)


# ---------------------------------------------------------------------- ablation switches used by paper_tables/
def test_frozen_gqpe_centres_equal_zero_centres():
    from mmposmlp.models.layers.gating import PositionalGatingUnit
    frozen = PositionalGatingUnit(16, (5, 5), 2, 'ggqpe', learn_centers=False)
    free = PositionalGatingUnit(16, (5, 5), 2, 'ggqpe')
    assert 'mixing.centers' not in dict(frozen.named_parameters()) and 'mixing.centers' not in frozen.state_dict()
    frozen.init_weights()
    free.load_state_dict({**frozen.state_dict(), 'mixing.centers': torch.zeros(2, 2)})
    x = torch.randn(2, 3, 25, 16)
    assert torch.equal(frozen(x), free(x))
    with pytest.raises(ValueError, match='GQPE'):
        PositionalGatingUnit(16, (5, 5), 2, 'glrpe', learn_centers=False)


@pytest.mark.parametrize('mode', ['none', 'static', 'identity'])
def test_wavemlp_phase_ablation_modes(mode):
    from mmposmlp.models.layers.patm import PATM, PhaseEstimation
    x = torch.randn(2, 8, 6, 7)
    theta = PhaseEstimation(8, mode)(x)
    expected = {'none': torch.zeros_like(x), 'identity': x, 'static': torch.zeros_like(x)}[mode]
    assert torch.equal(theta, expected)
    patm = PATM(8, phase_mode=mode).eval()
    assert not any('phase_h.conv' in k for k in patm.state_dict())
    assert patm(x).shape == x.shape
