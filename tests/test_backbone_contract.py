"""The backbone contract (mmposmlp/models/backbones/base.py), kept by every registered backbone.

For each: ``out_indices`` out of range, repeated or empty refused in one sentence naming the valid range;
negative ones counted from the end as Python does; an unordered ``out_indices`` returns its outputs in the
order given (or, for the adapters of upstream backbones whose ``forward`` returns stages in order, is
refused); ``out_channels`` and ``feature_info`` equal to the outputs ``forward`` returns (count, order,
channels, stride); ``frozen_stages`` range-checked; ``size_divisibility`` and ``fixed_input_size`` are what
``forward`` takes (odd multiples run; for a stated multiple above 1, one pixel more is refused).
"""
import importlib.util

import pytest
import torch

import mmposmlp.models  # noqa: F401  (registers every model)
from mmposmlp.models.backbones.base import checked_frozen_stages, checked_out_indices
from mmposmlp.registry import MODELS

SWIN = dict(embed_dims=8, depths=[1, 1, 1, 1], num_heads=[1, 1, 2, 2])
DENSE_SWIN = dict(embed_dims=8, depths=(1, 1, 1, 1), num_heads=(1, 1, 2, 2), window_size=2, pretrain_img_size=64)

# name -> kwargs of a small model, its input, the number of output positions, the largest frozen_stages,
# 'keep' (outputs in the order given) or 'increasing' (unordered out_indices refused), the library it needs
SPECS = {
    'PosMLP': dict(kw=dict(arch=dict(embed_dims=[8, 16, 32, 64], depths=[1, 1, 1, 1], groups=[2, 2, 4, 4],
                                     mlp_ratios=[2, 2, 2, 2], window_sizes=[4, 4, 2, 2])),
                   x=(1, 3, 64, 64), n=4, frozen_max=4),
    'PosMLPVideo': dict(kw=dict(arch=dict(embed_dims=[8, 16, 16, 32], depths=[1, 1, 1, 1], mlp_ratio=2,
                                          groups=[2, 2, 4, 4], window_sizes=[(2, 4, 4)] * 2 + [(2, 2, 2)] * 2),
                                downsamples=[True, False, True]),
                        x=(1, 3, 2, 64, 64), n=4, frozen_max=4),
    'WaveMLP': dict(kw=dict(arch=dict(depths=[1, 1, 1, 1], embed_dims=[8, 16, 24, 32], mlp_ratios=[2, 2, 2, 2])),
                    x=(1, 3, 64, 64), n=4, frozen_max=4),
    'PVTPEG': dict(kw=dict(arch=dict(depths=[1, 1, 1, 1], embed_dims=[8, 16, 24, 32], num_heads=[1, 2, 3, 4],
                                     mlp_ratios=[2, 2, 2, 2], sr_ratios=[8, 4, 2, 1])),
                   x=(1, 3, 64, 64), n=4, frozen_max=4),
    'CPVT': dict(kw=dict(arch=dict(embed_dims=16, num_layers=3, num_heads=2, feedforward_channels=32),
                         peg_positions=(0, ), out_type='featmap', patch_size=8),
                 x=(1, 3, 32, 32), n=3, frozen_max=3),
    'LVT': dict(kw=dict(arch=dict(depths=[1, 1, 1, 1], embed_dims=[8, 16, 24, 32], num_heads=[1, 2, 2, 4],
                                  mlp_ratios=[2, 2, 2, 2], depthwise_mlp=[False, True, True, True],
                                  sr_ratios=[8, 4, 2, 1], sa_layers=['csa', 'rasa', 'rasa', 'rasa'])),
                x=(1, 3, 64, 64), n=4, frozen_max=4),
    'GMLP': dict(kw=dict(arch=dict(num_layers=3, embed_dims=16, feedforward_channels=32), img_size=32,
                         patch_size=8),
                 x=(1, 3, 32, 32), n=3, frozen_max=3),
    'SwinPEG': dict(kw=dict(arch=SWIN, window_size=2, img_size=64), x=(1, 3, 64, 64), n=4, frozen_max=3,
                    requires='mmpretrain'),
    'SwinTransformerIMLP': dict(kw=dict(arch=SWIN, window_size=2, img_size=64), x=(1, 3, 64, 64), n=4, frozen_max=3,
                                order='increasing', requires='mmpretrain'),
    'VisionTransformerIMLP': dict(kw=dict(arch=dict(embed_dims=16, num_layers=3, num_heads=2, feedforward_channels=32),
                                          img_size=32, patch_size=8, out_type='featmap'),
                                  x=(1, 3, 32, 32), n=3, frozen_max=3, order='increasing', requires='mmpretrain'),
    'PoolFormerIMLP': dict(kw=dict(arch=dict(layers=[1, 1, 1, 1], embed_dims=[8, 16, 24, 32],
                                             mlp_ratios=[2, 2, 2, 2], layer_scale_init_value=1e-5)),
                           x=(1, 3, 64, 64), n=7, frozen_max=7, order='increasing', requires='mmpretrain'),
    'DetSwinTransformerIMLP': dict(kw=DENSE_SWIN, x=(1, 3, 64, 64), n=4, frozen_max=4, order='increasing',
                                   requires='mmdet'),
    'SegSwinTransformerIMLP': dict(kw=DENSE_SWIN, x=(1, 3, 64, 64), n=4, frozen_max=4, order='increasing',
                                   requires='mmseg'),
}
WRAPPERS = {'SingleTensorBackbone'}
NOT_BACKBONES = {'PVTMlp'}  # an FFN registered for ffn_cfg


