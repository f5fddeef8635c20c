"""PosMLP image backbone: official test vectors, any input size, masks, shifts, policies."""
import json
import math
import os

import pytest
import torch
import torch.nn as nn

from mmposmlp.models.backbones.posmlp import PosMLP
from mmposmlp.models.converters.posmlp import convert_official_posmlp, official_arch_to_ours
from mmposmlp.models.checkpoints import CheckpointMismatchError
from mmposmlp.models.layers import gating
from mmposmlp.models.layers.gating import GATE_TYPES, PositionalGatingUnit
from mmposmlp.models.layers.windows import make_layout, pad_to_multiple

DATA = os.path.join(os.path.dirname(__file__), 'data')
VECTORS = ['posmlp_ggqpe.pt', 'posmlp_lrpe.pt', 'posmlp_gqpe.pt']
TINY = dict(embed_dims=[16, 32, 64, 128], depths=[1, 1, 2, 1], groups=[2, 4, 8, 16],
            mlp_ratios=[4, 4, 4, 2], window_sizes=[7, 7, 7, 7])


class Classifier(nn.Module):
    """backbone -> norm3 -> GAP -> Linear, the official classification head."""

    def __init__(self, backbone, num_classes):
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(backbone.out_channels[-1], num_classes)

    def forward(self, x):
        return self.head(self.backbone(x)[-1].mean((2, 3)))


def load_vector(name):
    return torch.load(os.path.join(DATA, name), weights_only=True)


def build_from_vector(d):
    arch = json.loads(d['arch_json'])
    model = Classifier(PosMLP(**official_arch_to_ours(arch), out_indices=(3, )), arch['num_classes'])
    state = convert_official_posmlp(d['state_dict'])
    result = model.load_state_dict({('backbone.' + k if not k.startswith('head.') else k): v
                                     for k, v in state.items()}, strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    return model.eval()


@pytest.mark.parametrize('name', VECTORS)
def test_official_vectors(name):
    d = load_vector(name)
    model = build_from_vector(d)
    feats = []
    # stages run channels-last (B, H, W, C); the official features are NCHW
    hooks = [s.register_forward_hook(lambda m, i, o: feats.append(o.permute(0, 3, 1, 2)))
             for s in model.backbone.stages]
    with torch.no_grad():
        m64 = model.double()
        for x, ref in zip(d['inputs'], d['outputs_fp64']):
            out = m64(x.double())
            assert (out - ref).abs().max() < 1e-8, (name, (out - ref).abs().max())
        for f, ref in zip(feats[:4], d['features']):
            assert f[:1].shape == ref.shape
            assert (f[:1] - ref).abs().max() < 1e-8
        for h in hooks:
            h.remove()
        m32 = model.float()
        for x, ref in zip(d['inputs'], d['outputs_fp32']):
            assert (m32(x) - ref).abs().max() < 1e-4


def test_converter_detects_wrong_axes():
    """Converting GQPE centres without the official axis convention breaks equality."""
    d = load_vector('posmlp_ggqpe.pt')
    model = build_from_vector(d)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith('centers'):
                p.copy_(p.flip(-1))
        out = model.double()(d['inputs'][0].double())
    assert (out - d['outputs_fp64'][0]).abs().max() > 1e-4


@pytest.mark.parametrize('arch,params', [('tiny', 20_925_538), ('small', 36_816_450), ('base', 81_976_834)])
def test_param_counts(arch, params):
    """Official code counts (T, S) and the paper's 82M (B), with the 1000-class head."""
    model = Classifier(PosMLP(arch=arch), 1000)
    n = sum(p.numel() for p in model.parameters())
    assert n == params
    paper = {'tiny': 21e6, 'small': 37e6, 'base': 82e6}[arch]
    assert abs(n - paper) / paper < 0.01 + 0.5e6 / paper  # the paper rounds to 1M


def block_token_params(window, groups, gate_type):
    gate = PositionalGatingUnit(2 * groups * 4, (window, window), groups, gate_type)
    return sum(p.numel() for n, p in gate.named_parameters() if not n.startswith('norm'))


@pytest.mark.parametrize('window,groups', [(14, 8), (7, 64)])
def test_token_mixing_params_follow_appendix(window, groups):
    n, s = window * window, groups
    # appendix: SGU N^2 (+ N bias); GGQPE 6s (+ N bias)
    assert block_token_params(window, s, 'sgu') == n * n + n
    assert block_token_params(window, s, 'ggqpe') == 6 * s + n
    # GLRPE: s tables of (2 sqrt(N) - 1)^2 plus the N biases = (4s+1)N - 4s sqrt(N) + s.
    # The appendix prints "+4s" for the constant; (2 sqrt(N) - 1)^2 s expands to +s (README).
    assert block_token_params(window, s, 'glrpe') == (4 * s + 1) * n - 4 * s * window + s
    assert block_token_params(window, s, 'lrpe') == (2 * window - 1)**2 + n
    assert block_token_params(window, s, 'lrpe-m') == (2 * window - 1)**2 + n * n + n


@pytest.mark.parametrize('gate_type', sorted(GATE_TYPES))
def test_every_gate_type_forward_and_grad(gate_type):
    torch.manual_seed(0)
    model = PosMLP(arch=TINY, gate_type=gate_type, out_indices=(0, 1, 2, 3), shift=True,
                   drop_path_rate=0.1)
    model.init_weights()
    outs = model(torch.randn(2, 3, 61, 83))
    sum(o.sum() for o in outs).backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None]
    assert not missing


