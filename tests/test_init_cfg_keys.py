"""A ``Pretrained`` init_cfg is followed exactly as written: an unknown key (a typo such as ``prefx`` or
``prefer_EMA``) is refused in one sentence naming it, the closest accepted key and all accepted keys, when
the backbone is built (and again by ``init_weights`` if ``init_cfg`` was changed later); every accepted key
has its effect in every backbone family (``ignore_keys``, ``prefer_ema``, ``prefix``, ``map_location``).
"""
import pytest
import torch

import mmposmlp.models.checkpoints as ckpt_mod
from mmposmlp.models.backbones.cpvt import CPVT
from mmposmlp.models.backbones.gmlp import GMLP
from mmposmlp.models.backbones.lvt import LVT
from mmposmlp.models.backbones.posmlp import PosMLP
from mmposmlp.models.backbones.posmlp_video import PosMLPVideo
from mmposmlp.models.backbones.pvt_peg import PVTPEG
from mmposmlp.models.backbones.wave_mlp import WaveMLP
from mmposmlp.models.checkpoints import (PRETRAINED_INIT_KEYS, CheckpointMismatchError, InitCfgError,
                                         pretrained_init_cfg)
from mmposmlp.models.layers.peg import PEG

# one small model per family that reads a Pretrained init_cfg itself: (class, kwargs, family-only keys)
FAMILIES = {
    'PosMLP': (PosMLP, dict(arch=dict(embed_dims=[8, 16, 16, 32], depths=[1, 1, 1, 1], groups=[2, 2, 4, 4],
                                      mlp_ratios=[2, 2, 2, 2], window_sizes=[7, 7, 7, 7])), ()),
    'PosMLPVideo': (PosMLPVideo, dict(arch=dict(embed_dims=[8, 16, 16, 32], depths=[1, 1, 1, 1], mlp_ratio=2,
                                                groups=[2, 2, 4, 4],
                                                window_sizes=[(4, 4, 4), (4, 4, 4), (4, 2, 2), (4, 2, 2)])),
                    ('inflate', )),
    'WaveMLP': (WaveMLP, dict(arch=dict(depths=[1, 1, 1, 1], embed_dims=[8, 16, 24, 32], mlp_ratios=[2, 2, 2, 2])),
                ()),
    'CPVT': (CPVT, dict(arch=dict(embed_dims=16, num_layers=2, num_heads=2, feedforward_channels=32),
                        peg_positions=(0, )), ()),
    'PVTPEG': (PVTPEG, dict(arch=dict(depths=[1, 1, 1, 1], embed_dims=[8, 16, 24, 32], num_heads=[1, 2, 3, 4],
                                      mlp_ratios=[2, 2, 2, 2], sr_ratios=[8, 4, 2, 1])), ()),
    'PEG': (PEG, dict(embed_dims=8), ()),
    'GMLP': (GMLP, dict(arch=dict(num_layers=2, embed_dims=8, feedforward_channels=16), img_size=32), ()),
    'LVT': (LVT, dict(arch=dict(depths=[1, 1, 1, 1], embed_dims=[8, 8, 16, 16], num_heads=[1, 1, 2, 2],
                                mlp_ratios=[2, 2, 2, 2], depthwise_mlp=[False, True, True, True], sr_ratios=[8, 4, 2, 1],
                                sa_layers=['csa', 'rasa', 'rasa', 'rasa'])), ()),
}


def _build(family, init_cfg=None):
    cls, kwargs, _ = FAMILIES[family]
    torch.manual_seed(0)
    return cls(**kwargs, init_cfg=init_cfg)


def _save(tmp_path, family, state=None, name='w.pth'):
    """A checkpoint in our own format for ``family`` (a whole-model file: keys under ``backbone.``)."""
    state = _build(family).state_dict() if state is None else state
    path = str(tmp_path / name)
    torch.save({'state_dict': {'backbone.' + k: v for k, v in state.items()}}, path)
    return path


def _accepted(family):
    return list(PRETRAINED_INIT_KEYS) + list(FAMILIES[family][2])


@pytest.mark.parametrize('family', sorted(FAMILIES))
@pytest.mark.parametrize('typo,closest', [('prefx', 'prefix'), ('prefer_EMA', 'prefer_ema'),
                                          ('ignore_key', 'ignore_keys'), ('map_locaton', 'map_location')])