def _registered_backbones():
    return {name for name, obj in MODELS.module_dict.items()
            if (getattr(obj, '__module__', '') or '').startswith('mmposmlp.models.backbones')} - NOT_BACKBONES


def _build(name, **kwargs):
    spec = SPECS[name]
    if spec.get('requires') and importlib.util.find_spec(spec['requires']) is None:
        pytest.skip(f'{name} needs {spec["requires"]}')
    torch.manual_seed(0)
    model = MODELS.build(dict(type=f'mmposmlp.{name}', **spec['kw'], **kwargs))
    model.eval()  # (mmdet's and mmseg's Swin return None from train())
    return model


def _outputs(model, name):
    torch.manual_seed(1)
    with torch.no_grad():
        out = model(torch.randn(*SPECS[name]['x']))
    return (out, ) if isinstance(out, torch.Tensor) else tuple(out)


def _one_sentence(err):
    msg = str(err.value)
    assert msg.count('. ') == 0 and '\n' not in msg, msg
    return msg


def test_every_registered_backbone_has_a_spec():
    assert _registered_backbones() == set(SPECS) | WRAPPERS


@pytest.mark.parametrize('name', sorted(SPECS))
def test_outputs_equal_out_channels_and_feature_info(name):
    spec = SPECS[name]
    indices = tuple(range(spec['n']))
    if spec.get('order', 'keep') == 'keep':
        indices = indices[::-1]  # the order given is the order returned
    model = _build(name, out_indices=indices)
    outs = _outputs(model, name)
    assert tuple(model.out_indices) == indices
    assert len(outs) == len(model.out_channels) == len(model.feature_info) == len(indices)
    H = spec['x'][-1]
    for out, channels, info, i in zip(outs, model.out_channels, model.feature_info, indices):
        assert out.shape[1] == channels == info['num_chs'], (name, i)
        assert out.shape[-1] == H // info['reduction'], (name, i, tuple(out.shape), info)
        assert info['module'].endswith(f'.{i}'), info


@pytest.mark.parametrize('name', sorted(n for n in SPECS if SPECS[n].get('order', 'keep') == 'keep'))
def test_unordered_out_indices_return_outputs_in_the_order_given(name):
    first, last = 0, SPECS[name]['n'] - 1
    ordered = _build(name, out_indices=(first, last))
    swapped = _build(name, out_indices=(last, first))
    swapped.load_state_dict(ordered.state_dict())
    a, b = _outputs(ordered, name), _outputs(swapped, name)
    assert swapped.out_channels == ordered.out_channels[::-1]
    assert swapped.feature_info == ordered.feature_info[::-1]
    torch.testing.assert_close(a[0], b[1], rtol=0, atol=0)
    torch.testing.assert_close(a[1], b[0], rtol=0, atol=0)


@pytest.mark.parametrize('name', sorted(n for n in SPECS if SPECS[n].get('order') == 'increasing'))
def test_unordered_out_indices_are_refused_where_upstream_orders_them(name):
    with pytest.raises(ValueError) as err:
        _build(name, out_indices=(SPECS[name]['n'] - 1, 0))
    assert 'must be increasing' in _one_sentence(err)


@pytest.mark.parametrize('name', sorted(SPECS))
def test_negative_out_indices_count_from_the_end(name):
    n = SPECS[name]['n']
    model = _build(name, out_indices=(0, -1))
    assert tuple(model.out_indices) == (0, n - 1)
    assert len(_outputs(model, name)) == 2


@pytest.mark.parametrize('name', sorted(SPECS))
@pytest.mark.parametrize('where', ['past_end', 'before_start'])
def test_out_of_range_out_indices_are_refused(name, where):
    n = SPECS[name]['n']
    with pytest.raises(ValueError) as err:
        _build(name, out_indices=(n, ) if where == 'past_end' else (-n - 1, ))
    assert f'out_indices must be in [{-n}, {n})' in _one_sentence(err)


