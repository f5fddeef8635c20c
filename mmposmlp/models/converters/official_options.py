"""Every option key of every official release we convert, as data, and the one check they all pass.

For each release, ``read`` holds the keys the official model reads (with the official default) and
``ignored`` the keys it accepts but never uses (with the reason). A read key is mapped to ours by the
family's converter, or refused there with the reason when our model cannot represent the value; an
ignored key is accepted and named in one info line; any other key is refused in one sentence naming
the closest known key. Init-only and head-only keys count as read: they change the official model.
The keys were read from each release's source (file and class named in ``source``); config releases
(PosMLP-Video's yacs tree) use dotted keys ``SECTION.KEY``.
"""
import difflib
import logging
from typing import Dict, Mapping

from mmengine.logging import print_log

_NEVER_USED = 'never used by the model'

#: ``Zhicaiwww/PosMLP``: ``PosMLP.__init__`` and the ``**kwargs`` its stem, levels, layers and gates read
POSMLP = dict(
    model='PosMLP',
    source='github.com/Zhicaiwww/PosMLP models/posmlp.py PosMLP (+ models/patch_downsample.py, models/posmlp2D.py)',
    read=dict(
        img_size=(224, 224), in_chans=3, in_chan=3, num_levels=3, embed_dims=(96, 192, 384, 768),
        win_size=(14, 14, 14, 7), gamma=(8, 16, 32, 64), depths=(2, 2, 18, 2), mlp_ratio=(4, 4, 4, 2),
        num_classes=1000, gate_unit='PoSGU', gate_layer='PosMLPLayer', pool_layer='ConvPatchMerging',
        stem='ConvPatchEmbed', drop_rate=0., drop_path_rate=0.1, norm_layer='partial(nn.LayerNorm, eps=1e-6)',
        act_layer='nn.GELU', global_pool='avg', stem_norm='BN', downsample_norm='LN', ape=False, pretrained=None,
        chunks=2, shift=False, num_blocks=1, quadratic=True, generalized=True, pos_only=True, use_softmax=True,
        att_std=1e-2, absolute_bias=True, symmetric=True, depth_conv=True),
    ignored=dict(patch_size='stored as an attribute, never used (the stems fix their own strides)'),
)

#: the sections of the SlowFast config tree that hold model options of ``PosMLP_Video``
POSMLP_VIDEO_SECTIONS = ('POSMLP_VIDEO', 'MODEL', 'DATA')
_MORPH = 'read only by PosMLP_Video_32 (the release\'s MorphMLP network), not by PosMLP_Video'
_DATA = 'a data-pipeline option'
_NOT_MODEL = 'not a model option (training, data or runtime settings)'

