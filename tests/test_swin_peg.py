"""Swin + PEG (CPVT Table 15 / B.5): mmpretrain's Swin with one PEG after the first block of each stage."""
import pytest
import torch

from mmposmlp.models.backbones.swin_peg import SwinPEG

ARCH = dict(embed_dims=16, depths=[2, 2, 2], num_heads=[1, 2, 2])
KW = dict(arch=ARCH, img_size=64, window_size=4, out_indices=(0, 1, 2))


def _rand(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            fan_in = p[0].numel() if p.dim() > 1 else 10
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) / fan_in ** 0.5)
    return model


def test_swin_peg_is_swin_plus_pegs_after_block_0():
    from mmpretrain.models.backbones import SwinTransformer
    ours = _rand(SwinPEG(**KW).double())
    ref = SwinTransformer(**KW).double()
    missing, unexpected = ref.load_state_dict(ours.state_dict(), strict=False)
    assert not missing and sorted(unexpected) == sorted(k for k in ours.state_dict() if k.startswith('pegs.'))
    ours.eval(), ref.eval()
    x = torch.randn(1, 3, 72, 56, dtype=torch.float64)  # not a multiple of the windows: Swin pads
    assert all((a - b).abs().max() > 1e-4 for a, b in zip(ours(x), ref(x)))
    with torch.no_grad():  # with zero PEG convs every PEG is the identity: exactly Swin
        for peg in ours.pegs.modules():
            if isinstance(peg, torch.nn.Conv2d):
                peg.weight.zero_(), peg.bias.zero_()
    for a, b in zip(ours(x), ref(x)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    # the PEG of stage i runs right after block 0 of stage i
    order = []
    for i, stage in enumerate(ours.stages):
        for j, blk in enumerate(stage.blocks):
            blk.register_forward_hook(lambda *a, i=i, j=j: order.append(f's{i}b{j}'))
        ours.pegs[i][0].register_forward_hook(lambda *a, i=i: order.append(f's{i}peg'))
    ours(x)
    assert order == ['s0b0', 's0peg', 's0b1', 's1b0', 's1peg', 's1b1', 's2b0', 's2peg', 's2b1']
    with pytest.raises(ValueError, match='out of range'):
        SwinPEG(**KW, peg_positions=(2, ))


def test_swin_t_peg_params_and_frozen_stages():
    from mmpretrain.models.backbones import SwinTransformer
    n = (lambda m: sum(p.numel() for p in m.parameters()))
    assert n(SwinPEG('tiny')) - n(SwinTransformer('tiny')) == 10 * (96 + 192 + 384 + 768)
    m = SwinPEG(**KW, frozen_stages=1)
    m.train()
    assert not any(p.requires_grad for p in m.pegs[0].parameters())
    assert all(p.requires_grad for p in m.pegs[1].parameters())