@pytest.mark.parametrize('name', sorted(SPECS))
def test_repeated_out_indices_are_refused(name):
    n = SPECS[name]['n']
    for repeated in ((1, 1), (n - 1, -1)):
        with pytest.raises(ValueError) as err:
            _build(name, out_indices=repeated)
        assert 'twice' in _one_sentence(err), repeated


@pytest.mark.parametrize('name', sorted(SPECS))
def test_frozen_stages_out_of_range_are_refused(name):
    top = SPECS[name]['frozen_max']
    _build(name, frozen_stages=top).train()  # the largest is accepted (and applied)
    for bad in (top + 1, -2):
        with pytest.raises(ValueError) as err:
            _build(name, frozen_stages=bad)
        assert f'frozen_stages must be in [-1, {top}]' in _one_sentence(err)


def test_single_tensor_backbone_describes_its_tensor():
    inner = dict(type='mmposmlp.PosMLP', **SPECS['PosMLP']['kw'], out_indices=(3, 1))
    model = MODELS.build(dict(type='mmposmlp.SingleTensorBackbone', backbone=inner)).eval()
    with torch.no_grad():
        out = model(torch.randn(1, 3, 64, 64))
    assert isinstance(out, torch.Tensor)
    assert out.shape[1] == model.out_channels == model.feature_info[0]['num_chs'] == 16
    assert model.out_indices == (1, ) and len(model.feature_info) == 1
    assert out.shape[-1] == 64 // model.feature_info[0]['reduction']


def test_checks_name_the_valid_range():
    assert checked_out_indices(-1, 4) == (3, )
    assert checked_out_indices([2, 0], 4) == (2, 0)
    for bad, match in [((), 'at least one'), ((True, ), r'\[-4, 4\)'), ((1.0, ), r'\[-4, 4\)'),
                       ((4, ), r'\[-4, 4\), got 4'), ((0, -4), 'twice')]:
        with pytest.raises(ValueError, match=match):
            checked_out_indices(bad, 4)
    with pytest.raises(ValueError, match='increasing'):
        checked_out_indices((2, 0), 4, keep_order=False)
    assert checked_frozen_stages(4, 4) == 4
    for bad in (5, -2, 1.5, True):
        with pytest.raises(ValueError, match=r'frozen_stages must be in \[-1, 4\]'):
            checked_frozen_stages(bad, 4)


def size_contract_holds(model, prefix) -> None:
    """Assert what the backbone states about input sizes against real forwards at odd sizes: a fixed size runs and
    one pixel more does not; else sizes that are odd multiples of ``size_divisibility`` run and (for a multiple
    above 1) those one pixel larger do not."""
    def runs(h, w):
        try:
            with torch.no_grad():
                model(torch.zeros(prefix + (h, w)))
            return True
        except (ValueError, RuntimeError, AssertionError):
            return False

    fixed, step = model.fixed_input_size, model.size_divisibility
    if fixed is not None:
        assert runs(*fixed), f'the stated input size {fixed} does not run'
        assert not runs(fixed[0] + 1, fixed[1] + 1), f'sizes other than the stated {fixed} run too'
        return
    h, w = step * (2 * (61 // (2 * step)) + 1), step * (2 * (75 // (2 * step)) + 1)  # odd multiples, about 61x75
    assert runs(h, w), f'{h}x{w}, a multiple of size_divisibility={step}, does not run'
    if step > 1:
        assert not runs(h + 1, w + 1), f'{h + 1}x{w + 1} runs: size_divisibility={step} asks for more than needed'


@pytest.mark.parametrize('name', sorted(SPECS))
def test_size_divisibility_is_what_forward_takes(name):
    model = _build(name)
    size_contract_holds(model, SPECS[name]['x'][:-2])


def test_a_wrong_size_divisibility_fails_the_check():
    posmlp = _build('PosMLP')
    posmlp.size_divisibility = 4  # PosMLP pads its windows: any size runs
    with pytest.raises(AssertionError, match='asks for more than needed'):
        size_contract_holds(posmlp, (1, 3))
    gmlp = _build('GMLP')
    gmlp.fixed_input_size = None  # gMLP takes img_size only
    with pytest.raises(AssertionError, match='does not run'):
        size_contract_holds(gmlp, (1, 3))


def test_single_tensor_backbone_states_its_inner_size_constraints():
    wrapped = MODELS.build(dict(type='mmposmlp.SingleTensorBackbone',
                                backbone=dict(type='mmposmlp.GMLP', **SPECS['GMLP']['kw'])))
    assert wrapped.fixed_input_size == (32, 32) and wrapped.size_divisibility == 1
    size_contract_holds(wrapped.eval(), (1, 3))