#: ``zhouds1918/PosMLP_Video``: the yacs tree of ``slowfast/config/defaults.py`` as ``PosMLP_Video`` reads it
POSMLP_VIDEO = dict(
    model='PosMLP_Video',
    sections=POSMLP_VIDEO_SECTIONS,
    source='github.com/zhouds1918/PosMLP_Video slowfast/config/defaults.py, read by slowfast/models/posmlp.py '
    'PosMLP_Video.__init__',
    read={
        'WIN_SIZE': [14, 14, 14, 7], 'WIN_SIZE_T': [8, 3, 3, 3], 'POSGAMMA': [8, 16, 32, 64],
        'POSMLP_VIDEO.LAYERS': [4, 3, 8, 3], 'POSMLP_VIDEO.TRANSITIONS': [True, False, False, False],
        'POSMLP_VIDEO.EMBED_DIMS': [192, 384, 384, 384], 'POSMLP_VIDEO.DROP_DEPTH_RATE': 0.1,
        # defaults.py says 'SlowFast'; every release config names the network, absent means PosMLP_Video
        'MODEL.MODEL_NAME': 'PosMLP_Video', 'MODEL.NUM_CLASSES': 400, 'DATA.INPUT_CHANNEL_NUM': [3, 3],
    },
    ignored={
        'DEPTH': 'defined in defaults.py, read by no model', 'EMBED_DIM_TS': 'defined in defaults.py, read by no model',
        'POSMLP_VIDEO.SHIFT': 'passed to the layers, whose shift size is fixed to 0 (same windows either way)',
        'POSMLP_VIDEO.PATCH_SIZE': 'passed to the stem, which never uses it (two fixed 3x3 stride-2 convs)',
        'POSMLP_VIDEO.PRETRAIN_PATH': 'read by get_pretrained_model of the training script, not by the model',
        'POSMLP_VIDEO.SEGMENT_DIM': _MORPH, 'POSMLP_VIDEO.T_STRIDE': _MORPH, 'POSMLP_VIDEO.MLP_RATIOS': _MORPH,
        'POSMLP_VIDEO.QKV_SCALE': _MORPH, 'POSMLP_VIDEO.QKV_BIAS': _MORPH,
        'POSMLP_VIDEO.ATTENTION_DROPOUT_RATE': _MORPH,
        'DATA.TRAIN_CROP_SIZE': 'passed to the stem, which never uses it',
        **{f'MODEL.{k}': 'read by the SlowFast build and training code, not by the model' for k in (
            'ARCH', 'USE_CHECKPOINT', 'CHECKPOINT_NUM', 'LOSS_FUNC', 'SINGLE_PATHWAY_ARCH', 'MULTI_PATHWAY_ARCH',
            'DROPOUT_RATE', 'DROPCONNECT_RATE', 'FC_INIT_STD', 'HEAD_ACT')},
        **{f'DATA.{k}': _DATA for k in (
            'LABEL_PATH_TEMPLATE', 'IMAGE_TEMPLATE', 'PATH_TO_DATA_DIR', 'PATH_LABEL_SEPARATOR', 'PATH_PREFIX',
            'NUM_FRAMES', 'SAMPLING_RATE', 'TRAIN_PCA_EIGVAL', 'TRAIN_PCA_EIGVEC', 'PATH_TO_PRELOAD_IMDB', 'MEAN',
            'STD', 'TRAIN_JITTER_SCALES', 'TRAIN_JITTER_SCALES_RELATIVE', 'TRAIN_JITTER_ASPECT_RELATIVE',
            'USE_OFFSET_SAMPLING', 'TRAIN_JITTER_MOTION_SHIFT', 'TEST_CROP_SIZE', 'TARGET_FPS', 'DECODING_BACKEND',
            'INV_UNIFORM_SAMPLE', 'RANDOM_FLIP', 'MULTI_LABEL', 'ENSEMBLE_METHOD', 'REVERSE_INPUT_CHANNEL')},
        **{k: _NOT_MODEL for k in (
            'BN', 'TRAIN', 'AUG', 'MIXUP', 'TEST', 'RESNET', 'X3D', 'NONLOCAL', 'MVIT', 'SLOWFAST', 'SOLVER',
            'NUM_GPUS', 'NUM_SHARDS', 'SHARD_ID', 'OUTPUT_DIR', 'RNG_SEED', 'LOG_PERIOD', 'LOG_MODEL_INFO',
            'DIST_BACKEND', 'BENCHMARK', 'DATA_LOADER', 'DETECTION', 'AVA', 'MULTIGRID', 'TENSORBOARD', 'DEMO')},
    },
)

_WAVE_UNUSED = 'accepted by WaveNet and never passed on to a layer that uses it'

#: ``huawei-noah/Efficient-AI-Backbones`` Wave-MLP: ``WaveNet.__init__``
WAVEMLP = dict(
    model='WaveNet',
    source='github.com/huawei-noah/Efficient-AI-Backbones wavemlp_pytorch/models/wavemlp.py WaveNet',
    read=dict(layers=None, num_classes=1000, embed_dims=None, transitions=None, mlp_ratios=None, qkv_bias=False,
              drop_path_rate=0., norm_layer='nn.BatchNorm2d', fork_feat=False, mode='fc', ds_use_norm=True),
    ignored=dict(img_size='the stem is a fixed 7x7 stride-4 conv that never reads it',
                 patch_size='overwritten before use (2 or 1 per transition)',
                 in_chans='the stem is built for 3 channels whatever the value', qk_scale=_WAVE_UNUSED,
                 attn_drop_rate=_WAVE_UNUSED, drop_rate=_WAVE_UNUSED, args=_NEVER_USED),
)