def test_unknown_key_is_refused_when_built_naming_it_the_closest_key_and_all_keys(tmp_path, family, typo,
                                                                                   closest):
    path = _save(tmp_path, family)
    with pytest.raises(InitCfgError) as err:
        _build(family, dict(type='Pretrained', checkpoint=path, **{typo: 'x'}))
    msg = str(err.value)
    assert f'unknown key {typo!r}' in msg and f'did you mean {closest!r}?' in msg
    assert msg.endswith('the accepted keys are ' + ', '.join(_accepted(family)) + '.')
    assert msg.startswith(FAMILIES[family][0].__name__ + ':')
    assert '\n' not in msg


@pytest.mark.parametrize('family', sorted(FAMILIES))
def test_unknown_key_set_after_building_is_refused_by_init_weights_before_loading(tmp_path, family, monkeypatch):
    model = _build(family)
    model.init_cfg = dict(type='Pretrained', checkpoint=_save(tmp_path, family), strict=False)
    monkeypatch.setattr(ckpt_mod, 'load_checkpoint_file', lambda *a, **k: pytest.fail('loaded before checking'))
    with pytest.raises(InitCfgError, match=r"unknown key 'strict'; the accepted keys are type, checkpoint"):
        model.init_weights()


def test_inflate_is_a_posmlp_video_key_only(tmp_path):
    with pytest.raises(InitCfgError, match=r"PosMLP: .*unknown key 'inflate'"):
        _build('PosMLP', dict(type='Pretrained', checkpoint=_save(tmp_path, 'PosMLP'), inflate=True))
    _build('PosMLPVideo', dict(type='Pretrained', checkpoint=_save(tmp_path, 'PosMLPVideo'), inflate=True))


@pytest.mark.parametrize('cfg,match', [
    (dict(type='Pretrained', prefix='backbone.'), r"names no checkpoint; add checkpoint='<path"),
    (dict(type='Pretrained', checkpoint='w.pth', ignore_keys='head.*'),
     r"ignore_keys is the string 'head\.\*'; give a list of patterns, e\.g\. ignore_keys=\['head\.\*'\]"),
    (dict(type='Pretrained', checkpoint='w.pth', prefer_ema='yes'), r"prefer_ema='yes' is not a bool"),
])
def test_malformed_values_are_refused_in_one_sentence(cfg, match):
    with pytest.raises(InitCfgError, match=match) as err:
        _build('CPVT', cfg)
    assert '\n' not in str(err.value)


def test_a_pretrained_entry_inside_a_list_is_refused():
    """mmengine would run it as its own non-strict PretrainedInit: missing weights would pass silently."""
    cfg = [dict(type='TruncNormal', layer='Linear', std=.02), dict(type='Pretrained', checkpoint='w.pth')]
    with pytest.raises(InitCfgError, match=r"lists a 'Pretrained' entry among 2 entries.*give it alone"):
        _build('WaveMLP', cfg)
    # other init configs are mmengine's business and pass through untouched
    model = _build('WaveMLP', [dict(type='TruncNormal', layer='Linear', std=.02)])
    assert pretrained_init_cfg(model) is None


@pytest.mark.parametrize('family', sorted(FAMILIES))
def test_every_accepted_key_has_its_effect(tmp_path, family, monkeypatch):
    """prefix and ignore_keys select the weights, prefer_ema picks them, map_location reaches torch.load."""
    src = _build(family)
    ema = {k: v + 1 if v.is_floating_point() else v for k, v in src.state_dict().items()}
    extra = {'backbone.extra_unused.weight': torch.zeros(2)}
    path = str(tmp_path / 'w.pth')
    torch.save({'state_dict': {**{'backbone.' + k: v for k, v in src.state_dict().items()}, **extra},
                'state_dict_ema': {**{'backbone.' + k: v for k, v in ema.items()}, **extra}}, path)
    seen = []
    real_load = ckpt_mod.safe_torch_load
    monkeypatch.setattr(ckpt_mod, 'safe_torch_load', lambda p, map_location='cpu': (seen.append(map_location),
                                                                                     real_load(p, map_location))[1])
    base = dict(type='Pretrained', checkpoint=path, prefix='backbone.')
    with pytest.raises(CheckpointMismatchError, match=r"'extra_unused\.weight'.*ignore_keys="):
        _build(family, base).init_weights()
    for prefer_ema, ref in ((False, src.state_dict()), (True, ema)):
        model = _build(family, dict(base, ignore_keys=['extra_unused.*'], prefer_ema=prefer_ema,
                                    map_location=torch.device('cpu')))
        model.init_weights()
        own = model.state_dict()
        assert all(torch.equal(own[k], v) for k, v in ref.items()), (family, prefer_ema)
    assert seen == ['cpu', torch.device('cpu'), torch.device('cpu')]
    # a prefix that matches nothing is an error, not an empty load
    with pytest.raises(CheckpointMismatchError, match="no key of the checkpoint starts with 'model.'"):
        _build(family, dict(base, prefix='model.', ignore_keys=['extra_unused.*'])).init_weights()