@pytest.mark.parametrize('shape', [(1, 3, 193, 257), (1, 3, 64, 64), (2, 3, 97, 33)])
def test_any_input_size(shape):
    model = PosMLP(arch=TINY, out_indices=(0, 1, 2, 3), shift=True).eval()
    with torch.no_grad():
        outs = model(torch.randn(shape))
    h, w = shape[2:]
    for i, o in enumerate(outs):
        stride = 2**(i + 2)
        assert o.shape == (shape[0], TINY['embed_dims'][i], math.ceil(h / stride), math.ceil(w / stride))
        assert torch.isfinite(o).all()


@pytest.mark.slow
def test_large_detection_input():
    model = PosMLP(arch='tiny', out_indices=(0, 1, 2, 3), shift=True).eval()
    with torch.no_grad():
        outs = model(torch.randn(1, 3, 800, 1216))
    assert [tuple(o.shape[2:]) for o in outs] == [(200, 304), (100, 152), (50, 76), (25, 38)]


def test_arch_settings_and_errors():
    with pytest.raises(KeyError, match='valid archs'):
        PosMLP(arch='huge')
    with pytest.raises(KeyError, match='unknown keys'):
        PosMLP(arch=dict(embed_dims=[8, 16], depth=[1, 1]))
    with pytest.raises(ValueError, match='multiple of in_channels'):
        PosMLP(arch=dict(embed_dims=[16, 24, 48, 96], depths=[1, 1, 1, 1]))
    model = PosMLP(arch=TINY, out_indices=(0, 1, 2, 3))
    with pytest.raises(ValueError, match='channels'):
        model(torch.randn(1, 1, 32, 32))
    assert model.out_channels == [16, 32, 64, 128]
    assert [f['reduction'] for f in model.feature_info] == [4, 8, 16, 32]
    with pytest.raises(KeyError, match='gate_type'):
        PosMLP(arch=TINY, gate_type='nope')


