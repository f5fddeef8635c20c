"""Isotropic gMLP backbone (PosMLP Tables 1, 3, 10): timm equivalence, gate types, paper params, freezing."""
import os

import pytest
import torch

from mmposmlp.models.backbones.gmlp import GMLP
from mmposmlp.models.converters.gmlp import convert_timm_gmlp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLES = os.path.join(ROOT, 'configs', 'posmlp', 'paper_tables')
SMALL = dict(num_layers=3, embed_dims=32, feedforward_channels=64)


def _classifier(backbone: dict, num_classes: int, in_channels: int):
    from mmengine.registry import DefaultScope
    from mmpretrain.registry import MODELS
    cfg = dict(type='ImageClassifier', backbone=dict(type='mmposmlp.GMLP', **backbone),
               neck=dict(type='GlobalAveragePooling'),
               head=dict(type='LinearClsHead', num_classes=num_classes, in_channels=in_channels))
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        return MODELS.build(cfg)


def _perturbed(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Random weights everywhere (gate weights and biases off their identity init, norms off 1/0)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.05)
    return model


def test_timm_gmlp_s16_224_converts_exactly_fp64():
    """timm's gMLP-S (SGU) with random weights, converted: same parameter count and logits (fp64)."""
    timm = pytest.importorskip('timm')
    ref = _perturbed(timm.create_model('gmlp_s16_224').double().eval())
    ours = _classifier(dict(arch='s'), 1000, 256).double().eval()
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in ref.parameters()) == 19422656
    ours.load_state_dict(convert_timm_gmlp(ref.state_dict()), strict=True)
    x = torch.randn(1, 3, 224, 224, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a, b = ref(x), ours(x, mode='tensor')
    assert a.abs().max() > 0.1
    assert (a - b).abs().max().item() < 1e-10


def _small_timm_gmlp(num_classes=5):
    from timm.layers import GatedMlp
    from timm.models.mlp_mixer import MlpMixer, SpatialGatingBlock
    return MlpMixer(num_classes=num_classes, img_size=64, patch_size=16, num_blocks=SMALL['num_layers'],
                    embed_dim=SMALL['embed_dims'], mlp_ratio=SMALL['feedforward_channels'] / SMALL['embed_dims'],
                    block_layer=SpatialGatingBlock, mlp_layer=GatedMlp)


def test_timm_checkpoint_loads_through_init_cfg(tmp_path):
    """A timm gMLP state dict (DDP ``module.`` prefix) as ``init_cfg``: converted, every key placed."""
    pytest.importorskip('timm')
    ref = _perturbed(_small_timm_gmlp().double().eval())
    path = str(tmp_path / 'gmlp_timm.pth')
    torch.save({f'module.{k}': v for k, v in ref.state_dict().items()}, path)
    ours = GMLP(arch=SMALL, img_size=64, init_cfg=dict(type='Pretrained', checkpoint=path)).double().eval()
    ours.init_weights()
    x = torch.randn(2, 3, 64, 64, dtype=torch.float64)
    with torch.no_grad():
        feat = ours(x)[0].mean((2, 3))
        assert torch.allclose(feat, ref.forward_head(ref.forward_features(x), pre_logits=True), atol=1e-12, rtol=0)


def test_timm_converter_refuses_unknown_keys():
    sd = {'blocks.0.mlp_channels.gate.proj.weight': torch.zeros(4, 4), 'blocks.0.attn.qkv.weight': torch.zeros(1)}
    with pytest.raises(KeyError, match="unexpected key 'blocks.0.attn.qkv.weight'"):
        convert_timm_gmlp(sd)


@pytest.mark.parametrize('gate_type', ['sgu', 'lrpe-m', 'lrpe', 'glrpe', 'ggqpe'])
def test_each_gate_runs_at_224_and_refuses_other_sizes(gate_type):
    model = GMLP(arch=SMALL, gate_type=gate_type, groups=8, out_indices=(0, -1)).eval()
    model.init_weights()
    model = _perturbed(model)
    with torch.no_grad():
        outs = model(torch.randn(1, 3, 224, 224))
    assert [tuple(o.shape) for o in outs] == [(1, 32, 14, 14)] * 2
    assert all(torch.isfinite(o).all() for o in outs)
    with pytest.raises(ValueError, match=r'takes 224x224 inputs only, got 256x256: resize the input or build it '
                                         r'with img_size=\(256, 256\)\.$'):
        model(torch.randn(1, 3, 256, 256))


def test_gates_differ_and_groups_apply():
    """The gate type changes the model (not ignored) and group-wise gates take ``groups``; single-group ones do not."""
    sgu, ggqpe = GMLP(arch=SMALL, gate_type='sgu'), GMLP(arch=SMALL, gate_type='ggqpe', groups=4)
    assert sgu.layers[0].gate.groups == 1 and sgu.layers[0].gate.norm is not None
    assert ggqpe.layers[0].gate.groups == 4 and ggqpe.layers[0].gate.norm is None
    with pytest.raises(ValueError, match="unknown gate_type 'gqpe2'"):
        GMLP(arch=SMALL, gate_type='gqpe2')


@pytest.mark.parametrize('config,paper_params,paper_gflops', [
    ('gmlp-s_8xb120_in1k-half.py', 19.4, 4.42),  # Table 3 gMLP (original) = Table 10 Original
    ('gmlp-s-ggqpe_8xb120_in1k-half.py', 18.2, 4.45),  # Table 3 gMLP+GGQPE
])
def test_table3_rows_params_and_flops_vs_paper(config, paper_params, paper_gflops):
    """Whole classifier built from the config: params within 1% and FLOPs (fvcore, 1 MAC = 1 FLOP, 224x224)
    within 5% of PosMLP Table 3, with no matrix product left uncounted."""
    from tools.analysis.params_flops import count_flops, count_params
    from mmposmlp.testing import build_model_from_cfg
    model, scope = build_model_from_cfg(os.path.join(TABLES, config))
    params = count_params(model) / 1e6
    assert abs(params - paper_params) / paper_params < 0.01, params
    flops, skipped = count_flops(model, (1, 3, 224, 224), scope)
    assert set(skipped) <= {'aten::numpy_T'}, skipped  # (the fused gated MLP's transposes: no arithmetic)
    assert abs(flops / 1e9 - paper_gflops) / paper_gflops < 0.05, flops


def test_frozen_stages_freeze_the_embedding_and_first_blocks():
    model = GMLP(arch=SMALL, img_size=32, frozen_stages=2)
    model.train()
    frozen = [model.patch_embed, model.layers[0], model.layers[1]]
    assert all(not p.requires_grad for m in frozen for p in m.parameters())
    assert all(not m.training for m in frozen)
    assert all(p.requires_grad for p in model.layers[2].parameters()) and model.layers[2].training
    assert all(p.requires_grad for p in model.norm.parameters())
    model = GMLP(arch=SMALL, img_size=32, frozen_stages=3).train()
    assert not any(p.requires_grad for p in model.parameters())
    with pytest.raises(ValueError, match=r'frozen_stages must be in \[-1, 3\], got 4'):
        GMLP(arch=SMALL, frozen_stages=4)


def test_out_indices_return_block_outputs_and_only_the_last_is_normed():
    model = GMLP(arch=SMALL, img_size=32, out_indices=(1, -1)).eval()
    model.init_weights()
    _perturbed(model)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        mid, last = model(x)
        tokens = model.patch_embed(x).flatten(2).transpose(1, 2)
        for layer in model.layers[:2]:
            tokens = layer(tokens)
        assert torch.allclose(mid, tokens.transpose(1, 2).reshape(2, 32, 2, 2))
        tokens = model.layers[2](tokens)
        assert torch.allclose(last, model.norm(tokens).transpose(1, 2).reshape(2, 32, 2, 2), atol=1e-6)
    assert model.out_channels == [32, 32]
    with pytest.raises(ValueError, match=r'out_indices must be in \[-3, 3\), got 3'):
        GMLP(arch=SMALL, out_indices=3)


def test_with_cp_matches_and_drop_path_is_stochastic():
    torch.manual_seed(0)
    a = GMLP(arch=SMALL, img_size=32, with_cp=False, drop_path_rate=0.5)
    b = GMLP(arch=SMALL, img_size=32, with_cp=True, drop_path_rate=0.5)
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 3, 32, 32, requires_grad=True)
    a.eval(), b.eval()
    ya, yb = a(x)[0], b(x)[0]
    assert torch.equal(ya, yb)
    ga, = torch.autograd.grad(ya.sum(), x)
    gb, = torch.autograd.grad(yb.sum(), x)
    assert torch.allclose(ga, gb, atol=1e-6)
    a.train()
    x = torch.randn(16, 3, 32, 32)  # 16 samples x 3 blocks of keep/drop draws: equal twice with p = 2**-48
    assert not torch.equal(a(x)[0], a(x)[0])


