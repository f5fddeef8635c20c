"""The position-encoding baselines of CPVT Tables 1, 3, 5, 7, 8 and 11, and their configs.

DeiT (learnable absolute encoding, cls-token or GAP head) is checked against mmpretrain's
``VisionTransformer`` in fp64, the sine-cosine table against mmpretrain's builder, the relative position
encoding against a loop over query/key pairs written from Shaw et al. Eq. (3)-(4).
"""
import os.path as osp

import pytest
import torch

from mmposmlp.models.backbones.cpvt import CPVT
from mmposmlp.models.checkpoints import CheckpointMismatchError
from mmposmlp.models.layers.peg import PEG
from mmposmlp.models.layers.position_encoding import (AbsolutePositionEmbedding, RelativePositionEncoding2d,
                                                      relative_offset_index, sincos_position_embedding_2d)

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
SMALL = dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64)


def _rand(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            fan_in = p[0].numel() if p.dim() > 1 else 10
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) / fan_in ** 0.5)
    return model


def _ours_to_mmpretrain(state):
    out = {}
    for k, v in state.items():
        k = k.replace('abs_pos_embed.pos_embed', 'pos_embed').replace('patch_embed.', 'patch_embed.projection.')
        k = k.replace('ffn.fc1.', 'ffn.layers.0.0.').replace('ffn.fc2.', 'ffn.layers.1.')
        out[k] = v
    return out


@pytest.mark.parametrize('gap', [False, True], ids=['cls_token', 'gap'])
def test_deit_baseline_equals_mmpretrain_vit(gap):
    """Tables 1/3/7: CPVT with no PEG and a learnable table is DeiT; at another size the table is resized
    bicubically exactly as mmpretrain does (Tables 1/2's evaluation at 384 without fine-tuning)."""
    from mmpretrain.models import VisionTransformer
    head = dict(with_cls_token=False, out_type='avg_featmap', final_norm=False) if gap else {}
    ours = CPVT(SMALL, img_size=64, peg_positions=(), pos_embed_type='learnable', **head).double().eval()
    ref = VisionTransformer(SMALL, img_size=64, **head).double()
    ref.eval()
    _rand(ours)
    missing, unexpected = ref.load_state_dict(_ours_to_mmpretrain(ours.state_dict()), strict=False)
    assert not unexpected and missing == [], (missing, unexpected)
    for size in ((64, 64), (96, 80)):
        x = torch.randn(2, 3, *size, dtype=torch.float64)
        torch.testing.assert_close(ours(x)[0], ref(x)[0], rtol=0, atol=1e-12)
    # and the table matters: without it the output changes
    with torch.no_grad():
        ours.abs_pos_embed.pos_embed.zero_()
    assert (ours(x)[0] - ref(x)[0]).abs().max() > 1e-3


def test_sincos_table_layout():
    """Equal to mmpretrain's (MoCo v3) 2-D sin-cos table on square grids; rows encode the row index on
    non-square grids; the cls token gets zeros; the table is recomputed for any grid."""
    from mmpretrain.models.utils import build_2d_sincos_position_embedding
    ours = sincos_position_embedding_2d((14, 14), 192)
    ref = build_2d_sincos_position_embedding(14, 192)
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-6)
    t = sincos_position_embedding_2d((3, 5), 8)
    omega0 = 1.0
    assert torch.allclose(t[0, 2 * 5 + 4, 0], torch.tensor(2 * omega0).sin())  # row 2, quarter 0 = sin(row)
    assert torch.allclose(t[0, 2 * 5 + 4, 4], torch.tensor(4 * omega0).sin())  # column 4, quarter 2
    pe = AbsolutePositionEmbedding(8, (3, 5), 'sincos', num_extra_tokens=1)
    assert not list(pe.parameters())
    x = torch.zeros(1, 1 + 6 * 7, 8)
    out = pe(x, (6, 7))
    assert out[0, 0].abs().max() == 0 and torch.allclose(out[:, 1:], sincos_position_embedding_2d((6, 7), 8))
    with pytest.raises(ValueError, match='divisible by 4'):
        AbsolutePositionEmbedding(6, (3, 5), 'sincos')
    with pytest.raises(ValueError, match='choose one of'):
        AbsolutePositionEmbedding(8, (3, 5), 'rope')