#: ``Meituan-AutoML/Twins``: ``CPVTV2.__init__`` (``gvt.py``; ``F4`` in ``detection/gvt.py``, ``F4`` and
#: ``extra_norm`` in ``segmentation/gvt.py``)
TWINS_PCPVT = dict(
    model='CPVTV2',
    source='github.com/Meituan-AutoML/Twins gvt.py, detection/gvt.py, segmentation/gvt.py CPVTV2',
    read=dict(img_size=224, patch_size=4, in_chans=3, num_classes=1000, embed_dims=[64, 128, 256, 512],
              num_heads=[1, 2, 4, 8], mlp_ratios=[4, 4, 4, 4], qkv_bias=False, qk_scale=None, drop_rate=0.,
              attn_drop_rate=0., drop_path_rate=0., norm_layer='nn.LayerNorm', depths=[3, 4, 6, 3],
              sr_ratios=[8, 4, 2, 1], block_cls='Block', F4=False, extra_norm=False),
    ignored={},
)

#: ``whai362/PVT`` v1: ``PyramidVisionTransformer.__init__`` (``classification/pvt.py``; ``F4`` and
#: ``pretrained`` in ``detection/pvt.py``, ``F4`` in ``segmentation/pvt.py``)
PVT_V1 = dict(
    model='PyramidVisionTransformer',
    source='github.com/whai362/PVT classification/pvt.py, detection/pvt.py, segmentation/pvt.py '
    'PyramidVisionTransformer',
    read=dict(img_size=224, patch_size=16, in_chans=3, num_classes=1000, embed_dims=[64, 128, 256, 512],
              num_heads=[1, 2, 4, 8], mlp_ratios=[4, 4, 4, 4], qkv_bias=False, qk_scale=None, drop_rate=0.,
              attn_drop_rate=0., drop_path_rate=0., norm_layer='nn.LayerNorm', depths=[3, 4, 6, 3],
              sr_ratios=[8, 4, 2, 1], num_stages=4, F4=False, pretrained=None),
    ignored={},
)

#: ``Chenglin-Yang/LVT``: ``lite_vision_transformer.__init__`` (``classification/models/lvt.py``) and the
#: ``post_layers`` of ``lvt_cls`` (``classification/models/lvt_cls.py``)
LVT = dict(
    model='lite_vision_transformer',
    source='github.com/Chenglin-Yang/LVT classification/models/lvt.py lite_vision_transformer, '
    'classification/models/lvt_cls.py lvt_cls',
    read={**dict(layers=None, in_chans=3, num_classes=1000, embed_dims=None, num_heads=None,
                 sa_layers=['csa', 'rasa', 'rasa', 'rasa'], rasa_cfg=None, mlp_ratios=None, mlp_depconv=None,
                 sr_ratios=[1, 1, 1, 1], qkv_bias=False, qk_scale=None, attn_drop_rate=0., drop_path_rate=0.,
                 norm_layer='nn.LayerNorm', with_cls_head=True, post_layers=None),
          # rasa_cfg's own keys, read as attributes by Attention (atrous_rates, r_num) and by the atrous
          # ds_conv2d it builds (act_layer, init: the defaults are ds_conv2d's; the official Attention has none)
          'rasa_cfg.atrous_rates': None, 'rasa_cfg.act_layer': 'nn.SiLU(True)', 'rasa_cfg.init': 'kaiming',
          'rasa_cfg.r_num': 1},
    ignored=dict(patch_size='the stage embeddings fix their own patch sizes (7, then 3)', drop_rate=_NEVER_USED),
    sections=('rasa_cfg', ),
)