def test_arch_errors_name_the_choices():
    with pytest.raises(ValueError, match=r"unknown gMLP arch 'xl'; choose one of \['b', 'base', 's', 'small', "):
        GMLP(arch='xl')
    with pytest.raises(ValueError, match=r"missing \['feedforward_channels'\], unknown \['mlp_ratio'\]"):
        GMLP(arch=dict(num_layers=2, embed_dims=32, mlp_ratio=4))
    with pytest.raises(ValueError, match='divisible by patch_size=16'):
        GMLP(arch=SMALL, img_size=100)


@pytest.mark.parametrize('gate_type', ['ggqpe', 'glrpe'])
def test_positional_gates_load_at_another_input_size(gate_type):
    """The positional gates carry over to a new grid (token biases / tables resized), as PosMLP's do."""
    src = GMLP(arch=SMALL, gate_type=gate_type, img_size=224)
    dst = GMLP(arch=SMALL, gate_type=gate_type, img_size=256)
    dst.load_state_dict(src.state_dict())
    assert dst.layers[0].gate.token_bias.numel() == 256
    with torch.no_grad():
        assert dst(torch.randn(1, 3, 256, 256))[0].shape == (1, 32, 16, 16)


def test_sgu_token_fc_does_not_load_at_another_input_size():
    src = GMLP(arch=SMALL, gate_type='sgu', img_size=224)
    dst = GMLP(arch=SMALL, gate_type='sgu', img_size=256)
    with pytest.raises(RuntimeError, match=r'gate\.mixing\.weight: copying a param with shape '
                                           r'torch\.Size\(\[196, 196\]\)'):
        dst.load_state_dict(src.state_dict())


