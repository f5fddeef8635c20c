"""PVT + PEG (= Twins PCPVT): official test vector, mmpretrain conversion, shapes, grads, loading."""
import json
import os.path as osp

import pytest
import torch

from mmposmlp.models.backbones.pvt_peg import PVTPEG
from mmposmlp.models.converters.pvt_peg import convert_pcpvt
from mmposmlp.models.checkpoints import CheckpointMismatchError
from mmposmlp.registry import MODELS
from toolcfg import load_tool

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
VECTOR = osp.join(ROOT, 'tests', 'data', 'pcpvt.pt')
TINY = dict(depths=[1, 1, 2, 1], embed_dims=[8, 16, 24, 32], num_heads=[1, 2, 3, 4],
            mlp_ratios=[2, 2, 2, 2], sr_ratios=[8, 4, 2, 1])


def _converter_module():
    return load_tool('tools', 'model_converters', 'pcpvt2mmposmlp.py')


@pytest.fixture(scope='module')
def vector():
    return torch.load(VECTOR, weights_only=True)


def _arch_from_vector(d):
    a = json.loads(d['arch_json'])
    assert a['norm_layer'] == 'partial(nn.LayerNorm, eps=1e-6)' and a['patch_size'] == 4
    return {k: a[k] for k in ('depths', 'embed_dims', 'num_heads', 'mlp_ratios', 'sr_ratios')}, a


def _classifier(arch, num_classes, **kw):
    """mmpretrain ImageClassifier: PVTPEG (+norm3) -> GAP neck -> LinearClsHead."""
    from mmengine.registry import DefaultScope
    from mmpretrain.registry import MODELS as PRETRAIN_MODELS
    cfg = dict(type='ImageClassifier',
               backbone=dict(type='mmposmlp.PVTPEG', arch=arch, out_indices=(3, ),
                             norm_after_stage=[False, False, False, True], **kw),
               neck=dict(type='GlobalAveragePooling'),
               head=dict(type='LinearClsHead', num_classes=num_classes, in_channels=arch['embed_dims'][-1]
                         if isinstance(arch, dict) else 512))
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        return PRETRAIN_MODELS.build(cfg)


@pytest.mark.parametrize('dtype,tol', [(torch.float64, 1e-8), (torch.float32, 1e-4)])
def test_official_pcpvt_vector_logits(vector, dtype, tol):
    arch, a = _arch_from_vector(vector)
    state, layout = _converter_module().convert(vector['state_dict'])
    assert layout == 'official'
    model = _classifier(arch, a['num_classes'])
    res = model.load_state_dict(state, strict=True)
    assert not res.missing_keys and not res.unexpected_keys
    model = model.to(dtype).eval()
    refs = vector['outputs_fp64'] if dtype == torch.float64 else vector['outputs_fp32']
    with torch.no_grad():
        for x, ref in zip(vector['inputs'], refs):  # 224x224, 193x257, 100x130 (floors)
            out = model(x.to(dtype), mode='tensor')
            assert (out.double() - ref.double()).abs().max().item() < tol


def test_official_pcpvt_vector_features_fp64(vector):
    arch, _ = _arch_from_vector(vector)
    model = PVTPEG(arch, out_indices=(0, 1, 2, 3)).double().eval()
    res = model.load_state_dict(convert_pcpvt(vector['state_dict']), strict=False)
    assert res.missing_keys == [] and res.unexpected_keys == ['norm3.weight', 'norm3.bias']
    with torch.no_grad():
        feats = model(vector['inputs'][0].double())
    for f, ref in zip(feats, vector['features']):
        assert f[:1].shape == ref.shape
        assert (f[:1] - ref).abs().max().item() < 1e-8
    # floor semantics of the official model at 100x130 (README: 25x32 / 12x16 / 6x8 / 3x4)
    with torch.no_grad():
        shapes = [tuple(f.shape[2:]) for f in model(vector['inputs'][2].double())]
    assert shapes == [(25, 32), (12, 16), (6, 8), (3, 4)]


def test_converter_cli_roundtrip(vector, tmp_path):
    src, dst = tmp_path / 'official.pth', tmp_path / 'sub' / 'converted.pth'
    torch.save(vector['state_dict'], src)
    _converter_module().main([str(src), str(dst)])
    ckpt = torch.load(dst, weights_only=True)
    assert ckpt['meta']['source_layout'] == 'official'
    assert set(ckpt['state_dict']) >= {'head.fc.weight', 'backbone.pegs.0.proj.0.weight', 'backbone.norm3.bias'}
    # a converted checkpoint loads through init_cfg (prefix 'backbone.') ...
    arch, _ = _arch_from_vector(vector)
    # the classifier's final norm (norm3) has no place in a dense PVTPEG: refused unless left out explicitly
    model = PVTPEG(arch, init_cfg=dict(type='Pretrained', checkpoint=str(dst), prefix='backbone.'))
    with pytest.raises(CheckpointMismatchError, match=r"'norm3.weight'.*ignore_keys"):
        model.init_weights()
    model = PVTPEG(arch, init_cfg=dict(type='Pretrained', checkpoint=str(dst), prefix='backbone.',
                                       ignore_keys=['norm3.*']))
    model.init_weights()
    torch.testing.assert_close(model.pegs[2].proj[0].weight, vector['state_dict']['pos_block.2.proj.0.weight'])
    # ... and so does the raw official file (converted on the fly)
    model2 = PVTPEG(arch, init_cfg=dict(type='Pretrained', checkpoint=str(src), ignore_keys=['norm3.*']))
    model2.init_weights()
    torch.testing.assert_close(model2.stages[2][1].ffn.fc1.weight,
                               vector['state_dict']['blocks.2.1.mlp.fc1.weight'])