# --------------------------------------------------------------------- direct computations
def direct_mixing(gate, u, real_hw, window, shift):
    """Reference: every real token mixes exactly the real tokens of its (shifted) window,
    found by explicit index sets on the unshifted map (no roll, no partition)."""
    H, W = real_hw
    wh, ww = window
    sh, sw = shift
    mix = gate.mixing
    coords = [(y, x) for y in range(H) for x in range(W)]
    win_id = {(y, x): ((y - sh) // wh, (x - sw) // ww) for y, x in coords}
    pos_in_window = {(y, x): ((y - sh) % wh, (x - sw) % ww) for y, x in coords}
    G = gate.groups
    C = u.shape[-1] // 2
    out = torch.zeros(H, W, C, dtype=u.dtype)
    for q in coords:
        keys = [k for k in coords if win_id[k] == win_id[q]]
        d = torch.tensor([[k[0] - q[0], k[1] - q[1]] for k in keys], dtype=u.dtype)  # key - query
        if hasattr(mix, 'centers'):
            if mix.generalized:
                sigma = mix.spreads @ mix.spreads.transpose(-1, -2)
                diff = d[None] - mix.centers[:, None, :]
                score = -0.5 * torch.einsum('gnd,gde,gne->gn', diff, sigma, diff)
            else:
                diff = d[None] - (mix.spreads.square()[:, None] * mix.centers)[:, None, :]
                score = -0.5 * diff.square().sum(-1)
            weights = score.softmax(-1)  # (G, K)
        else:
            qd = -d  # query - key
            idx = ((qd[:, 0] + wh - 1) * (2 * ww - 1) + (qd[:, 1] + ww - 1)).long()
            weights = mix.relative_position_table[idx].T  # (G, K)
        vals = torch.stack([u[k[0], k[1], :C] for k in keys])  # (K, C)
        group = torch.arange(C) % G
        mixed = (weights[group] * vals.T).sum(-1)  # (C,)
        m = pos_in_window[q][0] * ww + pos_in_window[q][1]
        out[q[0], q[1]] = (mixed + gate.token_bias[m]) * u[q[0], q[1], C:]
    return out


def run_gate(gate, u, window, shift):
    x = pad_to_multiple(u[None], window)
    layout = make_layout(x, u.shape[:2], window, shift)
    y = layout.reverse(gate(layout.partition(x), layout))
    return y[0, :u.shape[0], :u.shape[1]]


@pytest.mark.parametrize('gate_type', ['ggqpe', 'gqpe', 'glrpe'])
@pytest.mark.parametrize('hw,shift', [((10, 13), (0, 0)), ((12, 12), (3, 3)), ((11, 9), (3, 3))])
def test_masked_padding_and_shift_equal_direct_computation(gate_type, hw, shift):
    torch.manual_seed(1)
    window = (6, 6)
    gate = PositionalGatingUnit(16, window, 4, gate_type).double()
    with torch.no_grad():
        for p in gate.parameters():
            p.normal_(0, 0.5)
        if gate_type == 'ggqpe':
            gate.mixing.spreads.add_(torch.eye(2))
    u = torch.randn(*hw, 16, dtype=torch.float64)
    ours = run_gate(gate, u, window, shift)
    ref = direct_mixing(gate, u, hw, window, shift)
    assert (ours - ref).abs().max() < 1e-10


@pytest.mark.parametrize('gate_type', sorted(GATE_TYPES))
@pytest.mark.parametrize('hw,shift', [((12, 12), (0, 0)), ((11, 15), (3, 3))])
@pytest.mark.parametrize('bias', [True, False])
def test_channel_major_fast_path_equals_plain_path(gate_type, hw, shift, bias, monkeypatch):
    """``forward_mlp`` (hidden tensor channel-major from fc1 to fc2, group-major weights) gives
    the plain ``fc2(gate(act(fc1(x))))`` - values and every gradient - on padded and shifted
    windows, with and without autograd (the no-grad path caches the permuted weights)."""
    torch.manual_seed(4)
    # K = hidden / 2 / groups = 6 channels per group != G = 4 groups: with K == G the group-major
    # and channel-major orders are the same permutation and an exchange of K and G goes unseen
    window, cin, hidden, groups = (6, 6), 8, 48, 4
    fc1, fc2 = nn.Linear(cin, hidden, bias=bias).double(), nn.Linear(hidden // 2, 5, bias=bias).double()
    gate = PositionalGatingUnit(hidden, window, groups, gate_type).double()
    with torch.no_grad():
        for p in gate.parameters():
            p.normal_(0, 0.5)
    act = nn.GELU()
    x = pad_to_multiple(torch.randn(2, *hw, cin, dtype=torch.float64), window)
    layout = make_layout(x, hw, window, shift)
    assert layout.masked == (hw != (12, 12) or any(shift))
    windows = layout.partition(x).requires_grad_()
    params = [windows] + list(fc1.parameters()) + list(fc2.parameters()) + list(gate.parameters())
    results = []
    for fast in (False, True):
        out = gate.forward_mlp(windows, fc1, act, fc2, layout) if fast else fc2(gate(act(fc1(windows)), layout))
        grads = torch.autograd.grad((out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum(), params)
        results.append((out.detach(), grads))
    assert (results[0][0] - results[1][0]).abs().max() < 1e-12
    for g0, g1 in zip(results[0][1], results[1][1]):
        assert (g0 - g1).abs().max() < 1e-10
    with torch.no_grad():
        assert (gate.forward_mlp(windows, fc1, act, fc2, layout) - results[0][0]).abs().max() < 1e-12
        # inference in chunks of 3 windows: chunks straddle images and split masked windows
        monkeypatch.setattr(gating, 'CHUNK_BYTES', 3 * hidden * 36 * 8)
        assert windows.shape[1] * 2 > 3
        assert (gate.forward_mlp(windows, fc1, act, fc2, layout) - results[0][0]).abs().max() < 1e-12
        fc2.weight.mul_(2)  # the cached permuted weights follow in-place updates
        assert (gate.forward_mlp(windows, fc1, act, fc2, layout)
                - fc2(gate(act(fc1(windows)), layout))).abs().max() < 1e-12


def test_fast_path_respects_hooks_on_fcs():
    """A wrapped/hooked FC (e.g. a quantiser or LoRA hook) is called, not bypassed."""
    fc1, fc2 = nn.Linear(8, 32), nn.Linear(16, 8)
    gate, act = PositionalGatingUnit(32, (4, 4), 4), nn.GELU()
    calls = []
    fc1.register_forward_hook(lambda m, i, o: calls.append(o.shape) or o * 0)
    x = torch.randn(1, 2, 16, 8)
    out = gate.forward_mlp(x, fc1, act, fc2)
    assert calls == [torch.Size([1, 2, 16, 32])]
    assert torch.allclose(out, fc2.bias.expand_as(out))  # the hook's output (zeros) was used


def test_shift_without_mask_would_differ():
    """The direct reference is sensitive: dropping the masks changes border tokens."""
    torch.manual_seed(2)
    window, shift, hw = (6, 6), (3, 3), (12, 12)
    gate = PositionalGatingUnit(16, window, 4, 'ggqpe').double()
    with torch.no_grad():
        for p in gate.parameters():
            p.normal_(0, 0.5)
    u = torch.randn(*hw, 16, dtype=torch.float64)
    x = u[None]
    layout = make_layout(x, hw, window, shift)
    patterns = layout.patterns
    layout.patterns = None  # pretend there were no masks
    y = layout.reverse(gate(layout.partition(x), layout))[0]
    layout.patterns = patterns
    assert (y - direct_mixing(gate, u, hw, window, shift)).abs().max() > 1e-3


def test_padding_does_not_leak_into_real_tokens():
    """Outputs on real tokens do not depend on what the padded area contains."""
    torch.manual_seed(3)
    window = (7, 7)
    for gate_type in ('ggqpe', 'glrpe'):
        gate = PositionalGatingUnit(32, window, 4, gate_type).double()
        with torch.no_grad():
            for p in gate.parameters():
                p.normal_(0, 0.5)
        u = torch.randn(9, 11, 32, dtype=torch.float64)
        x1 = pad_to_multiple(u[None], window)
        x2 = x1.clone()
        x2[:, 9:] = torch.randn_like(x2[:, 9:])
        x2[:, :, 11:] = torch.randn_like(x2[:, :, 11:])
        outs = []
        for xp in (x1, x2):
            layout = make_layout(xp, (9, 11), window)
            outs.append(layout.reverse(gate(layout.partition(xp), layout))[0, :9, :11])
        assert (outs[0] - outs[1]).abs().max() < 1e-12


def test_identical_to_unpadded_at_window_multiples():
    """No padding and no shift: the masked path is not taken and results are unchanged."""
    model = PosMLP(arch=TINY, out_indices=(3, )).eval()
    x = torch.randn(1, 3, 224, 224)
    layout_calls = []
    orig = PositionalGatingUnit._mix

    def spy(self, u, layout, *args):
        layout_calls.append(layout.masked)
        return orig(self, u, layout, *args)

    PositionalGatingUnit._mix = spy
    try:
        with torch.no_grad():
            model(x)
    finally:
        PositionalGatingUnit._mix = orig
    assert layout_calls and not any(layout_calls)


# --------------------------------------------------------------------- policies
def test_frozen_stages_and_norm_eval():
    model = PosMLP(arch=TINY, out_indices=(0, 1, 2, 3), frozen_stages=2, norm_eval=True)
    model.train()
    for p in model.patch_embed.parameters():
        assert not p.requires_grad
    for i in range(2):
        assert not any(p.requires_grad for p in model.stages[i].parameters())
        assert not model.stages[i].training
    assert all(p.requires_grad for p in model.stages[2].parameters())
    assert not any(p.requires_grad for p in model.norm0.parameters())
    assert all(p.requires_grad for p in model.norm2.parameters())
    assert not model.patch_embed[0].bn.training  # BN in eval (norm_eval)


def test_with_cp_matches():
    torch.manual_seed(0)
    a = PosMLP(arch=TINY, out_indices=(0, 1, 2, 3), shift=True, drop_path_rate=0.)
    b = PosMLP(arch=TINY, out_indices=(0, 1, 2, 3), shift=True, drop_path_rate=0., with_cp=True)
    a.init_weights()
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 3, 45, 60)
    ya, yb = a(x), b(x)
    sum(o.square().sum() for o in ya).backward()
    sum(o.square().sum() for o in yb).backward()
    for (n, pa), pb in zip(a.named_parameters(), b.parameters()):
        assert torch.allclose(pa.grad, pb.grad, atol=1e-5), n
    assert all(torch.allclose(u, v, atol=1e-6) for u, v in zip(ya, yb))


def test_window_size_transfer(tmp_path):
    """GQPE runs with another window as is; LRPE tables/biases are resized on load."""
    for gate_type in ('ggqpe', 'glrpe'):
        src = PosMLP(arch=TINY, gate_type=gate_type)
        src.init_weights()
        arch = dict(TINY, window_sizes=[5, 5, 5, 3])
        dst = PosMLP(arch=arch, gate_type=gate_type)
        dst.load_state_dict(src.state_dict(), strict=True)
        gate = dst.stages[0].blocks[0].gate
        assert gate.token_bias.shape == (25, )
        if gate_type == 'ggqpe':
            assert torch.equal(gate.mixing.centers, src.stages[0].blocks[0].gate.mixing.centers)
        else:
            assert gate.mixing.relative_position_table.shape == (81, 2)
        with torch.no_grad():
            assert torch.isfinite(dst(torch.randn(1, 3, 64, 64))[0]).all()


def test_pretrained_init_reports_missing_keys(tmp_path):
    src = PosMLP(arch=TINY)
    state = {'backbone.' + k: v for k, v in src.state_dict().items()}
    good = tmp_path / 'good.pth'
    torch.save({'state_dict': state}, good)
    dense = PosMLP(arch=TINY, out_indices=(0, 1, 2, 3),
                   init_cfg=dict(type='Pretrained', checkpoint=str(good), prefix='backbone.'))
    dense.init_weights()  # norm0-2 are new: allowed
    assert torch.equal(dense.stages[2].blocks[0].fc1.weight, src.stages[2].blocks[0].fc1.weight)
    bad = tmp_path / 'bad.pth'
    torch.save({'state_dict': {k: v for k, v in state.items() if 'stages.3' not in k}}, bad)
    model = PosMLP(arch=TINY, init_cfg=dict(type='Pretrained', checkpoint=str(bad)))
    with pytest.raises(CheckpointMismatchError, match='missing'):
        model.init_weights()
    with pytest.raises(FileNotFoundError, match='does not exist'):
        PosMLP(arch=TINY, init_cfg=dict(type='Pretrained', checkpoint=str(tmp_path / 'x.pth'))).init_weights()


# --------------------------------------------------------------------- tools
def test_converter_tool_round_trip_into_mmpretrain(tmp_path, repo_root):
    """Official file -> tools/model_converters/posmlp2mmposmlp.py -> mmpretrain ImageClassifier
    built from our config: zero missing/unexpected keys, official logits."""
    import subprocess
    import sys

    from mmengine.config import Config

    from mmposmlp.testing import build_model_from_cfg
    d = load_vector('posmlp_ggqpe.pt')
    src = tmp_path / 'official.pth'
    torch.save({'state_dict_ema': d['state_dict'], 'epoch': 3}, src)
    dst = tmp_path / 'converted.pth'
    subprocess.run([sys.executable, os.path.join(repo_root, 'tools/model_converters/posmlp2mmposmlp.py'),
                    str(src), str(dst)], check=True, capture_output=True)
    cfg = Config.fromfile(os.path.join(repo_root, 'configs/posmlp/posmlp-t_8xb120_in1k.py'))
    arch = json.loads(d['arch_json'])
    cfg.model.backbone.update(official_arch_to_ours(arch))
    cfg.model.head.update(num_classes=10, in_channels=128)
    model, _ = build_model_from_cfg(cfg)
    state = torch.load(dst, weights_only=True)['state_dict']
    result = model.load_state_dict(state, strict=False)
    assert not result.missing_keys and not result.unexpected_keys
    model.eval()
    with torch.no_grad():
        out = model(d['inputs'][0], mode='tensor')
    assert (out - d['outputs_fp32'][0]).abs().max() < 1e-4


def test_mixing_map_tool(tmp_path, repo_root):
    import subprocess
    import sys
    out = tmp_path / 'maps.png'
    subprocess.run([sys.executable, os.path.join(repo_root, 'tools/analysis/posmlp_mixing_maps.py'), 'random',
                    str(out), '--arch', 'tiny', '--stage', '3', '--max-blocks', '2'], check=True, capture_output=True)
    assert out.stat().st_size > 1000
    from mmposmlp.models.backbones.posmlp import PosMLP as P
    from tools.analysis.posmlp_mixing_maps import mixing_maps  # noqa: F401  (importable)
    model = P(arch=TINY)
    model.init_weights()
    maps = mixing_maps(model, 0)
    # GQPE rows are softmax distributions over the window
    assert torch.allclose(maps[0].sum((1, 2)), torch.ones(maps[0].shape[0]), atol=1e-5)


# --------------------------------------------------------------------- fast paths
def test_inference_cache_is_invalidated_when_weights_change():
    model = PosMLP(arch=TINY, out_indices=(0, 1, 2, 3), shift=True).eval()
    model.init_weights()
    x = torch.randn(1, 3, 75, 90)
    with torch.no_grad():
        a = model(x)
        b = model(x)  # served from the cache
        assert all(torch.equal(u, v) for u, v in zip(a, b))
        gate = model.stages[0].blocks[0].gate
        assert gate.mixing.__dict__.get('_matrix_cache')
        gate.mixing.centers.add_(0.5)  # in-place change bumps the version counter
        c = model(x)
    fresh = PosMLP(arch=TINY, out_indices=(0, 1, 2, 3), shift=True).eval()
    fresh.load_state_dict(model.state_dict())
    with torch.no_grad():
        d = fresh(x)
    assert not torch.allclose(a[0], c[0])
    assert all(torch.allclose(u, v, atol=1e-6) for u, v in zip(c, d))
    # load_state_dict into the cached model also invalidates
    model.load_state_dict(PosMLP(arch=TINY, out_indices=(0, 1, 2, 3), shift=True).state_dict())
    with torch.no_grad():
        e = model(x)
    assert not torch.allclose(e[0], c[0])


def test_bf16_autocast_is_close_to_fp32():
    torch.manual_seed(0)
    model = PosMLP(arch=TINY, out_indices=(3, )).eval()
    model.init_weights()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        ref = model(x)[0]
        with torch.autocast('cpu', dtype=torch.bfloat16):
            out = model(x)[0]
    assert torch.isfinite(out).all()
    assert (out.float() - ref).abs().max() / ref.abs().max() < 0.1
    # the positional matrices stay fp32 under autocast
    gate = model.stages[0].blocks[0].gate
    with torch.autocast('cpu', dtype=torch.bfloat16):
        base, _ = gate.mixing._compute(None)
    assert base.dtype == torch.float32


@pytest.mark.parametrize('arch,gflops', [
    ('tiny', 5.2),
    pytest.param('small', 8.7, marks=pytest.mark.slow),
    pytest.param('base', 18.6, marks=pytest.mark.slow),
])
def test_flops_match_table2(arch, gflops):
    """Table 2 FLOPs at 224^2 within 5%; counter: fvcore FlopCountAnalysis (1 MAC = 1 FLOP),
    whole classifier, including the parameter-only GQPE logits (einsum)."""
    from fvcore.nn import FlopCountAnalysis
    model = Classifier(PosMLP(arch=arch), 1000).eval()
    counter = FlopCountAnalysis(model, torch.randn(1, 3, 224, 224))
    counter.unsupported_ops_warnings(False)
    counter.uncalled_modules_warnings(False)
    measured = counter.total() / 1e9
    assert abs(measured - gflops) / gflops < 0.05, measured


@pytest.mark.parametrize('hw', [(50, 70), (56, 56)])
def test_traced_model_equals_eager_on_padded_and_unpadded_maps(hw):
    """``torch.jit.trace`` (TorchScript deployment, FLOP counters) records the pad / partition / crop form
    of the windows instead of the scatter and gather: a traced PosMLP gives the eager outputs, also where
    every stage pads its map (50x70: 13x18 tokens at stride 4 in 7x7 windows)."""
    torch.manual_seed(3)
    model = PosMLP(arch=TINY, out_indices=(0, 1, 2, 3), drop_path_rate=0.).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    x = torch.randn(1, 3, *hw, dtype=torch.float64)
    with torch.no_grad():
        eager = model(x)
        traced = torch.jit.trace(model, x, check_trace=False)(x)
    for a, b in zip(eager, traced):
        assert a.shape == b.shape and (a - b).abs().max() < 1e-12
