"""CPVT's two experiments reported in the text only (no table), as ``mmposmlp.CPVT`` options.

* Sec. 5.1: the PEG "only [added] when calculating Q and K in the attention layer" (71.3 top-1, paper):
  ``peg_target='qk'``, config ``cpvt-ti-peg-qk``.
* Sec. 5.3: "LE not only at the beginning but also in the next 5 layers" (72.7 top-1, paper):
  ``pos_embed_positions=(-1, 0, 1, 2, 3, 4)``, config ``deit-ti-le-0-5``.

Small models in float64; the hand-written forwards below use only the modules' weights.
"""
import os.path as osp

import pytest
import torch
import torch.nn.functional as F

from mmposmlp.models.backbones.cpvt import CPVT
from toolcfg import load_tool

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
TABLES = osp.join(ROOT, 'configs', 'cpvt', 'paper_tables')
SMALL = dict(embed_dims=32, num_layers=4, num_heads=2, feedforward_channels=64)


def _randomised(model, seed=0):
    """Random weights everywhere (norms, biases, cls token and tables included), float64, eval."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.3 * torch.randn_like(p))
    return model.double().eval()


def _copy_shared(dst, src):
    """Load ``src``'s weights into ``dst`` for every key they share; returns the keys only ``src`` has."""
    ours, theirs = dst.state_dict(), src.state_dict()
    missing = set(ours) - set(theirs)
    assert not missing, missing
    dst.load_state_dict({k: theirs[k] for k in ours})
    return sorted(set(theirs) - set(ours))


def _max_diff(a, b):
    return (a - b).abs().max().item()