def _shaw_reference(attn_mod, rpe, x, hw, extra):
    """Loop over (i, j): e_ij = q_i.(k_j + a^K_ij) * scale (+ bias), z_i = sum_j alpha_ij (v_j + a^V_ij)."""
    B, N, C = x.shape
    h, d = attn_mod.num_heads, C // attn_mod.num_heads
    qkv = attn_mod.qkv(x).reshape(B, N, 3, h, d)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # (B, N, h, d)
    H, W = hw
    K = rpe.max_distance

    def entry(table, i, j):
        if i < extra or j < extra:
            return torch.zeros(table.shape[1], dtype=table.dtype)
        ri, ci = divmod(i - extra, W)
        rj, cj = divmod(j - extra, W)
        dr, dc = max(-K, min(K, rj - ri)), max(-K, min(K, cj - ci))
        return table[(dr + K) * (2 * K + 1) + dc + K]

    out = torch.zeros(B, N, h, d, dtype=x.dtype)
    for b in range(B):
        for hh in range(h):
            logits = torch.zeros(N, N, dtype=x.dtype)
            for i in range(N):
                for j in range(N):
                    if rpe.mode == 'bias':
                        logits[i, j] = q[b, i, hh] @ k[b, j, hh] * attn_mod.scale + entry(rpe.bias_table, i, j)[hh]
                    else:
                        logits[i, j] = q[b, i, hh] @ (k[b, j, hh] + entry(rpe.key_table, i, j)) * attn_mod.scale
            alpha = logits.softmax(-1)
            for i in range(N):
                for j in range(N):
                    val = v[b, j, hh]
                    if rpe.mode == 'key_value':
                        val = val + entry(rpe.value_table, i, j)
                    out[b, i, hh] += alpha[i, j] * val
    return attn_mod.proj(out.reshape(B, N, C))


@pytest.mark.parametrize('mode', ['key', 'key_value', 'bias'])
def test_relative_position_encoding_matches_shaw_loop(mode):
    """Tables 1/7/8: 2-D RPE with offsets clipped to K per axis (K=1 here so that clipping happens on a
    3x4 grid), a cls token with no relative entry; checked against a per-pair loop in fp64."""
    from mmposmlp.models.backbones.cpvt import MultiheadSelfAttention
    torch.manual_seed(0)
    attn = MultiheadSelfAttention(8, 2).double().eval()
    rpe = RelativePositionEncoding2d(4, 2, max_distance=1, mode=mode).double()
    _rand(rpe, seed=1)
    hw, extra = (3, 4), 1
    x = torch.randn(2, extra + 12, 8, dtype=torch.float64)
    with torch.no_grad():
        ours = attn(x, rpe, hw, extra)
        ref = _shaw_reference(attn, rpe, x, hw, extra)
        plain = attn(x)
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-12)
    assert (ours - plain).abs().max() > 1e-3
    idx = relative_offset_index(hw, 1, extra)
    assert idx.shape == (13, 13) and idx[0].eq(9).all() and idx[:, 0].eq(9).all()
    with pytest.raises(ValueError, match='choose one of'):
        RelativePositionEncoding2d(4, 2, mode='rotary')


def test_table8_positional_params_and_sharing():
    """Table 8: LE+RPE has 40,011 positional parameters = LE 197x192 + one 27x27x3 bias table (K=13,
    shared by the blocks); PEG at position 0 has 1,920 (3x3 depthwise + bias)."""
    def n(m):
        return sum(p.numel() for p in m.parameters())
    none = CPVT('tiny', peg_positions=())
    le_rpe = CPVT('tiny', peg_positions=(), pos_embed_type='learnable',
                  rpe_cfg=dict(mode='bias', max_distance=13, shared=True))
    peg0 = CPVT('tiny', peg_positions=(0, ))
    assert n(le_rpe) - n(none) == 40_011
    assert n(peg0) - n(none) == 1_920
    assert all(layer.rpe is None for layer in le_rpe.layers) and le_rpe.rpe.bias_table.shape == (729, 3)
    per_block = CPVT('tiny', peg_positions=(), rpe_cfg=dict(mode='key_value', max_distance=8))
    assert n(per_block) - n(none) == 12 * 2 * 17 * 17 * 64
    # any input size (Table 8 evaluates at 160-512): offsets beyond K share the clipped entries
    out = le_rpe.eval()(torch.randn(1, 3, 160, 192))[0]
    assert out.shape == (1, 192) and torch.isfinite(out).all()


def test_peg_without_zero_padding():
    """Table 11: 'none' = valid convs, encoding added to the centre tokens only; 'circular' keeps the size
    without zeros and makes the PEG exactly translation-equivariant on the torus, which zero padding is not."""
    torch.manual_seed(0)
    x = torch.randn(1, 4, 6, 7)
    valid = PEG(4, padding_mode='none')
    out = valid(x)
    enc = torch.nn.functional.conv2d(x, valid.proj[0].weight, valid.proj[0].bias, groups=4)
    torch.testing.assert_close(out[..., 1:-1, 1:-1], x[..., 1:-1, 1:-1] + enc)
    border = torch.ones(6, 7, dtype=torch.bool)
    border[1:-1, 1:-1] = False
    assert torch.equal(out[..., border], x[..., border])
    two = PEG(4, padding_mode='none', num_layers=2)
    assert torch.equal(two(x)[..., :2, :], x[..., :2, :])
    with pytest.raises(ValueError, match='larger than'):
        PEG(4, padding_mode='none', kernel_size=7)(x)
    circ, zeros = PEG(4, padding_mode='circular'), PEG(4)
    zeros.load_state_dict(circ.state_dict())
    shift = (2, 3)
    roll = (lambda t: torch.roll(t, shift, dims=(-2, -1)))
    torch.testing.assert_close(circ(roll(x)), roll(circ(x)))
    assert (zeros(roll(x)) - roll(zeros(x))).abs().max() > 1e-3
    tokens = x.flatten(2).transpose(1, 2)
    torch.testing.assert_close(valid(tokens, (6, 7)), out.flatten(2).transpose(1, 2))
    with pytest.raises(ValueError, match='padding_mode'):
        PEG(4, padding_mode='mirror')