#: timm's gMLP (``gmlp_ti16_224`` / ``gmlp_s16_224`` / ``gmlp_b16_224``): ``MlpMixer.__init__`` with
#: ``block_layer=SpatialGatingBlock, mlp_layer=GatedMlp``
TIMM_GMLP = dict(
    model='MlpMixer',
    source='timm 1.0 timm/models/mlp_mixer.py MlpMixer (SpatialGatingBlock, GatedMlp)',
    read=dict(num_classes=1000, img_size=224, in_chans=3, patch_size=16, num_blocks=8, embed_dim=512,
              mlp_ratio=(0.5, 4.0), block_layer='MixerBlock', mlp_layer='Mlp',
              norm_layer='partial(nn.LayerNorm, eps=1e-6)', act_layer='nn.GELU', drop_rate=0., proj_drop_rate=0.,
              drop_path_rate=0., nlhb=False, stem_norm=False, global_pool='avg', device=None, dtype=None),
    ignored={},
)

#: DeiT (``facebookresearch/deit``: ``deit_*`` are timm ``VisionTransformer`` instances): ``VisionTransformer.__init__``
DEIT = dict(
    model='VisionTransformer',
    source='timm 1.0 timm/models/vision_transformer.py VisionTransformer (the DeiT models, deit_*_patch16_224)',
    read=dict(img_size=224, patch_size=16, in_chans=3, num_classes=1000, global_pool='token', embed_dim=768,
              depth=12, num_heads=12, mlp_ratio=4.0, qkv_bias=True, qk_norm=False, scale_attn_norm=False,
              scale_mlp_norm=False, proj_bias=True, init_values=None, class_token=True, pos_embed='learn',
              no_embed_class=False, reg_tokens=0, pre_norm=False, final_norm=True, fc_norm=None,
              pool_include_prefix=False, dynamic_img_size=False, dynamic_img_pad=False, drop_rate=0.,
              pos_drop_rate=0., patch_drop_rate=0., proj_drop_rate=0., attn_drop_rate=0., drop_path_rate=0.,
              weight_init='', fix_init=False, embed_layer='PatchEmbed', embed_norm_layer=None, norm_layer=None,
              act_layer=None, block_fn='Block', mlp_layer='Mlp', attn_layer='Attention', device=None, dtype=None),
    ignored={},
)

#: DeiT's distilled models (``facebookresearch/deit`` ``models.py``): each ``deit_*_distilled_patch16_*``
#: function takes ``pretrained`` and passes its other keyword options to ``DistilledVisionTransformer``, which
#: passes them all to timm's ``VisionTransformer`` of timm 0.3.2, the version the release pins (its
#: ``requirements.txt``); that constructor reads every one of them
DEIT_DISTILLED = dict(
    model='DistilledVisionTransformer',
    source='github.com/facebookresearch/deit models.py deit_*_distilled_patch16_* / DistilledVisionTransformer, '
    'on timm 0.3.2 timm/models/vision_transformer.py VisionTransformer',
    read=dict(img_size=224, patch_size=16, in_chans=3, num_classes=1000, embed_dim=768, depth=12, num_heads=12,
              mlp_ratio=4., qkv_bias=False, qk_scale=None, drop_rate=0., attn_drop_rate=0., drop_path_rate=0.,
              hybrid_backbone=None, norm_layer='nn.LayerNorm', pretrained=False),
    ignored={},
)

_DEIT_FILES = 'https://dl.fbaipublicfiles.com/deit/{}'
_DEIT_FIXED = dict(patch_size=16, mlp_ratio=4, qkv_bias=True, norm_layer='partial(nn.LayerNorm, eps=1e-6)')
#: the release's distilled constructors: the options each one sets itself (passing one again is a TypeError
#: there) and the file its ``pretrained=True`` loads (``torch.hub.load_state_dict_from_url``, ``check_hash``)
DEIT_DISTILLED_CONSTRUCTORS = {
    'deit_tiny_distilled_patch16_224': (dict(_DEIT_FIXED, embed_dim=192, depth=12, num_heads=3),
                                        _DEIT_FILES.format('deit_tiny_distilled_patch16_224-b40b3cf7.pth')),
    'deit_small_distilled_patch16_224': (dict(_DEIT_FIXED, embed_dim=384, depth=12, num_heads=6),
                                         _DEIT_FILES.format('deit_small_distilled_patch16_224-649709d9.pth')),
    'deit_base_distilled_patch16_224': (dict(_DEIT_FIXED, embed_dim=768, depth=12, num_heads=12),
                                        _DEIT_FILES.format('deit_base_distilled_patch16_224-df68dfff.pth')),
    'deit_base_distilled_patch16_384': (dict(_DEIT_FIXED, img_size=384, embed_dim=768, depth=12, num_heads=12),
                                        _DEIT_FILES.format('deit_base_distilled_patch16_384-d0272ac0.pth')),
}

