"""Whole windowed backbones against an independent reference, in fp64.

The reference never pads, rolls or partitions: for every real token it finds the keys it may
mix with from the geometry alone (same window of the cyclically shifted, padded grid, same
Swin region, real tokens only), and mixes them with the unit's *unmasked* positional matrix,
renormalised over those keys where the unit uses a softmax (a masked softmax is exactly the
renormalised softmax) and simply restricted otherwise. Everything around the windows (stem,
downsampling, norms, FCs, output norms) is the model's own, so a difference can only come from
the window machinery: padding, shift direction, the shift rule for single-window axes, the
layout transitions between shifted and unshifted blocks inside a stage, masks and crops.
"""
import itertools
import math

import pytest
import torch

from mmposmlp.models.backbones import posmlp as posmlp_module
from mmposmlp.models.backbones import posmlp_video as video_module
from mmposmlp.models.backbones.posmlp import PosMLP
from mmposmlp.models.backbones.posmlp_video import IdentityGate, PosMLPVideo
from mmposmlp.models.layers.gating import GATE_TYPES


def _geometry(q, sizes, window, shift):
    """Window id, Swin region and in-window offset of position ``q`` of a map of ``sizes``
    (unpadded) cut into ``window`` s after a cyclic shift by ``shift`` (applied only along axes
    with more than one window, as Swin does)."""
    win, region, off = [], [], []
    for p, s, w, sh in zip(q, sizes, window, shift):
        padded = -(-s // w) * w
        sh = sh if padded > w else 0
        r = (p - sh) % padded  # position on the shifted grid
        win.append(r // w)
        off.append(r % w)
        region.append(0 if not sh else (0 if r < padded - w else (1 if r < padded - sh else 2)))
    return tuple(win), tuple(region), tuple(off)


def reference_gated_mlp(x, fc1, act, gate, fc2, window, shift):
    """``fc2(gate(act(fc1(x))))`` on a channels-last map ``x`` (B, *S, C) by explicit key sets."""
    h = act(fc1(x))
    u, v = h.chunk(2, dim=-1)
    if gate.norm is not None:
        u = gate.norm(u)
    B, *sizes, C = u.shape
    G = gate.groups
    P = gate.mixing.matrices(None)[0]  # (G, N, N): query m, key n, window-local row-major offsets
    softmax = gate.mixing.uses_softmax
    positions = list(itertools.product(*[range(s) for s in sizes]))
    geo = {q: _geometry(q, sizes, window, shift) for q in positions}
    strides = [math.prod(window[i + 1:]) for i in range(len(window))]
    flat = lambda off: sum(o * s for o, s in zip(off, strides))  # noqa: E731
    group = torch.arange(C) % G
    out = torch.empty_like(u)
    for q in positions:
        wq, rq, oq = geo[q]
        keys = [k for k in positions if geo[k][0] == wq and geo[k][1] == rq]
        m = flat(oq)
        n = torch.tensor([flat(geo[k][2]) for k in keys])
        weights = P[:, m, n]  # (G, K)
        if softmax:
            weights = weights / weights.sum(-1, keepdim=True)
        vals = torch.stack([u[(slice(None), ) + k] for k in keys], dim=1)  # (B, K, C)
        mixed = torch.einsum('ck,bkc->bc', weights[group], vals) + gate.token_bias[m]
        out[(slice(None), ) + q] = mixed
    return fc2(out * v)


def _randomise(model):
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith('spreads'):  # keep Sigma well conditioned
                p.copy_(torch.eye(p.shape[-1]).expand_as(p) + 0.3 * torch.randn_like(p))
            else:
                p.normal_(0, 0.3)


def _reference_posmlp_stage(stage, x):
    if stage.downsample is not None:
        x = stage.downsample(x)
    for block in stage.blocks:
        shift = stage.shift_size if block.shift else (0, 0)
        x = x + reference_gated_mlp(block.norm(x), block.fc1, block.act, block.gate, block.fc2, stage.window, shift)
    return x


# windows chosen so that stage 0 has several windows per axis with padding on both, and the
# last stages have a single window along one axis (where no shift may be applied) but not the other
POSMLP_CASES = [
    # (input HxW, windows per stage)
    ((58, 83), [(4, 3), (3, 4), (2, 3), (2, 2)]),
    ((45, 37), [(5, 2), (2, 3), (3, 2), (3, 2)]),
]


@pytest.mark.parametrize('gate_type', ['ggqpe', 'glrpe', 'lrpe-m', 'sgu'])
@pytest.mark.parametrize('hw,windows', POSMLP_CASES)
def test_shifted_posmlp_equals_reference(gate_type, hw, windows, monkeypatch):
    model = PosMLP(arch=dict(embed_dims=[8, 16, 16, 32], depths=[3, 2, 3, 2], groups=[2, 2, 4, 4],
                             mlp_ratios=[3, 2, 2, 2]),
                   window_sizes=windows, shift=True, gate_type=gate_type, out_indices=(0, 1, 2, 3),
                   drop_path_rate=0.).double().eval()
    _randomise(model)
    x = torch.randn(2, 3, *hw, dtype=torch.float64)
    with torch.no_grad():
        ours = model(x)
        monkeypatch.setattr(posmlp_module.PosMLPStage, 'forward', _reference_posmlp_stage)
        ref = model(x)
    for i, (a, b) in enumerate(zip(ours, ref)):
        expected = tuple(math.ceil(s / 2**(i + 2)) for s in hw)
        assert tuple(a.shape[2:]) == expected, f'stage {i}: crop gives {tuple(a.shape[2:])}, expected {expected}'
        assert (a - b).abs().max() < 1e-10, f'stage {i} differs by {(a - b).abs().max():.3g}'


def test_shift_schedule_follows_swin():
    """Swin (arXiv:2103.14030, Sec. 3.2), which PosMLP's shifted dense-prediction variant follows:
    blocks alternate regular and shifted windows starting with a regular one, and the shift is
    ``floor(w / 2)`` along each axis."""
    model = PosMLP(arch=dict(embed_dims=[8, 16, 16, 32], depths=[3, 2, 3, 2], groups=[2, 2, 4, 4],
                             mlp_ratios=[2, 2, 2, 2]), window_sizes=[(5, 4), (3, 3), (2, 7), (2, 2)], shift=True)
    for stage, window in zip(model.stages, [(5, 4), (3, 3), (2, 7), (2, 2)]):
        assert [b.shift for b in stage.blocks] == [j % 2 == 1 for j in range(len(stage.blocks))]
        assert tuple(stage.shift_size) == tuple(w // 2 for w in window)
    unshifted = PosMLP(arch=dict(embed_dims=[8, 16, 16, 32], depths=[3, 2, 3, 2], groups=[2, 2, 4, 4],
                                 mlp_ratios=[2, 2, 2, 2]), shift=[True, False, True, False])
    assert not any(b.shift for i in (1, 3) for b in unshifted.stages[i].blocks)


def test_reference_sees_a_wrong_shift_direction(monkeypatch):
    """The comparison above can fail: rolling the other way in the reference is detected."""
    model = PosMLP(arch=dict(embed_dims=[8, 16, 16, 32], depths=[2, 2, 2, 2], groups=[2, 2, 4, 4],
                             mlp_ratios=[2, 2, 2, 2]),
                   window_sizes=POSMLP_CASES[0][1], shift=True, out_indices=(0, ), drop_path_rate=0.).double().eval()
    _randomise(model)
    x = torch.randn(1, 3, *POSMLP_CASES[0][0], dtype=torch.float64)

    def wrong_way(stage, y):
        if stage.downsample is not None:
            y = stage.downsample(y)
        for block in stage.blocks:
            shift = tuple(-s for s in stage.shift_size) if block.shift else (0, 0)
            y = y + reference_gated_mlp(block.norm(y), block.fc1, block.act, block.gate, block.fc2,
                                        stage.window, shift)
        return y

    with torch.no_grad():
        ours = model(x)[0]
        monkeypatch.setattr(posmlp_module.PosMLPStage, 'forward', wrong_way)
        assert (model(x)[0] - ours).abs().max() > 1e-3


def _reference_gate_over(gate, x, axes, window, mlp=None):
    """Reference for posmlp_video._gate_over: the unit over axes 't', 'hw' or 'thw' of (B, T, H, W, C)."""
    fc1, act, fc2 = mlp if mlp is not None else (torch.nn.Identity(), torch.nn.Identity(), torch.nn.Identity())
    if isinstance(gate, IdentityGate):
        return fc2(gate(act(fc1(x))))
    B, T, H, W, C = x.shape
    if axes == 't':
        y = x.permute(0, 2, 3, 1, 4).reshape(B * H * W, T, C)
        win = tuple(window[:1])
    elif axes == 'hw':
        y = x.reshape(B * T, H, W, C)
        win = tuple(window[1:])
    else:
        y, win = x, tuple(window)
    z = reference_gated_mlp(y, fc1, act, gate, fc2, win, (0, ) * len(win))
    C2 = z.shape[-1]
    if axes == 't':
        return z.reshape(B, H, W, T, C2).permute(0, 3, 1, 2, 4)
    if axes == 'hw':
        return z.reshape(B, T, H, W, C2)
    return z


@pytest.mark.parametrize('block_type,version', [('PoTGU+PoSGU', 'v1'), ('PoTGU+PoSGU', 'v2'),
                                                ('PoSTGU', 'v1'), ('PoSGU->PoTGU', 'v1')])
def test_posmlp_video_equals_reference(block_type, version, monkeypatch):
    """Clips whose length and size are not window multiples: every axis padded and masked."""
    model = PosMLPVideo(arch=dict(embed_dims=[8, 16], depths=[2, 1], groups=[2, 2], mlp_ratio=2,
                                  window_sizes=[(3, 4, 3), (2, 2, 3)]),
                        block_type=block_type, parallel_version=version, out_indices=(0, 1), drop_path_rate=0.)
    model = model.double().eval()
    _randomise(model)
    x = torch.randn(1, 3, 5, 26, 22, dtype=torch.float64)
    with torch.no_grad():
        ours = model(x)
        monkeypatch.setattr(video_module, '_gate_over', _reference_gate_over)
        ref = model(x)
    for a, b in zip(ours, ref):
        assert (a - b).abs().max() < 1e-10


def _block_drop_rates(model):
    """Drop-path probability of every block, in forward order (0 where the block has none)."""
    rates = []
    for module in model.modules():
        dp = getattr(module, 'drop_path', None)
        if isinstance(dp, torch.nn.Module):
            rates.append(float(getattr(dp, 'drop_prob', 0.)))
    return rates


@pytest.mark.parametrize('build', [
    lambda rate: PosMLP(arch=dict(embed_dims=[8, 16, 16, 32], depths=[2, 1, 3, 2], groups=[2, 2, 4, 4],
                                  mlp_ratios=[2, 2, 2, 2], window_sizes=[2, 2, 2, 2]), drop_path_rate=rate),
    lambda rate: PosMLPVideo(arch=dict(embed_dims=[8, 16], depths=[2, 3], groups=[2, 2], mlp_ratio=2,
                                       window_sizes=[(2, 2, 2), (2, 2, 2)]), out_indices=(1, ),
                             drop_path_rate=rate),
    lambda rate: _registered('WaveMLP')(arch='t', drop_path_rate=rate),
    lambda rate: _registered('PVTPEG')(arch='t', drop_path_rate=rate),
    lambda rate: _registered('CPVT')(arch='ti', drop_path_rate=rate),
], ids=['posmlp', 'posmlp_video', 'wavemlp', 'pvt_peg', 'cpvt'])
def test_drop_path_rates_rise_linearly_over_all_blocks(build):
    """Stochastic depth (Huang et al. 2016, the DeiT/Swin/PoolFormer schedule every family's
    official code uses): block ``j`` of all ``n`` blocks drops with ``rate * j / (n - 1)``,
    0 at the first block and ``rate`` at the last."""
    rate = 0.4
    got = _block_drop_rates(build(rate))
    assert len(got) > 4
    expected = [rate * j / (len(got) - 1) for j in range(len(got))]
    assert got == pytest.approx(expected, abs=1e-6)


def _registered(name):
    from mmposmlp.registry import MODELS
    import mmposmlp.models  # noqa: F401  (registers the backbones)
    return MODELS.get(name)


_SMALL = {
    'posmlp': lambda **kw: PosMLP(arch=dict(embed_dims=[8, 16, 16, 32], depths=[1, 1, 1, 1], groups=[2, 2, 4, 4],
                                            mlp_ratios=[2, 2, 2, 2], window_sizes=[2, 2, 2, 2]), **kw),
    'posmlp_video': lambda **kw: PosMLPVideo(arch=dict(embed_dims=[8, 16, 16, 32], depths=[1, 1, 1, 1],
                                                       groups=[2, 2, 4, 4], mlp_ratio=2,
                                                       window_sizes=[(2, 2, 2)] * 4), **kw),
    'wavemlp': lambda **kw: _registered('WaveMLP')(arch=dict(depths=[1, 1, 1, 1], embed_dims=[8, 16, 24, 32],
                                                             mlp_ratios=[2, 2, 2, 2]), norm_cfg=dict(type='BN'), **kw),
}


@pytest.mark.parametrize('family', sorted(_SMALL))
def test_norm_eval_keeps_only_batchnorms_in_eval(family):
    """``norm_eval`` (mmdet/mmpretrain convention): in ``train()`` every BatchNorm stays in eval
    mode (frozen statistics), everything else trains; without it BatchNorms train."""
    from torch.nn.modules.batchnorm import _BatchNorm
    for norm_eval in (True, False):
        model = _SMALL[family](norm_eval=norm_eval, frozen_stages=-1).train()
        bns = [m for m in model.modules() if isinstance(m, _BatchNorm)]
        assert bns, 'the test needs a model with BatchNorm layers'
        assert all(m.training != norm_eval for m in bns)
        assert all(m.training for m in model.modules() if not isinstance(m, _BatchNorm))
        assert all(p.requires_grad for p in model.parameters())


@pytest.mark.parametrize('family', ['posmlp', 'posmlp_video'])
def test_negative_out_indices_count_from_the_end(family):
    a = _SMALL[family](out_indices=(-1, -3))
    b = _SMALL[family](out_indices=(3, 1))
    assert a.out_indices == b.out_indices == (3, 1)
    assert a.out_channels == b.out_channels == [32, 16]


@pytest.mark.parametrize('block_type,first,residual', [('PoTGU->PoSGU', 'temporal', 'each'),
                                                       ('PoSGU->PoTGU', 'spatial', 'each'),
                                                       ('PoTGU->PoSGU', 'temporal', 'outer')])
def test_cascaded_video_blocks_apply_their_units_in_order(block_type, first, residual):
    """Fig. 2 cascades: ``PoTGU->PoSGU`` runs the temporal module first, then the spatial one
    (and the reverse for ``PoSGU->PoTGU``), with a residual per module or one around both."""
    from mmposmlp.models.backbones.posmlp_video import PosMLPVideoBlock
    block = PosMLPVideoBlock(8, block_type, cascade_residual=residual, mlp_ratio=2, window=(2, 3, 3), groups=2,
                             norm_cfg=dict(type='LN'), act_cfg=dict(type='GELU')).double().eval()
    _randomise(block)
    second = 'spatial' if first == 'temporal' else 'temporal'
    f, s = getattr(block, first), getattr(block, second)
    x = torch.randn(1, 4, 5, 6, 8, dtype=torch.float64)
    with torch.no_grad():
        expected = x + s(f(x)) if residual == 'outer' else (lambda y: y + s(y))(x + f(x))
        assert (block(x) - expected).abs().max() < 1e-12