def test_fixed_peg_does_not_train_and_loads_a_learned_one(tmp_path):
    """Table 5: a fixed PEG keeps its weights through AdamW steps with weight decay (random init); the
    learned-init row loads a trained PEG strictly from a classifier checkpoint."""
    torch.manual_seed(0)
    model = CPVT(SMALL, peg_positions=(0, ), peg_cfg=dict(frozen=True))
    model.init_weights()
    before = {k: v.clone() for k, v in model.pegs.state_dict().items()}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.05)
    for _ in range(2):
        opt.zero_grad()
        model(torch.randn(2, 3, 48, 48))[0].sum().backward()
        opt.step()
    assert all(torch.equal(before[k], v) for k, v in model.pegs.state_dict().items())
    assert not any(p.requires_grad for p in model.pegs.parameters())
    assert model.layers[0].attn.qkv.weight.requires_grad

    learned = {'backbone.pegs.0.proj.0.weight': torch.randn(32, 1, 3, 3),
               'backbone.pegs.0.proj.0.bias': torch.randn(32), 'backbone.cls_token': torch.zeros(1, 1, 32)}
    path = str(tmp_path / 'peg.pth')
    torch.save({'state_dict': learned}, path)
    init = dict(type='Pretrained', checkpoint=path, prefix='backbone.pegs.0.')
    fixed = CPVT(SMALL, peg_positions=(0, ), peg_cfg=dict(frozen=True, init_cfg=init))
    fixed.init_weights()
    assert torch.equal(fixed.pegs[0].proj[0].weight, learned['backbone.pegs.0.proj.0.weight'])
    assert torch.equal(fixed.pegs[0].proj[0].bias, learned['backbone.pegs.0.proj.0.bias'])
    del learned['backbone.pegs.0.proj.0.bias']
    torch.save({'state_dict': learned}, path)
    with pytest.raises(CheckpointMismatchError, match='proj.0.bias'):
        CPVT(SMALL, peg_positions=(0, ), peg_cfg=dict(frozen=True, init_cfg=init)).init_weights()


# config -> exact params we build (whole classifier, 1000 classes) and the paper's figure
NEW_ROWS = {
    'deit-ti-le': (5_717_416, '6M (T2)'),
    'deit-ti-sincos': (5_679_592, '6M (T2)'),
    'deit-ti-rpe': (6_123_496, None),
    'deit-ti-le-rpe': (5_719_603, '40,011 positional (T8)'),
    'deit-ti-gap': (5_717_032, '6M (T3)'),
    'deit-s-le': (22_050_664, '22M (T3, T15)'),
    'deit-s-gap': (22_049_896, '22M (T3)'),
    'deit-b-le': (86_567_656, '86M (T2)'),  # = mmpretrain's VisionTransformer 'deit-base' + head
    'cpvt-ti-peg0-1-fixed-random': (5_681_512, '5.68M (T5)'),
    'cpvt-ti-peg0-1-fixed-learned': (5_681_512, '5.68M (T5)'),
    'cpvt-ti-peg0-1-1x1-x12': (6_124_264, '6.13M (T5)'),
    'cpvt-ti-peg0-1-le': (5_719_336, None),
    'cpvt-ti-peg0-1-x4-le': (5_725_096, None),
    'cpvt-ti-peg0-1-nopad': (5_681_512, None),
    'cpvt-s-peg0-1-nopad': (21_978_856, None),  # = cpvt-s-peg0-1: padding holds no parameter
}


@pytest.mark.parametrize('name', sorted(NEW_ROWS))
def test_new_row_configs_build_with_expected_params(name):
    from mmengine.config import Config

    from mmposmlp.testing import build_model_from_cfg
    cfg = Config.fromfile(osp.join(ROOT, 'configs', 'cpvt', 'paper_tables', f'{name}_8xb128_in1k.py'))
    bb = cfg.model.backbone
    if 'peg_cfg' in bb and 'init_cfg' in bb.peg_cfg:
        bb.peg_cfg.pop('init_cfg')  # the learned PEG checkpoint is produced by training; checked above
    model, _ = build_model_from_cfg(cfg)
    assert sum(p.numel() for p in model.parameters()) == NEW_ROWS[name][0]
    keys = cfg.optim_wrapper.paramwise_cfg.custom_keys
    if bb.get('pos_embed_type') == 'learnable':
        assert keys['.abs_pos_embed.'] == dict(decay_mult=0.0)
    if bb.get('rpe_cfg'):
        assert keys['.rpe.'] == dict(decay_mult=0.0)
