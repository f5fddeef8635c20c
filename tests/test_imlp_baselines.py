"""IMLP's host baselines (configs/imlp/baselines/, and LVT's in configs/imlp/): each +IMLP config has a baseline
that is the host model with exactly the +IMLP config's recipe (the paper trains its hosts "exactly as the
original methods" and swaps only the FFN). Config loading only: no model is built."""
import glob
import importlib
import os.path as osp

import pytest
from mmengine.config import Config

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
CFG_DIR = osp.join(ROOT, 'configs', 'imlp')
BASELINE_DIR = osp.join(CFG_DIR, 'baselines')

# +IMLP configs that are no paper row, so no baseline row either (configs/imlp/paper_rows.yml, Table 6 note).
NOT_A_ROW = {
    'mask-rcnn_swin-t-imlp_fpn_1x_coco.py': "Table 6 is Swin's 3x multi-scale recipe",
}
# Every +IMLP config of the family folder, from the files: a new one without a baseline fails below.
IMLP_CONFIGS = sorted(osp.basename(p) for p in glob.glob(osp.join(CFG_DIR, '*.py')) if '-imlp' in osp.basename(p))
PAIRED = [c for c in IMLP_CONFIGS if c not in NOT_A_ROW]

# The upstream config whose model each baseline builds (its backbone type, so upstream checkpoints load).
UPSTREAM = {
    'deit-ti_4xb256_in1k.py': 'mmpretrain::deit/deit-tiny_4xb256_in1k.py',
    'deit-s_4xb256_in1k.py': 'mmpretrain::deit/deit-small_4xb256_in1k.py',
    'deit-b_16xb64_in1k.py': 'mmpretrain::deit/deit-base_16xb64_in1k.py',
    'swin-t_16xb64_in1k.py': 'mmpretrain::swin_transformer/swin-tiny_16xb64_in1k.py',
    'swin-s_16xb64_in1k.py': 'mmpretrain::swin_transformer/swin-small_16xb64_in1k.py',
    'swin-b_16xb64_in1k.py': 'mmpretrain::swin_transformer/swin-base_16xb64_in1k.py',
    'poolformer-s12_32xb128_in1k.py': 'mmpretrain::poolformer/poolformer-s12_32xb128_in1k.py',
    'poolformer-s24_32xb128_in1k.py': 'mmpretrain::poolformer/poolformer-s24_32xb128_in1k.py',
    'poolformer-s36_32xb128_in1k.py': 'mmpretrain::poolformer/poolformer-s36_32xb128_in1k.py',
    'poolformer-m36_32xb128_in1k.py': 'mmpretrain::poolformer/poolformer-m36_32xb128_in1k.py',
    'poolformer-m48_32xb128_in1k.py': 'mmpretrain::poolformer/poolformer-m48_32xb128_in1k.py',
    'mask-rcnn_swin-t_fpn_ms-crop-3x_coco.py': 'mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py',
    'upernet_swin-t_8xb2-160k_ade20k-512x512.py':
        'mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py',
}
# Backbone keys that belong to the recipe the +IMLP configs restore (configs/imlp/README.md "Training recipes"):
# there the baseline follows its +IMLP config, not the upstream config.
RECIPE_BACKBONE_KEYS = ('drop_path_rate', 'frozen_stages')
# LVT is our own host: its baselines are configs/imlp/lvt-r*_8xb128_in1k.py, whose +IMLP configs inherit them and
# add ffn_cfg to the backbone and to the class-attention head.
OWN_HOSTS = ('lvt-', )


def _baseline_name(imlp_name):
    return imlp_name.replace('-imlp', '')


def _baseline_path(imlp_name):
    name = _baseline_name(imlp_name)
    return osp.join(CFG_DIR if imlp_name.startswith(OWN_HOSTS) else BASELINE_DIR, name)


def _upstream_path(ref):
    lib, rel = ref.split('::')
    return osp.join(osp.dirname(importlib.import_module(lib).__file__), '.mim', 'configs', rel)


def _load(path):
    return _unscoped(Config.fromfile(path).to_dict())


def _unscoped(obj):
    """Drop the ``_scope_`` keys mmengine adds to dicts inherited through ``lib::`` bases."""
    if isinstance(obj, dict):
        return {k: _unscoped(v) for k, v in obj.items() if k != '_scope_'}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_unscoped(v) for v in obj)
    return obj


def test_pairs_are_derived_from_the_files():
    assert len(PAIRED) >= 13 + 4, PAIRED  # Table 1's 11 hosts, Tables 6 and 7, LVT-R1..R4
    assert set(NOT_A_ROW) <= set(IMLP_CONFIGS)