#: release name -> table
RELEASES: Dict[str, dict] = {
    'posmlp': POSMLP,
    'posmlp_video': POSMLP_VIDEO,
    'wavemlp': WAVEMLP,
    'twins_pcpvt': TWINS_PCPVT,
    'pvt_v1': PVT_V1,
    'lvt': LVT,
    'timm_gmlp': TIMM_GMLP,
    'deit': DEIT,
    'deit_distilled': DEIT_DISTILLED,
}


def flat_cfg(cfg: Mapping, sections=POSMLP_VIDEO_SECTIONS) -> dict:
    """A yacs-style tree as ``{'KEY': v, 'SECTION.KEY': v}``: the keys of ``sections`` spelled out, other
    top-level entries (whole sections included) kept as one key."""
    flat = {}
    for key, value in cfg.items():
        if key in sections and isinstance(value, Mapping):
            flat.update({f'{key}.{k}': v for k, v in value.items()})
        else:
            flat[key] = value
    return flat


def _unknown_option(table: dict, unknown: list, known: list) -> ValueError:
    close = difflib.get_close_matches(str(unknown[0]), known, n=1, cutoff=0.0)
    more = f' (and {len(unknown) - 1} more unknown: {unknown[1:]})' if len(unknown) > 1 else ''
    section, _, leaf = str(unknown[0]).rpartition('.')
    nested = f' ({section} key {leaf!r} is not known)' if section in table.get('sections', ()) else ''
    return ValueError(f"{unknown[0]!r}{more} is not an option of the official {table['model']} ({table['source']})"
                      f'{nested}; the closest known option is {close[0]!r}.')


def checked_options(release: str, options: Mapping) -> dict:
    """``options`` of an official ``release`` merged over its defaults, after the check: a key outside the
    table is refused naming the closest known key; the ignored keys given are named in one info line and
    left out of the result. The entries of a release's ``sections`` (dicts) are checked key by key, as
    ``SECTION.KEY`` (:func:`flat_cfg`)."""
    table = RELEASES[release]
    options = flat_cfg(options, table.get('sections', ()))
    known = list(table['read']) + list(table['ignored'])
    unknown = [k for k in options if k not in known]
    if unknown:
        raise _unknown_option(table, unknown, known)
    by_reason = {}
    for k in options:
        if k in table['ignored']:
            by_reason.setdefault(table['ignored'][k], []).append(k)
    if by_reason:
        reasons = '; '.join(f'{", ".join(keys)} ({why})' for why, keys in by_reason.items())
        print_log(f"official {table['model']} options accepted without effect, as the official model ignores "
                  f'them: {reasons}', logger='current', level=logging.INFO)
    return {**table['read'], **{k: v for k, v in options.items() if k in table['read']}}


def layer_name(value) -> str:
    """``nn.GELU`` / ``'nn.GELU'`` / ``'timm.layers.Mlp'`` -> the bare class name (``'GELU'``, ``'Mlp'``)."""
    return str(getattr(value, '__name__', value)).rpartition('.')[2]


def layernorm_eps(value) -> float:
    """The eps of an official ``norm_layer``: ``nn.LayerNorm`` (1e-5) or ``partial(nn.LayerNorm, eps=...)``, given
    as the object or as its source text; any other norm is refused."""
    if getattr(value, 'func', None) is not None and layer_name(value.func) == 'LayerNorm':
        return float(value.keywords.get('eps', 1e-5))
    spec = str(value).replace(' ', '').replace('torch.nn.', '').replace('nn.', '')
    if layer_name(value) == 'LayerNorm' or spec == 'LayerNorm':
        return 1e-5
    if spec.startswith('partial(LayerNorm,eps=') and spec.endswith(')'):
        return float(spec[len('partial(LayerNorm,eps='):-1])
    raise ValueError(f'official norm_layer={value!r} is not supported: only nn.LayerNorm (any eps) is')