def test_the_build_error_a_tool_prints_is_the_one_sentence(tmp_path):
    """tools/train.py builds the model inside build_runner: the refusal reaches the user as this sentence."""
    from mmposmlp.engine.entry import explain_build_error
    from mmposmlp.registry import MODELS
    cfg = dict(type='mmposmlp.WaveMLP', arch=FAMILIES['WaveMLP'][1]['arch'],
               init_cfg=dict(type='Pretrained', checkpoint=_save(tmp_path, 'WaveMLP'), prefer_emma=False))
    with pytest.raises(InitCfgError) as err:
        MODELS.build(cfg)
    msg = explain_build_error(err.value)
    assert msg.startswith('WaveMLP: init_cfg of type')
    assert "did you mean 'prefer_ema'?" in msg and '\n' not in msg


# the upstream-hosted backbones: the IMLP adapters (mmpretrain hosts) and Swin+PEG
UPSTREAM_HOSTED = {
    'SwinTransformerIMLP': dict(arch=dict(embed_dims=16, depths=[1, 1], num_heads=[1, 2]), img_size=32,
                                window_size=4, out_indices=(1, ), drop_path_rate=0.),
    'PoolFormerIMLP': dict(arch=dict(layers=[1, 1, 1, 1], embed_dims=[8, 16, 24, 32], mlp_ratios=[4, 4, 4, 4],
                                     layer_scale_init_value=1e-5)),
    'SwinPEG': dict(arch=dict(embed_dims=16, depths=[1, 1], num_heads=[1, 2]), img_size=32, window_size=4,
                    out_indices=(1, ), drop_path_rate=0.),
}


def _build_hosted(name, init_cfg=None):
    from mmengine.registry import DefaultScope

    from mmposmlp.registry import MODELS
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope('mmposmlp'):
        return MODELS.build(dict(type=f'mmposmlp.{name}', init_cfg=init_cfg, **UPSTREAM_HOSTED[name]))


@pytest.mark.parametrize('name', sorted(UPSTREAM_HOSTED))
def test_upstream_hosted_backbones_refuse_unknown_keys_and_follow_the_accepted_ones(tmp_path, name):
    model = _build_hosted(name)
    state = model.state_dict()
    path = str(tmp_path / 'w.pth')
    ema = {k: v + 1 if v.is_floating_point() else v for k, v in state.items()}
    torch.save({'state_dict': {'backbone.' + k: v for k, v in state.items()},
                'state_dict_ema': {'backbone.' + k: v for k, v in ema.items()}}, path)
    typo = _build_hosted(name, dict(type='Pretrained', checkpoint=path, prefx='backbone.'))
    with pytest.raises(InitCfgError, match=r"unknown key 'prefx'; did you mean 'prefix'\? the accepted keys"):
        typo.init_weights()
    for prefer_ema, want in ((False, state), (True, ema)):
        loaded = _build_hosted(name, dict(type='Pretrained', checkpoint=path, prefer_ema=prefer_ema))
        loaded.init_weights()
        got = loaded.state_dict()
        assert all(torch.equal(got[k], want[k]) for k in want if want[k].is_floating_point()), prefer_ema


def test_dense_swin_imlp_refuses_keys_its_upstream_loader_would_ignore(tmp_path):
    pytest.importorskip('mmdet')
    from mmengine.registry import DefaultScope

    from mmposmlp.registry import MODELS
    with DefaultScope.overwrite_default_scope('mmposmlp'):
        model = MODELS.build(dict(type='mmposmlp.DetSwinTransformerIMLP', embed_dims=16, depths=[1, 1],
                                  num_heads=[1, 2], strides=(4, 2), out_indices=(0, 1), window_size=4,
                                  init_cfg=dict(type='Pretrained', checkpoint='x.pth', prefer_ema=False)))
    with pytest.raises(InitCfgError, match=r"DetSwinTransformerIMLP: init_cfg keys \['prefer_ema'\] are not "
                                           r"followed by mmdet's SwinTransformer"):
        model.init_weights()
    model.init_cfg = dict(type='Pretrained', checkpoint='x.pth', prefx='a')
    with pytest.raises(InitCfgError, match="unknown key 'prefx'"):
        model.init_weights()