def _attention_by_hand(attn, q_in, v_in):
    """ViT attention with q, k read from ``q_in`` and v from ``v_in`` (the qkv Linear's thirds)."""
    B, N, C = v_in.shape
    h = attn.num_heads
    w, b = attn.qkv.weight.chunk(3), attn.qkv.bias.chunk(3)

    def heads(t):
        return t.reshape(B, N, h, C // h).transpose(1, 2)

    q, k, v = heads(F.linear(q_in, w[0], b[0])), heads(F.linear(q_in, w[1], b[1])), heads(F.linear(v_in, w[2], b[2]))
    probs = (q @ k.transpose(-2, -1) * (C // h) ** -0.5).softmax(-1)
    return F.linear((probs @ v).transpose(1, 2).reshape(B, N, C), attn.proj.weight, attn.proj.bias)


def _block_by_hand(block, x, hw, qk_x=None):
    a = block.ln1(x)
    x = x + _attention_by_hand(block.attn, a if qk_x is None else block.ln1(qk_x), a)
    return x + block.ffn(block.ln2(x), hw)


def _tokens(model, img):
    """Patch tokens with the cls token prepended (and DeiT's table at -1 added when the model has one)."""
    x = model.patch_embed(img)
    hw = x.shape[2:]
    x = torch.cat([model.cls_token.expand(img.shape[0], -1, -1), x.flatten(2).transpose(1, 2)], dim=1)
    if hasattr(model, 'abs_pos_embed'):
        x = model.abs_pos_embed(x, hw)
    return x, hw


# ------------------------------------------------------------------------------------- PEG on Q/K only
def test_qk_peg_with_zero_conv_equals_deit_without_position_encoding():
    """With the PEG's conv zeroed, the Q/K variant is DeiT-tiny w/o PE (the same weights otherwise); with the
    PEG as trained (random here) it is not."""
    qk = _randomised(CPVT(SMALL, img_size=64, peg_positions=(1, ), peg_target='qk'))
    plain = CPVT(SMALL, img_size=64, peg_positions=()).double().eval()
    assert _copy_shared(plain, qk) == ['pegs.0.proj.0.bias', 'pegs.0.proj.0.weight']
    img = torch.randn(2, 3, 64, 80, dtype=torch.float64)
    with torch.no_grad():
        assert _max_diff(qk(img)[0], plain(img)[0]) > 1e-3  # the PEG reaches the output
        for p in qk.pegs.parameters():
            p.zero_()
        assert _max_diff(qk(img)[0], plain(img)[0]) < 1e-12  # q, k, v through the Linear's thirds, not fused


@pytest.mark.parametrize('position', [-1, 0, 2])
def test_qk_peg_feeds_only_the_next_blocks_query_and_key(position):
    """Every block by hand: the tokens never carry the PEG; block ``position + 1`` takes
    ``ln1(x + F(x))`` for q and k and ``ln1(x)`` for v; the cls token passes the PEG."""
    model = _randomised(CPVT(SMALL, img_size=64, peg_positions=(position, ), peg_target='qk',
                             out_type='raw', out_indices=(0, 1, 2, 3)))
    img = torch.randn(2, 3, 48, 64, dtype=torch.float64)
    with torch.no_grad():
        outs = model(img)
        x, hw = _tokens(model, img)
        for i, block in enumerate(model.layers):
            qk_x = model.pegs[0](x, hw, 1) if i == position + 1 else None
            x = _block_by_hand(block, x, hw, qk_x)
            ref = model.ln1(x) if i == len(model.layers) - 1 else x
            assert _max_diff(outs[i], ref) < 1e-12, i
        encoded = model.pegs[0](x, hw, 1)
        assert torch.equal(encoded[:, 0], x[:, 0]) and _max_diff(encoded[:, 1:], x[:, 1:]) > 1e-3


def _attention_probs_hook(model, block, fixed=None):
    """Record block ``block``'s attention probabilities (the input of its attention dropout) or replace them
    with ``fixed``."""
    seen = []

    def hook(module, args, output):
        seen.append(output)
        return fixed

    return seen, model.layers[block].attn.attn_drop.register_forward_hook(hook)


@pytest.mark.parametrize('target', ['qk', 'tokens'])
def test_perturbed_qk_peg_changes_the_attention_map_but_not_the_values(target):
    """Perturb the PEG: the attention map of the block it feeds changes. Hold that map fixed at the
    unperturbed one: with ``peg_target='qk'`` the output is then unchanged (the values and the residual stream
    never see the PEG); with the paper's PEG ('tokens') it changes (the control)."""
    model = _randomised(CPVT(SMALL, img_size=64, peg_positions=(0, ), peg_target=target))
    img = torch.randn(2, 3, 64, 64, dtype=torch.float64)
    with torch.no_grad():
        seen, handle = _attention_probs_hook(model, 1)
        ref = model(img)[0]
        handle.remove()
        probs = seen[0]
        for p in model.pegs.parameters():
            p.add_(0.5 * torch.randn_like(p))
        seen, handle = _attention_probs_hook(model, 1)
        moved = model(img)[0]
        handle.remove()
        assert _max_diff(seen[0], probs) > 1e-3  # the perturbed PEG reaches the attention map
        assert _max_diff(moved, ref) > 1e-3
        seen, handle = _attention_probs_hook(model, 1, fixed=probs)
        held = model(img)[0]
        handle.remove()
    if target == 'qk':
        assert _max_diff(held, ref) == 0
    else:
        assert _max_diff(held, ref) > 1e-3


def test_qk_peg_trains_through_checkpointing_like_without():
    """``with_cp``: the same loss and gradients (the PEG's included) as without checkpointing."""
    grads = []
    for with_cp in (False, True):
        model = _randomised(CPVT(SMALL, img_size=64, peg_positions=(0, 1), peg_target='qk', with_cp=with_cp))
        model.train()
        img = torch.randn(2, 3, 64, 64, dtype=torch.float64)
        loss = model(img)[0].square().sum()
        loss.backward()
        grads.append([loss.detach()] + [p.grad for p in model.parameters()])
        assert model.pegs[0].proj[0].weight.grad.abs().sum() > 0
    assert all(_max_diff(a, b) < 1e-10 for a, b in zip(*grads))


# --------------------------------------------------------------------------- LE in the first six places
def test_le_0_5_with_zero_extra_tables_equals_deit_le():
    """With the five extra tables zero, LE-0-5 is DeiT-tiny with LE (the same weights), also resized to an
    other grid; with them non-zero it is not."""
    le6 = _randomised(CPVT(SMALL, img_size=64, peg_positions=(), pos_embed_type='learnable',
                           pos_embed_positions=(-1, 0, 1, 2)))
    le = CPVT(SMALL, img_size=64, peg_positions=(), pos_embed_type='learnable').double().eval()
    assert _copy_shared(le, le6) == [f'block_pos_embeds.{i}.pos_embed' for i in range(3)]
    for size in ((64, 64), (96, 80)):
        img = torch.randn(2, 3, *size, dtype=torch.float64)
        with torch.no_grad():
            assert _max_diff(le6(img)[0], le(img)[0]) > 1e-3
    with torch.no_grad():
        for p in le6.block_pos_embeds.parameters():
            p.zero_()
    for size in ((64, 64), (96, 80)):
        img = torch.randn(2, 3, *size, dtype=torch.float64)
        with torch.no_grad():
            assert _max_diff(le6(img)[0], le(img)[0]) < 1e-12, size


@pytest.mark.parametrize('size', [(64, 64), (96, 80)])
def test_le_0_5_adds_each_table_after_its_block(size):
    """By hand: DeiT's table with the cls token, then table ``i`` (cls row included, resized like DeiT's at
    other grids) added to the output of block ``i``."""
    positions = (-1, 0, 2)
    model = _randomised(CPVT(SMALL, img_size=64, peg_positions=(), pos_embed_type='learnable',
                             pos_embed_positions=positions, out_type='raw', out_indices=(0, 1, 2, 3)))
    img = torch.randn(2, 3, *size, dtype=torch.float64)
    with torch.no_grad():
        outs = model(img)
        x, hw = _tokens(model, img)
        tables = dict(zip((0, 2), model.block_pos_embeds))
        for i, block in enumerate(model.layers):
            x = _block_by_hand(block, x, hw)
            if i in tables:
                x = x + tables[i].table(hw, x.dtype)
            ref = model.ln1(x) if i == len(model.layers) - 1 else x
            assert _max_diff(outs[i], ref) < 1e-12, (size, i)


def test_le_and_peg_at_one_position_add_the_table_first():
    """A table and a PEG after the same block: the PEG reads the tokens with the table added."""
    model = _randomised(CPVT(SMALL, img_size=64, peg_positions=(1, ), pos_embed_type='learnable',
                             pos_embed_positions=(-1, 1), out_type='raw', out_indices=(1, )))
    img = torch.randn(1, 3, 64, 64, dtype=torch.float64)
    with torch.no_grad():
        x, hw = _tokens(model, img)
        for block in model.layers[:2]:
            x = _block_by_hand(block, x, hw)
        ref = model.pegs[0](x + model.block_pos_embeds[0].table(hw, x.dtype), hw, 1)
        assert _max_diff(model(img)[0], ref) < 1e-12


def test_frozen_stages_freeze_the_tables_before_them():
    model = CPVT(SMALL, img_size=64, peg_positions=(), pos_embed_type='learnable', pos_embed_positions=(-1, 0, 1, 2),
                 frozen_stages=2)
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    assert {'abs_pos_embed.pos_embed', 'block_pos_embeds.0.pos_embed', 'block_pos_embeds.1.pos_embed'} <= frozen
    assert 'block_pos_embeds.2.pos_embed' not in frozen and 'layers.2.ln1.weight' not in frozen


# ------------------------------------------------------------------------------------------ refusals
@pytest.mark.parametrize('kwargs, words', [
    (dict(peg_positions=(0, 3), peg_target='qk'), ['no block follows position 3', 'use positions -1 .. 2']),
    (dict(peg_positions=(), peg_target='qk'), ["peg_target='qk' needs at least one PEG"]),
    (dict(peg_positions=(0, ), peg_target='q'), ["unknown peg_target 'q'", "('tokens', 'qk')"]),
    (dict(peg_positions=(0, ), peg_target='qk', conv_proj_blocks=(1, )),
     ['blocks [1]', 'convolutional projection', 'drop them from conv_proj_blocks']),
    (dict(peg_positions=(), pos_embed_positions=(-1, 0)), ['pos_embed_positions=(-1, 0) needs pos_embed_type']),
    (dict(peg_positions=(), pos_embed_type='learnable', pos_embed_positions=()),
     ['pos_embed_positions is empty', 'pos_embed_type=None']),
    (dict(peg_positions=(), pos_embed_type='learnable', pos_embed_positions=(-1, 4)),
     ['pos_embed_positions [4] out of range', '-1 (before block 0) .. 3']),
])
def test_refusals_are_one_sentence(kwargs, words):
    with pytest.raises(ValueError) as err:
        CPVT(SMALL, img_size=64, **kwargs)
    msg = str(err.value)
    assert '\n' not in msg and all(w in msg for w in words), msg


def test_qk_peg_with_a_convolutional_projection_elsewhere_is_allowed():
    """Only the block the PEG feeds may not also have a convolutional projection."""
    model = _randomised(CPVT(SMALL, img_size=64, peg_positions=(0, ), peg_target='qk', conv_proj_blocks=(2, )))
    assert model(torch.randn(1, 3, 64, 64, dtype=torch.float64))[0].shape == (1, 32)


# ------------------------------------------------------------------------------------------- configs
def _deit_tiny_without_position_table():
    """DeiT-tiny's parameters by hand (C = 192, 12 blocks, MLP 768, 16x16 patches, 1000 classes)."""
    C, L, M = 192, 12, 768
    patch_embed = 3 * 16 * 16 * C + C
    block = 2 * 2 * C + (C * 3 * C + 3 * C) + (C * C + C) + (C * M + M) + (M * C + C)
    return patch_embed + C + L * block + 2 * C + (C * 1000 + 1000)  # + cls token, final LN, head


@pytest.mark.parametrize('name, expected', [
    # CPVT-Ti 0-1: one depthwise 3x3 PEG with bias (9 C + C); the Q/K routing adds nothing
    ('cpvt-ti-peg-qk', _deit_tiny_without_position_table() + 10 * 192),
    # DeiT-tiny's 197 x 192 table and five more of the same shape (cls row included)
    ('deit-ti-le-0-5', _deit_tiny_without_position_table() + 6 * 197 * 192),
])
def test_configs_build_with_hand_counted_params_and_no_decay_on_position_encodings(name, expected):
    from mmengine.config import Config
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import DefaultScope

    from mmposmlp.testing import build_model_from_cfg
    assert _deit_tiny_without_position_table() == 5_679_592  # the count the README and Table 16 use
    cfg = Config.fromfile(osp.join(TABLES, f'{name}_8xb128_in1k.py'))
    model, _ = build_model_from_cfg(cfg)
    assert sum(p.numel() for p in model.parameters()) == expected
    bb = model.backbone
    if name == 'cpvt-ti-peg-qk':
        assert (bb.peg_target, bb.peg_positions, bb.pos_embed_type) == ('qk', [0], None)
        positional = [n for n, _ in model.named_parameters() if '.pegs.' in n]
    else:
        assert (bb.pos_embed_positions, bb.peg_positions) == ([-1, 0, 1, 2, 3, 4], [])
        assert len(bb.block_pos_embeds) == 5
        assert all(t.pos_embed.shape == (1, 197, 192) for t in bb.block_pos_embeds)
        positional = [n for n, _ in model.named_parameters() if 'pos_embed' in n]
        assert len(positional) == 6
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    decay = {id(p): g['weight_decay'] for g in wrapper.optimizer.param_groups for p in g['params']}
    params = dict(model.named_parameters())
    assert positional and all(decay[id(params[n])] == 0 for n in positional)
    assert decay[id(params['backbone.layers.0.attn.qkv.weight'])] == 0.05


# ----------------------------------------------------------------------------------------------- ONNX
@pytest.mark.slow  # 7-10 s per export on 2 cores, like tests/test_onnx_export.py's exports
@pytest.mark.parametrize('name, size, other', [
    ('cpvt-ti-peg-qk', (64, 80), (140, 124)),
    ('deit-ti-le-0-5', (224, 224), (64, 80)),  # exported at the tables' own grid, run at another
    ('deit-ti-sincos', (224, 224), (64, 80)),  # the fixed 2-D sin-cos table computed in the graph per size
])
def test_small_variants_export_to_onnx_with_dynamic_sizes(name, size, other, tmp_path, capsys):
    """tools/deployment/pytorch2onnx.py on the shipped config made small (random weights, non-trivial norms and
    tables): onnxruntime agrees with PyTorch at the export size and at another one, so the learnable tables'
    resizing is in the graph, not fixed at the example's grid."""
    pytest.importorskip('onnxruntime')
    pytest.importorskip('onnxscript')

    from mmengine.registry import MODELS

    from mmposmlp.engine.entry import load_config
    cfg_path = tmp_path / f'{name}.py'
    cfg_path.write_text(f"_base_ = '{osp.join(TABLES, name + '_8xb128_in1k.py')}'\n"
                        "model = dict(backbone=dict(arch=dict(_delete_=True, embed_dims=64, num_layers=6, num_heads=2, "
                        "feedforward_channels=128)), head=dict(in_channels=64, num_classes=10))\n")
    cfg, _ = load_config(str(cfg_path))
    model = _randomised(MODELS.build(cfg.model)).float()
    ckpt = tmp_path / f'{name}.pth'
    torch.save({'state_dict': model.state_dict()}, ckpt)
    tool = load_tool('tools/deployment/pytorch2onnx.py')
    tool.main([str(cfg_path), str(ckpt), '--shape', *map(str, size), '--dynamic', '--check-shape', *map(str, other),
               '--out', str(tmp_path / 'm.onnx')])
    checks = [line for line in capsys.readouterr().out.splitlines() if line.startswith('onnxruntime vs PyTorch')]
    assert len(checks) == 2 and all(line.endswith('OK') for line in checks), checks
    assert 'x'.join(map(str, other)) in checks[1]