def test_non_locality_eq16_per_layer():
    """PosMLP Eq. (16) (Fig. 8): g = mean over groups of sqrt(det Sigma~); Sigma~ = Gamma Gamma^T, so scaling
    Gamma by k gives k^2; a singular group is left out; layers come in module order."""
    from tools.analysis.non_locality import non_locality
    model = GMLP(arch=SMALL, gate_type='ggqpe', groups=4)  # spreads Gamma = I before init_weights
    with torch.no_grad():
        model.layers[1].gate.mixing.spreads.mul_(2.)
        model.layers[2].gate.mixing.spreads[0].zero_()
        model.layers[2].gate.mixing.spreads[1] = torch.tensor([[3., 0.], [0., 1 / 3.]])
    g = non_locality(model)
    assert list(g) == [f'layers.{i}.gate' for i in range(3)]
    assert g['layers.0.gate'] == pytest.approx(1.0, abs=1e-12)
    assert g['layers.1.gate'] == pytest.approx(4.0, abs=1e-12)
    assert g['layers.2.gate'] == pytest.approx(1.0, abs=1e-6)  # det(diag(9, 1/9)) = 1; the zero group is out
    with pytest.raises(ValueError, match='no Gaussian'):
        non_locality(GMLP(arch=SMALL, gate_type='sgu'))