def test_missing_backbone_keys_raise(vector, tmp_path):
    sd = dict(vector['state_dict'])
    del sd['pos_block.1.proj.0.weight']
    path = tmp_path / 'broken.pth'
    torch.save({'state_dict': sd}, path)
    arch, _ = _arch_from_vector(vector)
    model = PVTPEG(arch, init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    with pytest.raises(CheckpointMismatchError, match='pegs.1.proj.0.weight'):
        model.init_weights()
    # a wrong arch (different PEG kernel) is a shape error, also loud
    model = PVTPEG(arch, peg_cfg=dict(kernel_size=5), init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    with pytest.raises(CheckpointMismatchError):
        model.init_weights()


def _randomise(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and ('norm' in name or 'ln' in name) and name.endswith('weight'):
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
            else:
                fan_in = p[0].numel() if p.dim() > 1 else 10
                p.copy_(torch.randn(p.shape, generator=g) / fan_in ** 0.5)
    return model


def test_mmpretrain_pcpvt_conversion():
    """mmpretrain PCPVT (random weights) -> converter -> PVTPEG: equal at divisible sizes.

    mmpretrain differs from the official model in (i) 'corner' padding (ceil sizes for
    non-divisible inputs) and (ii) its SR LayerNorm eps (its ``norm_cfg``, 1e-6 in its
    configs; official 1e-5). With ``sr_norm_cfg`` eps 1e-6 the outputs agree to float64
    rounding; with the official eps they differ only by that eps.
    """
    from mmengine.registry import DefaultScope
    from mmpretrain.registry import MODELS as PRETRAIN_MODELS
    conv = _converter_module()
    arch = dict(TINY, patch_sizes=[4, 2, 2, 2], strides=[4, 2, 2, 2])
    cfg = dict(type='ImageClassifier',
               backbone=dict(type='PCPVT', arch=arch, out_indices=(3, ), qkv_bias=True,
                             norm_cfg=dict(type='LN', eps=1e-6), norm_after_stage=[False, False, False, True]),
               neck=dict(type='GlobalAveragePooling'),
               head=dict(type='LinearClsHead', num_classes=7, in_channels=32))
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        ref = PRETRAIN_MODELS.build(cfg)
    ref = _randomise(ref).double().eval()
    state, layout = conv.convert(ref.state_dict())
    assert layout == 'mmpretrain'
    ours = _classifier(TINY, 7, sr_norm_cfg=dict(type='LN', eps=1e-6)).double().eval()
    res = ours.load_state_dict(state, strict=True)
    assert not res.missing_keys and not res.unexpected_keys
    x = torch.randn(2, 3, 64, 64, dtype=torch.float64)
    with torch.no_grad():
        y_ref, y = ref(x, mode='tensor'), ours(x, mode='tensor')
        assert (y - y_ref).abs().max().item() < 1e-10
        # official SR eps (1e-5): a small, eps-sized difference only
        official = _classifier(TINY, 7).double().eval()
        official.load_state_dict(state, strict=True)
        d = (official(x, mode='tensor') - y_ref).abs().max().item()
        assert 0 < d < 1e-2
        # non-divisible input: mmpretrain pads (ceil), we floor like the official model
        x_odd = torch.randn(1, 3, 67, 93, dtype=torch.float64)
        assert ref.backbone(x_odd)[0].shape[2:] == (3, 3)
        assert ours.backbone(x_odd)[0].shape[2:] == (2, 2)


def test_odd_size_floor_shapes():
    model = PVTPEG(TINY).eval()
    with torch.no_grad():
        outs = model(torch.randn(1, 3, 67, 93))
    # floor: 67x93 -> 16x23 -> 8x11 -> 4x5 -> 2x2 (SR in stage 0: 16x23 -> 2x2)
    assert [tuple(o.shape) for o in outs] == [(1, 8, 16, 23), (1, 16, 8, 11), (1, 24, 4, 5), (1, 32, 2, 2)]
    assert [f['reduction'] for f in model.feature_info] == [4, 8, 16, 32]
    assert model.out_channels == [8, 16, 24, 32]


def test_input_errors():
    model = PVTPEG(TINY)
    with pytest.raises(ValueError, match='>= 32'):
        model(torch.randn(1, 3, 31, 64))
    with pytest.raises(ValueError, match='3, H, W'):
        model(torch.randn(1, 4, 64, 64))
    with pytest.raises(ValueError, match="choose one of"):
        PVTPEG('huge')
    with pytest.raises(ValueError, match='missing'):
        PVTPEG(dict(depths=[1, 1, 1, 1]))


def test_every_parameter_gets_gradient_and_frozen_stages():
    model = MODELS.build(dict(type='mmposmlp.PVTPEG', arch=TINY, norm_after_stage=True, drop_path_rate=0.1))
    model.init_weights()
    model.train()
    # random projection, not .sum(): the sum of a LayerNorm output does not depend on its input
    sum((o * torch.randn_like(o)).sum() for o in model(torch.randn(2, 3, 64, 64))).backward()
    no_grad = [n for n, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert no_grad == []
    frozen = PVTPEG(TINY, frozen_stages=2).train()
    for n, p in frozen.named_parameters():
        stage = next((int(n.split('.')[1]) for pre in ('patch_embeds.', 'stages.', 'pegs.')
                      if n.startswith(pre)), None)
        assert p.requires_grad == (stage is None or stage >= 2), n
    assert not frozen.stages[1].training and frozen.stages[2].training


def test_with_cp_matches():
    model = _randomise(PVTPEG(TINY)).double()
    model_cp = PVTPEG(TINY, with_cp=True).double()
    model_cp.load_state_dict(model.state_dict())
    x = torch.randn(1, 3, 64, 64, dtype=torch.float64, requires_grad=True)
    a, b = model(x)[-1], model_cp(x)[-1]
    torch.testing.assert_close(a, b)
    ga, = torch.autograd.grad(a.sum(), x)
    gb, = torch.autograd.grad(b.sum(), x)
    torch.testing.assert_close(ga, gb)


class _RecordingFFN(torch.nn.Module):
    calls = []

    def __init__(self, embed_dims, feedforward_channels, ffn_drop, scale=1.0):
        super().__init__()
        self.kwargs = dict(embed_dims=embed_dims, feedforward_channels=feedforward_channels,
                           ffn_drop=ffn_drop, scale=scale)
        self.fc = torch.nn.Linear(embed_dims, embed_dims)

    def forward(self, x, hw_shape):
        _RecordingFFN.calls.append((tuple(x.shape), tuple(hw_shape)))
        return self.fc(x)


def test_ffn_cfg_dropin_contract():
    _RecordingFFN.calls.clear()
    model = PVTPEG(TINY, drop_rate=0.1, ffn_cfg=dict(type=_RecordingFFN, scale=2.0)).eval()
    ffn = model.stages[2][0].ffn
    assert isinstance(ffn, _RecordingFFN)
    assert ffn.kwargs == dict(embed_dims=24, feedforward_channels=48, ffn_drop=0.1, scale=2.0)
    model(torch.randn(1, 3, 64, 96))
    assert _RecordingFFN.calls[0] == ((1, 16 * 24, 8), (16, 24))
    assert len(_RecordingFFN.calls) == sum(TINY['depths'])


def _cls_params(arch, **kw):
    m = PVTPEG(arch, norm_after_stage=[False, False, False, True], **kw)
    return sum(p.numel() for p in m.parameters()) + 512 * 1000 + 1000


def test_param_counts_match_official_pcpvt_and_table13():
    # official Twins PCPVT-S/B/L (pcpvt_{small,base,large}_v0, 1000 classes) parameter counts
    assert _cls_params('small') == 24_106_216
    assert _cls_params('medium') == 43_828_456
    assert _cls_params('large') == 60_989_672
    # PVT-tiny + PEG: CPVT Table 13 lists 13M (PVT-tiny 13,229,288 - pos-embeds/cls + 4 PEGs)
    n = _cls_params('tiny')
    assert n == 13_229_288 - (3136 * 64 + 784 * 128 + 196 * 320 + 50 * 512 + 512) + 10 * (64 + 128 + 320 + 512)
    assert round(n / 1e6) == 13


def test_imlp_drops_in_as_ffn():
    """The IMLP helper's module honours the ffn_cfg contract (embed_dims, feedforward_channels,
    ffn_drop; forward(x, hw_shape))."""
    from mmposmlp.models.backbones.cpvt import CPVT
    pytest.importorskip('mmposmlp.models.layers.imlp')
    model = PVTPEG(TINY, ffn_cfg=dict(type='mmposmlp.IMLP'))
    assert type(model.stages[0][0].ffn).__name__ == 'IMLP'
    outs = model(torch.randn(1, 3, 64, 96))
    assert outs[-1].shape == (1, 32, 2, 3)
    vit = CPVT(dict(embed_dims=16, num_layers=2, num_heads=2, feedforward_channels=32),
               peg_positions=(0, ), ffn_cfg=dict(type='mmposmlp.IMLP'))
    assert type(vit.layers[0].ffn).__name__ == 'IMLP'
    assert vit(torch.randn(1, 3, 48, 64))[0].shape == (1, 16)