@pytest.mark.parametrize('imlp_name', PAIRED)
def test_baseline_is_its_imlp_config_without_imlp(imlp_name):
    """Everything but ``model.backbone`` equals the +IMLP config's; the backbone is the +IMLP backbone without
    ``ffn_cfg``, with the upstream ``type``, and equal to the upstream config's but for the recipe keys."""
    path = _baseline_path(imlp_name)
    assert osp.isfile(path), (f'{imlp_name} has no baseline: add {osp.relpath(path, ROOT)}, its host model with '
                              'exactly its recipe')
    base, imlp = _load(path), _load(osp.join(CFG_DIR, imlp_name))
    b_backbone, i_backbone = base['model'].pop('backbone'), imlp['model'].pop('backbone')
    assert i_backbone.pop('ffn_cfg') and 'ffn_cfg' not in b_backbone
    if imlp_name.startswith(OWN_HOSTS):
        assert imlp['model']['head'].pop('ffn_cfg') and 'ffn_cfg' not in base['model']['head']
        assert b_backbone == i_backbone
    else:
        upstream = _load(_upstream_path(UPSTREAM[_baseline_name(imlp_name)]))['model']['backbone']
        assert i_backbone.pop('type').startswith('mmposmlp.')
        assert b_backbone == dict(i_backbone, type=upstream['type'])
        differs = {k for k in set(b_backbone) | set(upstream) if b_backbone.get(k, '-') != upstream.get(k, '-')}
        assert differs <= set(RECIPE_BACKBONE_KEYS), (differs, b_backbone, upstream)
    assert base == imlp


def test_every_baseline_file_is_the_pair_of_an_imlp_config():
    paired = {_baseline_name(c) for c in PAIRED}
    stray = sorted(osp.basename(p) for p in glob.glob(osp.join(BASELINE_DIR, '*.py'))
                   if osp.basename(p) not in paired)
    assert not stray, f'configs/imlp/baselines/ holds configs no +IMLP config pairs with: {stray}'
    assert sorted(UPSTREAM) == sorted(_baseline_name(c) for c in PAIRED if not c.startswith(OWN_HOSTS))


def _flat(obj, prefix=''):
    if isinstance(obj, dict):
        return {k: v for key, val in obj.items() for k, v in _flat(val, f'{prefix}.{key}' if prefix else key).items()}
    if isinstance(obj, (list, tuple)) and obj:
        return {k: v for i, val in enumerate(obj) for k, v in _flat(val, f'{prefix}[{i}]').items()}
    return {prefix: obj}


# CPVT's DeiT configs (DeiT with DeiT's recipe) are not these baselines: outside the model they differ only here.
CPVT_DEIT_DIFFERENCES = {
    'train_dataloader.batch_size',  # 8 GPUs x 128 images there; 4 x 256 (DeiT-B: 16 x 64) here: 1024 both
    'train_dataloader.sampler.num_repeats',  # RepeatAugSampler's default 3 there, stated here
    'custom_hooks',  # absent there; an empty list here (the +IMLP configs clear mmpretrain's DeiT-B EMAHook)
    # the weight-decay exemptions name each model's own position tables (CPVT: abs_pos_embed, pegs)
    'optim_wrapper.paramwise_cfg.flat_decay_mult',
    'optim_wrapper.paramwise_cfg.custom_keys..abs_pos_embed..decay_mult',
    'optim_wrapper.paramwise_cfg.custom_keys..pegs..decay_mult',
    'optim_wrapper.paramwise_cfg.custom_keys..pos_embed.decay_mult',
    'optim_wrapper.paramwise_cfg.custom_keys..absolute_pos_embed.decay_mult',
    'optim_wrapper.paramwise_cfg.custom_keys..relative_position_bias_table.decay_mult',
}
CPVT_DEIT_B_ONLY = {'optim_wrapper.optimizer.betas[0]', 'optim_wrapper.optimizer.betas[1]',
                    'optim_wrapper.optimizer.eps'}  # AdamW's defaults there, stated here


@pytest.mark.parametrize('size,ours', [('ti', 'deit-ti_4xb256_in1k.py'), ('s', 'deit-s_4xb256_in1k.py'),
                                       ('b', 'deit-b_16xb64_in1k.py')])
def test_cpvt_deit_configs_differ_from_the_deit_baselines(size, ours):
    """Why the DeiT baselines are new files and not CPVT's DeiT configs: the same DeiT recipe, but another batch
    layout, model (CPVT backbone, LinearClsHead) and weight-decay key names; nothing else differs."""
    cpvt = _flat(_load(osp.join(ROOT, 'configs', 'cpvt', 'paper_tables', f'deit-{size}-le_8xb128_in1k.py')))
    base = _flat(_load(osp.join(BASELINE_DIR, ours)))
    differs = {k for k in set(cpvt) | set(base) if not k.startswith('model.') and cpvt.get(k, '-') != base.get(k, '-')}
    assert differs == CPVT_DEIT_DIFFERENCES | (CPVT_DEIT_B_ONLY if size == 'b' else set())
    assert cpvt['model.backbone.type'] == 'mmposmlp.CPVT' and base['model.backbone.type'] == 'VisionTransformer'


@pytest.mark.parametrize('name', ['deit-ti_4xb256_in1k.py', 'swin-t_16xb64_in1k.py', 'poolformer-s12_32xb128_in1k.py'])
def test_upstream_checkpoint_loads_unchanged_into_the_baseline(name):
    """The restated backbone builds the upstream class itself (in the upstream scope) and takes the upstream
    model's state dict strictly (the small models of each ImageNet host)."""
    from mmposmlp.testing import build_model_from_cfg
    ours, _ = build_model_from_cfg(osp.join(BASELINE_DIR, name))
    upstream, _ = build_model_from_cfg(_upstream_path(UPSTREAM[name]))
    assert type(ours.backbone) is type(upstream.backbone)  # the class itself, not a subclass
    state = upstream.state_dict()
    assert {k: v.shape for k, v in ours.state_dict().items()} == {k: v.shape for k, v in state.items()}
    ours.load_state_dict(state, strict=True)
