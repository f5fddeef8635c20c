"""Pretrained loading never drops a key silently: a checkpoint key with no place in the model is an error
(one sentence naming the keys, the closest model keys and the option that accepts them) unless the caller
lists it explicitly, and the keys left unused that way are logged by name."""
import pytest
import torch

import mmposmlp.models.checkpoints as ckpt_mod
from mmposmlp.models.backbones.cpvt import CPVT
from mmposmlp.models.checkpoints import CheckpointMismatchError, load_pretrained, load_state_dict_checked

SMALL = dict(embed_dims=16, num_layers=2, num_heads=2, feedforward_channels=32)


@pytest.fixture
def logged(monkeypatch):
    lines = []
    monkeypatch.setattr(ckpt_mod, 'print_log', lambda msg, *a, **k: lines.append(str(msg)))
    return lines


def _save(tmp_path, state, name='w.pth'):
    path = str(tmp_path / name)
    torch.save({'state_dict': state}, path)
    return path


def test_unexpected_key_is_an_error_naming_keys_closest_names_and_option(tmp_path):
    model = CPVT(SMALL, peg_positions=(0, ))
    state = {'backbone.' + k: v for k, v in model.state_dict().items()}
    state['backbone.pegs.0.proj.1.weight'] = torch.zeros(16)  # e.g. a norm of another PEG form
    path = _save(tmp_path, state)
    with pytest.raises(CheckpointMismatchError) as err:
        load_pretrained(CPVT(SMALL, peg_positions=(0, )), path, prefix='backbone.')
    msg = str(err.value)
    assert "'pegs.0.proj.1.weight' (closest: 'pegs.0.proj.0.weight')" in msg
    assert 'allowed_unexpected=' in msg and 'ignore_keys=' in msg and '--ignore-keys' in msg
    assert '\n' not in msg and msg.count('. ') == 0  # one sentence


def test_explicitly_allowed_keys_load_and_are_logged_by_name(tmp_path, logged):
    src = CPVT(SMALL, peg_positions=(0, ))
    state = dict(src.state_dict())
    state['head.fc.weight'] = torch.zeros(3, 16)
    state['head.fc.bias'] = torch.zeros(3)
    dst = CPVT(SMALL, peg_positions=(0, ))
    res = load_state_dict_checked(dst, state, allowed_unexpected=('head.*', ))
    assert sorted(res.unexpected_keys) == ['head.fc.bias', 'head.fc.weight']
    assert all(torch.equal(a, b) for a, b in zip(dst.state_dict().values(), src.state_dict().values()))
    assert any('head.fc.weight' in line and 'unused' in line for line in logged)
    # a pattern that does not match the extra key does not let it through
    with pytest.raises(CheckpointMismatchError, match='head.fc'):
        load_state_dict_checked(CPVT(SMALL, peg_positions=(0, )), state, allowed_unexpected=('neck.*', ))


def test_missing_and_unexpected_are_reported_together(tmp_path):
    model = CPVT(SMALL, peg_positions=(0, ))
    state = dict(model.state_dict())
    state['pegs.0.proj.0.weight_orig'] = state.pop('pegs.0.proj.0.weight')
    with pytest.raises(CheckpointMismatchError, match=r"lacks 1 of its weights.*'pegs.0.proj.0.weight_orig' "
                                                      r"\(closest: 'pegs.0.proj.0.weight'\)"):
        load_state_dict_checked(CPVT(SMALL, peg_positions=(0, )), state)


def test_init_cfg_ignore_keys_is_the_explicit_opt_in(tmp_path):
    """CPVT with PEGs at 0-1 loaded from a 0-5 checkpoint: the four extra PEGs are refused unless listed."""
    src = CPVT(SMALL, peg_positions=(0, 1))
    path = _save(tmp_path, {'backbone.' + k: v for k, v in src.state_dict().items()})
    strict = CPVT(SMALL, peg_positions=(0, ), init_cfg=dict(type='Pretrained', checkpoint=path, prefix='backbone.'))
    with pytest.raises(CheckpointMismatchError, match=r"'pegs.1.proj.0.weight'"):
        strict.init_weights()
    opted = CPVT(SMALL, peg_positions=(0, ),
                 init_cfg=dict(type='Pretrained', checkpoint=path, prefix='backbone.', ignore_keys=['pegs.1.*']))
    opted.init_weights()
    assert torch.equal(opted.pegs[0].proj[0].weight, src.pegs[0].proj[0].weight)


def test_upstream_non_strict_load_leaves_only_other_model_parts_unused(tmp_path):
    """mmseg/mmdet Swin's own init_weights ends in load_state_dict(sd, strict=False) on a whole-model
    checkpoint: its heads are left unused (logged), an unknown backbone-level key still raises."""
    from test_imlp_variants import TINY, _pretrain
    name = 'SegSwinTransformerIMLP'
    model = _pretrain(name, **TINY[name])
    state = dict(model.state_dict())
    state['decode_head.conv_seg.weight'] = torch.zeros(2, 2)
    res = model.load_state_dict(state, strict=False)
    assert res.unexpected_keys == ['decode_head.conv_seg.weight']
    state['stages.0.blocks.0.attn.w_msa.relative_position_bias'] = torch.zeros(3)
    with pytest.raises(CheckpointMismatchError, match='relative_position_bias'):
        model.load_state_dict(state, strict=False)
