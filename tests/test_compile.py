"""torch.compile of PosMLP: the blocks trace as one graph (fullgraph=True) and give the eager outputs.

The ``eager`` dynamo backend is used: it checks graph capture (what breaks graphs) without paying for
inductor code generation; speed of compiled vs eager lives in tools/analysis/benchmark.py.
"""
import pytest
import torch

from mmposmlp.models.backbones.posmlp import PosMLP, PosMLPBlock
from mmposmlp.models.layers import gating
from mmposmlp.models.layers.windows import make_layout, pad_to_multiple

NORM = dict(type='LN', eps=1e-6)
ACT = dict(type='GELU')


def _block(gate_type):
    torch.manual_seed(0)
    blk = PosMLPBlock(32, 4, (7, 7), 4, gate_type, norm_cfg=NORM, act_cfg=ACT)
    blk.gate.init_weights()
    with torch.no_grad():  # non-trivial positional parameters and token biases
        for p in blk.gate.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return blk


@pytest.mark.parametrize('gate_type', ['ggqpe', 'glrpe'])
@pytest.mark.parametrize('hw,shift', [((14, 14), (0, 0)), ((10, 12), (0, 0)), ((10, 12), (3, 3))],
                         ids=['unmasked', 'padded', 'padded+shifted'])
@pytest.mark.parametrize('train', [False, True], ids=['eval', 'train'])
def test_block_compiles_fullgraph(gate_type, hw, shift, train):
    blk = _block(gate_type).train(train)
    x = pad_to_multiple(torch.randn(2, *hw, 32), (7, 7))
    layout = make_layout(x, hw, (7, 7), shift)
    windows = layout.partition(x)
    torch._dynamo.reset()
    compiled = torch.compile(blk, fullgraph=True, backend='eager')  # raises on any graph break
    out = compiled(windows, layout)
    ref = blk(windows, layout)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-6)
    if train:  # the backward graph works too
        out.sum().backward()
        assert blk.fc1.weight.grad is not None


def test_compiled_block_sees_weight_updates():
    """The eval-mode positional-matrix cache must not be baked into the compiled graph."""
    blk = _block('ggqpe').eval()
    x = torch.randn(1, 14, 14, 32)
    layout = make_layout(x, (14, 14), (7, 7), (0, 0))
    windows = layout.partition(x)
    torch._dynamo.reset()
    compiled = torch.compile(blk, fullgraph=True, backend='eager')
    before = compiled(windows, layout).clone()
    with torch.no_grad():
        blk.gate.mixing.centers.add_(0.5)
    after = compiled(windows, layout)
    torch.testing.assert_close(after, blk(windows, layout), rtol=0, atol=1e-6)
    assert (after - before).abs().max() > 1e-4


@pytest.mark.parametrize('train,chunked', [(False, False), (False, True), (True, False)],
                         ids=['eval', 'eval-chunked', 'train'])
def test_backbone_compiles_fullgraph(train, chunked, monkeypatch):
    """The whole backbone, with padded and shifted windows, is one graph: the shape-only window
    layouts (mask patterns, shift transitions, masked windows per inference chunk) enter it as
    constants."""
    if chunked:  # one window per chunk: chunks hold masked and unmasked windows of every pattern
        monkeypatch.setattr(gating, 'CHUNK_BYTES', 1)
    torch.manual_seed(0)
    m = PosMLP(arch=dict(embed_dims=[16, 32, 64, 128], depths=[1, 2, 2, 1], groups=[2, 4, 8, 16]),
               out_indices=(0, 1, 2, 3), shift=True, drop_path_rate=0.).train(train)
    x = torch.randn(1, 3, 100, 112)
    torch._dynamo.reset()
    outs = torch.compile(m, fullgraph=True, backend='eager')(x)
    for a, b in zip(outs, m(x)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    if train:
        sum(o.sum() for o in outs).backward()
        assert all(p.grad is not None for p in m.parameters())


def test_compat_shims(monkeypatch):
    """``is_compiling`` is True only while dynamo traces; without ``assume_constant_result`` (old
    torch) the layout helpers stay plain functions."""
    from mmposmlp.utils import compat
    assert not compat.is_compiling()
    torch._dynamo.reset()
    out = torch.compile(lambda x: x + 1 if compat.is_compiling() else x - 1, fullgraph=True,
                        backend='eager')(torch.zeros(1))
    assert out.item() == 1
    marked = compat.assume_constant_result(lambda: 0)
    assert getattr(marked, '_dynamo_marked_constant', False)  # torch's marker
    monkeypatch.delattr(torch.compiler, 'assume_constant_result')
    plain = lambda: 0  # noqa: E731
    assert compat.assume_constant_result(plain) is plain
    assert not getattr(plain, '_dynamo_marked_constant', False)
