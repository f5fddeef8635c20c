"""Every option key of every official release is known: read (mapped or refused with the reason) or ignored
(accepted, one info line); any other key is refused naming the closest known key.

The release configs of PosMLP-Video and the constructor signatures of the other releases are kept as data
(tests/data/posmlp_video_release.json, tests/data/official_signatures.json), read from the official sources.
"""
import copy
import json
import logging
import os.path as osp

import pytest
from mmengine.logging import MMLogger

from mmposmlp.models.converters import cpvt, gmlp, lvt, posmlp, posmlp_video, pvt_peg, wave_mlp
from mmposmlp.models.converters.official_options import RELEASES, checked_options, flat_cfg

DATA = osp.join(osp.dirname(__file__), 'data')
VIDEO = json.load(open(osp.join(DATA, 'posmlp_video_release.json')))
SIGNATURES = json.load(open(osp.join(DATA, 'official_signatures.json')))['releases']
MAPPERS = {
    'posmlp': posmlp.official_arch_to_ours,
    'posmlp_video': posmlp_video.official_cfg_to_ours,
    'wavemlp': wave_mlp.official_arch_to_ours,
    'twins_pcpvt': pvt_peg.official_arch_to_ours,
    'pvt_v1': pvt_peg.official_pvt_v1_arch_to_ours,
    'lvt': lvt.official_lvt_kwargs,
    'timm_gmlp': gmlp.timm_gmlp_kwargs_to_ours,
    'deit': cpvt.deit_kwargs_to_ours,
    'deit_distilled': cpvt.deit_distilled_kwargs_to_ours,
}


class _Records(logging.Handler):

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture
def log_lines():
    logger = MMLogger.get_current_instance()
    handler = _Records()
    logger.addHandler(handler)
    yield handler.messages
    logger.removeHandler(handler)


def _merged(base: dict, override: dict) -> dict:
    """yacs ``merge_from_file``: ``override``'s keys replace ``base``'s, section by section."""
    out = copy.deepcopy(base)
    for k, v in override.items():
        out[k] = _merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _release_configs(model_name):
    return sorted(f for f, c in VIDEO['configs'].items() if c['MODEL']['MODEL_NAME'] == model_name)


def _expected_video_kwargs(cfg: dict) -> dict:
    """What the release's own PosMLP_Video reads from ``cfg`` (defaults.py filling the gaps)."""
    full = _merged(VIDEO['defaults'], cfg)
    pv = full['POSMLP_VIDEO']
    return dict(depths=pv['LAYERS'], embed_dims=pv['EMBED_DIMS'], groups=full['POSGAMMA'],
                window_sizes=[[t, w, w] for t, w in zip(full['WIN_SIZE_T'], full['WIN_SIZE'])],
                drop_path_rate=pv['DROP_DEPTH_RATE'], in_channels=full['DATA']['INPUT_CHANNEL_NUM'][0])


# ---------------------------------------------------------------------- the tables themselves
@pytest.mark.parametrize('release', sorted(RELEASES))
def test_every_key_is_read_or_ignored_never_both(release):
    table = RELEASES[release]
    assert not set(table['read']) & set(table['ignored'])
    assert all(isinstance(why, str) and why for why in table['ignored'].values())
    assert table['source'] and table['model']


@pytest.mark.parametrize('release', sorted(SIGNATURES))
def test_table_keys_equal_the_official_constructor_parameters(release):
    """The table of a constructor release is its official signature (every copy of it) plus the keys its
    components read from ``**kwargs``: nothing missing, nothing invented."""
    sig = SIGNATURES[release]
    params = {p for names in sig['constructors'].values() for p in names}
    params |= {p for names in sig.get('kwargs_read', {}).values() for p in names}
    params |= {p for names in sig.get('nested_read', {}).values() for p in names}
    table = RELEASES[release]
    assert set(table['read']) | set(table['ignored']) == params


@pytest.mark.parametrize('release,module,cls', [('timm_gmlp', 'timm.models.mlp_mixer', 'MlpMixer'),
                                                ('deit', 'timm.models.vision_transformer', 'VisionTransformer')])
def test_timm_table_keys_equal_the_installed_timm_signature(release, module, cls):
    import inspect
    params = set(inspect.signature(getattr(pytest.importorskip(module), cls).__init__).parameters) - {'self'}
    assert set(RELEASES[release]['read']) | set(RELEASES[release]['ignored']) == params


def test_posmlp_video_table_covers_the_model_sections_of_defaults_py():
    keys = set(flat_cfg(VIDEO['defaults'])) | set(VIDEO['other_top_level_entries'])
    table = RELEASES['posmlp_video']
    assert set(table['read']) | set(table['ignored']) == keys


# ---------------------------------------------------------------------- PosMLP-Video: the release's configs
@pytest.mark.parametrize('name', _release_configs('PosMLP_Video'))
def test_every_posmlp_video_release_config_converts(name):
    cfg = VIDEO['configs'][name]
    ours = posmlp_video.official_cfg_to_ours(cfg)
    want = _expected_video_kwargs(cfg)
    assert ours['arch'] == dict(embed_dims=want['embed_dims'], depths=want['depths'], mlp_ratio=2,
                                groups=want['groups'], window_sizes=want['window_sizes'])
    assert ours['drop_path_rate'] == want['drop_path_rate'] and ours['in_channels'] == want['in_channels']
    # merged over defaults.py first (what the release's own loader builds), the result is the same
    assert posmlp_video.official_cfg_to_ours(_merged(VIDEO['defaults'], cfg)) == ours


def test_the_smallest_release_config_builds_our_model():
    from mmposmlp.models.backbones.posmlp_video import PosMLPVideo
    name = min(_release_configs('PosMLP_Video'), key=lambda f: sum(VIDEO['configs'][f]['POSMLP_VIDEO']['EMBED_DIMS']))
    model = PosMLPVideo(**posmlp_video.official_cfg_to_ours(VIDEO['configs'][name]))
    assert model.out_channels[-1] == VIDEO['configs'][name]['POSMLP_VIDEO']['EMBED_DIMS'][-1]


@pytest.mark.parametrize('name', _release_configs('PosMLP_Video_32'))
def test_release_configs_of_the_morphmlp_network_are_refused_with_the_reason(name):
    with pytest.raises(ValueError, match=r"MODEL_NAME='PosMLP_Video_32' is the release's MorphMLP network"):
        posmlp_video.official_cfg_to_ours(VIDEO['configs'][name])


def test_both_networks_of_the_release_are_among_its_configs():
    assert len(_release_configs('PosMLP_Video')) >= 1 and len(_release_configs('PosMLP_Video_32')) >= 1
    assert len(_release_configs('PosMLP_Video')) + len(_release_configs('PosMLP_Video_32')) == len(VIDEO['configs'])


def test_defaults_py_full_nodes_convert():
    """Every key of defaults.py's model nodes is known; with the network named, the full tree converts to
    the defaults' values, and the two-pathway default INPUT_CHANNEL_NUM gives the first pathway's channels."""
    cfg = _merged(VIDEO['defaults'], {'MODEL': {'MODEL_NAME': 'PosMLP_Video'}})
    ours = posmlp_video.official_cfg_to_ours(cfg)
    want = _expected_video_kwargs(cfg)
    assert ours['arch']['window_sizes'] == want['window_sizes'] and ours['arch']['depths'] == want['depths']
    assert ours['in_channels'] == VIDEO['defaults']['DATA']['INPUT_CHANNEL_NUM'][0]
    assert ours['downsamples'] == [bool(t) or a != b for t, a, b in zip(
        VIDEO['defaults']['POSMLP_VIDEO']['TRANSITIONS'], want['embed_dims'], want['embed_dims'][1:])]


def test_defaults_py_alone_names_another_network_and_is_refused():
    assert VIDEO['defaults']['MODEL']['MODEL_NAME'] != 'PosMLP_Video'
    with pytest.raises(ValueError, match="MODEL_NAME='SlowFast' does not build the PosMLP-Video network"):
        posmlp_video.official_cfg_to_ours(VIDEO['defaults'])


def test_keys_only_posmlp_video_32_reads_are_ignored_in_one_info_line(log_lines):
    cfg = VIDEO['configs'][_release_configs('PosMLP_Video')[0]]
    posmlp_video.official_cfg_to_ours(cfg)
    lines = [m for m in log_lines if 'accepted without effect' in m]
    assert len(lines) == 1, log_lines
    for key in ('POSMLP_VIDEO.T_STRIDE', 'POSMLP_VIDEO.MLP_RATIOS', 'POSMLP_VIDEO.SEGMENT_DIM', 'SOLVER', 'AUG'):
        assert key in lines[0]


def test_no_info_line_without_ignored_keys(log_lines):
    checked_options('posmlp_video', {'POSMLP_VIDEO.LAYERS': [1, 1, 1, 1]})
    assert not [m for m in log_lines if 'accepted without effect' in m]


def test_a_read_posmlp_video_key_with_an_unrepresentable_value_is_refused_with_the_reason():
    cfg = _merged(VIDEO['configs'][_release_configs('PosMLP_Video')[0]], {'POSMLP_VIDEO': {'LAYERS': [1, 1, 1]}})
    with pytest.raises(ValueError, match='exactly 4 stages'):
        posmlp_video.official_cfg_to_ours(cfg)


# ---------------------------------------------------------------------- every release: unknown and ignored keys
def _one_known_typo(release):
    """A read key with its last letter doubled: not a key, and its closest known key is the original."""
    key = sorted(RELEASES[release]['read'])[0]
    return key, key + key[-1]


@pytest.mark.parametrize('release', sorted(RELEASES))
def test_an_unknown_key_is_refused_naming_the_closest_known_key(release):
    key, typo = _one_known_typo(release)
    with pytest.raises(ValueError) as err:
        checked_options(release, {typo: 1})
    msg = str(err.value)
    assert f'{typo!r} is not an option of the official' in msg and f'closest known option is {key!r}' in msg
    assert '\n' not in msg and msg.endswith('.')  # one sentence


@pytest.mark.parametrize('release', sorted(MAPPERS))
def test_every_mapper_refuses_unknown_keys_through_the_table(release):
    key, typo = _one_known_typo(release)
    bad = {typo: 1}
    if release == 'posmlp_video':
        section, _, leaf = typo.partition('.')
        bad = {section: {leaf: 1}} if leaf else bad
    with pytest.raises(ValueError, match='closest known option'):
        MAPPERS[release](bad)


@pytest.mark.parametrize('release', sorted(r for r in RELEASES if RELEASES[r]['ignored']))
def test_ignored_keys_give_exactly_one_info_line(release, log_lines):
    ignored = sorted(RELEASES[release]['ignored'])
    result = checked_options(release, {k: object() for k in ignored})
    lines = [m for m in log_lines if 'accepted without effect' in m]
    assert len(lines) == 1 and all(k in lines[0] for k in ignored)
    assert not set(result) & set(ignored)


def test_posmlp_and_wavemlp_accept_the_keys_their_official_models_ignore(log_lines):
    arch = dict(num_levels=4, embed_dims=[8, 16, 16, 16], depths=[1, 1, 2, 1], gamma=[2, 2, 2, 2],
                mlp_ratio=[2, 2, 2, 2], win_size=[7, 7, 7, 4], patch_size=7)
    assert posmlp.official_arch_to_ours(arch) == posmlp.official_arch_to_ours({**arch, 'patch_size': 4})
    wave = dict(layers=[1, 1, 1, 1], embed_dims=[8, 16, 16, 32], transitions=[True] * 4, mlp_ratios=[2] * 4)
    assert wave_mlp.official_arch_to_ours(wave) == wave_mlp.official_arch_to_ours(
        {**wave, 'img_size': 96, 'in_chans': 1, 'qk_scale': 0.5, 'attn_drop_rate': 0.3, 'drop_rate': 0.2, 'args': 1})
    messages = [m for m in log_lines if 'accepted without effect' in m]
    assert len(messages) == 3 and 'qk_scale' in messages[-1] and 'patch_size' in messages[0]


# ---------------------------------------------------------------------- timm gMLP: kwargs and weights, fp64
def test_timm_gmlp_kwargs_map_to_an_equal_model_fp64():
    import torch
    mixer = pytest.importorskip('timm.models.mlp_mixer')
    from mmposmlp.models.backbones.gmlp import GMLP
    kwargs = dict(num_classes=5, img_size=32, patch_size=8, num_blocks=2, embed_dim=16, mlp_ratio=6,
                  block_layer=mixer.SpatialGatingBlock, mlp_layer=mixer.GatedMlp)
    torch.manual_seed(0)
    ref = mixer.MlpMixer(**kwargs).double().eval()
    for p in ref.parameters():
        p.data.add_(torch.randn_like(p) * 0.02)
    ours = GMLP(**gmlp.timm_gmlp_kwargs_to_ours(kwargs)).double().eval()
    state = gmlp.convert_timm_gmlp(ref.state_dict())
    ours.load_state_dict({k[9:]: v for k, v in state.items() if k.startswith('backbone.')}, strict=True)
    x = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    with torch.no_grad():
        want = ref.forward_features(x)  # (B, N, C) after the final norm
        got = ours(x)[-1].flatten(2).transpose(1, 2)
    assert (want - got).abs().max().item() < 1e-10


@pytest.mark.parametrize('key,value,words', [
    ('block_layer', 'MixerBlock', 'not a gMLP part'),
    ('mlp_ratio', (0.5, 4.0), 'pair'),
    ('stem_norm', True, 'stem_norm'),
    ('drop_path_rate', 0.1, 'linearly'),
    ('norm_layer', 'nn.BatchNorm1d', 'norm_layer'),
])
def test_timm_gmlp_values_our_model_cannot_represent_are_refused(key, value, words):
    kwargs = dict(num_blocks=2, embed_dim=16, mlp_ratio=6, block_layer='SpatialGatingBlock', mlp_layer='GatedMlp')
    with pytest.raises(ValueError, match=words):
        gmlp.timm_gmlp_kwargs_to_ours({**kwargs, key: value})


# ---------------------------------------------------------------------- DeiT (timm VisionTransformer) -> CPVT, fp64
def _deit_ref(**extra):
    import functools
    import torch
    vit = pytest.importorskip('timm.models.vision_transformer')
    kwargs = dict(img_size=32, patch_size=8, embed_dim=16, depth=2, num_heads=2, num_classes=5, qkv_bias=True,
                  norm_layer=functools.partial(torch.nn.LayerNorm, eps=1e-6), **extra)
    torch.manual_seed(0)
    ref = vit.VisionTransformer(**kwargs).double().eval()
    for p in ref.parameters():
        p.data.add_(torch.randn_like(p) * 0.02)
    return kwargs, ref


def test_deit_kwargs_and_weights_map_to_an_equal_cpvt_fp64():
    import torch
    from mmposmlp.models.backbones.cpvt import CPVT
    kwargs, ref = _deit_ref()
    ours = CPVT(**cpvt.deit_kwargs_to_ours(kwargs)).double().eval()
    ours.load_state_dict(cpvt.convert_deit(ref.state_dict()), strict=True)
    x = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    with torch.no_grad():
        want = ref.forward_head(ref.forward_features(x), pre_logits=True)  # the class token after the norm
        got = ours(x)[-1]
    assert want.abs().max() > 0.1 and (want - got).abs().max().item() < 1e-10


def test_a_deit_file_loads_into_cpvt_through_init_cfg(tmp_path):
    import torch
    from mmposmlp.models.backbones.cpvt import CPVT
    kwargs, ref = _deit_ref()
    path = str(tmp_path / 'deit.pth')
    torch.save({'model': ref.float().state_dict()}, path)  # the DeiT release's file layout
    ours = CPVT(**cpvt.deit_kwargs_to_ours(kwargs), init_cfg=dict(type='Pretrained', checkpoint=path))
    ours.init_weights()
    assert torch.equal(ours.abs_pos_embed.pos_embed, ref.pos_embed.float())
    assert torch.equal(ours.layers[1].ffn.fc2.weight, ref.blocks[1].mlp.fc2.weight.float())


@pytest.mark.parametrize('key,value,words', [
    ('init_values', 1e-5, 'LayerScale'),
    ('class_token', False, 'no class token'),
    ('reg_tokens', 4, 'register tokens'),
    ('pos_drop_rate', 0.1, 'one drop_rate'),
    ('block_fn', 'ParallelScalingBlock', 'block_fn'),
])
def test_deit_values_cpvt_cannot_represent_are_refused(key, value, words):
    with pytest.raises(ValueError, match=words):
        cpvt.deit_kwargs_to_ours({'embed_dim': 16, 'depth': 2, 'num_heads': 2, key: value})


# ---------------------------------------------------------------------- DeiT's distilled models -> CPVT + DeiTClsHead
_TINY_DISTILLED = dict(img_size=32, patch_size=8, embed_dim=16, depth=2, num_heads=2, num_classes=5, qkv_bias=True,
                       mlp_ratio=4)


def test_distilled_deit_options_and_file_map_to_an_equal_classifier_fp64():
    """timm's port of the release's DistilledVisionTransformer (same parameters, same eval output: the mean of
    both heads) against CPVT + mmpretrain DeiTClsHead built from the mapped options and the converted file."""
    import functools
    import torch
    deit = pytest.importorskip('timm.models.deit')
    from mmpretrain.models import ImageClassifier
    kwargs = dict(_TINY_DISTILLED, norm_layer=functools.partial(torch.nn.LayerNorm, eps=1e-6))
    torch.manual_seed(0)
    ref = deit.VisionTransformerDistilled(**kwargs).double().eval()
    for p in ref.parameters():
        p.data.add_(torch.randn_like(p) * 0.02)
    backbone, head = cpvt.deit_distilled_kwargs_to_ours({**kwargs, 'norm_layer': 'partial(nn.LayerNorm, eps=1e-6)'})
    model = ImageClassifier(backbone=dict(type='mmposmlp.CPVT', **backbone),
                            head=dict(type='DeiTClsHead', **head)).double().eval()
    assert cpvt.is_deit_distilled(ref.state_dict())
    model.load_state_dict(cpvt.convert_deit_distilled(ref.state_dict()), strict=True)
    x = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    with torch.no_grad():
        want, got = ref(x), model(x, mode='tensor')
    assert want.abs().max() > 0.01 and (want - got).abs().max().item() < 1e-10


def test_a_distilled_constructor_adds_its_own_options_and_its_file():
    backbone, head = cpvt.deit_distilled_kwargs_to_ours({'num_classes': 10, 'drop_path_rate': 0.1},
                                                        constructor='deit_tiny_distilled_patch16_224')
    assert backbone['arch'] == dict(embed_dims=192, num_layers=12, num_heads=3, feedforward_channels=768)
    assert backbone['norm_cfg'] == dict(type='LN', eps=1e-6) and backbone['with_dist_token']
    assert backbone['drop_path_rate'] == 0.1 and head == dict(num_classes=10, in_channels=192)
    assert 'init_cfg' not in backbone
    backbone, _ = cpvt.deit_distilled_kwargs_to_ours({'pretrained': True}, constructor='deit_base_distilled_patch16_384')
    assert backbone['img_size'] == 384 and backbone['init_cfg'] == dict(
        type='Pretrained', checkpoint='https://dl.fbaipublicfiles.com/deit/deit_base_distilled_patch16_384-d0272ac0.pth')
    # the release's own default norm (nn.LayerNorm) keeps its eps; no classes, no head
    backbone, head = cpvt.deit_distilled_kwargs_to_ours(dict(_TINY_DISTILLED, num_classes=0))
    assert backbone['norm_cfg']['eps'] == 1e-5 and head is None


@pytest.mark.parametrize('kwargs,constructor,words', [
    ({'embed_dim': 64}, 'deit_tiny_distilled_patch16_224', r"sets \['embed_dim'\] itself"),
    ({}, 'deit_tiny_distiled_patch16_224', "closest is 'deit_tiny_distilled_patch16_224'"),
    ({'pretrained': True}, None, 'pretrained=True loads the file of one constructor'),
    (dict(_TINY_DISTILLED, hybrid_backbone='resnet'), None, 'HybridEmbed'),
    (dict(_TINY_DISTILLED, qk_scale=0.5), None, 'qk_scale=0.5'),
    (dict(_TINY_DISTILLED, norm_layer='nn.BatchNorm1d'), None, 'norm_layer'),
    (dict(_TINY_DISTILLED, qk_sclae=0.5), None, "closest known option is 'qk_scale'"),
])
def test_distilled_deit_values_cpvt_cannot_represent_are_refused_in_one_sentence(kwargs, constructor, words):
    with pytest.raises(ValueError, match=words) as err:
        cpvt.deit_distilled_kwargs_to_ours(kwargs, constructor=constructor)
    assert '\n' not in str(err.value)


def test_distilled_qk_scale_equal_to_the_default_converts():
    backbone, _ = cpvt.deit_distilled_kwargs_to_ours(dict(_TINY_DISTILLED, qk_scale=(16 // 2) ** -0.5))
    assert backbone == cpvt.deit_distilled_kwargs_to_ours(_TINY_DISTILLED)[0]


# ---------------------------------------------------------------------- LVT rasa_cfg: rows of the table
def test_lvt_rasa_cfg_keys_are_rows_of_the_table():
    rows = {k for k in RELEASES['lvt']['read'] if k.startswith('rasa_cfg.')}
    assert rows == {'rasa_cfg.atrous_rates', 'rasa_cfg.act_layer', 'rasa_cfg.init', 'rasa_cfg.r_num'}
    checked = checked_options('lvt', {'rasa_cfg': {'r_num': 3, 'atrous_rates': [1, 3]}})
    assert checked['rasa_cfg.r_num'] == 3 and checked['rasa_cfg.init'] == 'kaiming'


def _lvt_arch(**rasa):
    return dict(layers=[1, 1, 1, 1], embed_dims=[8, 16, 16, 16], num_heads=[1, 2, 2, 2], mlp_ratios=[2, 2, 2, 2],
                mlp_depconv=[False, True, True, True], with_cls_head=False, rasa_cfg=rasa or None)


def test_lvt_rasa_cfg_rows_are_mapped():
    backbone, _ = lvt.official_lvt_kwargs(_lvt_arch(atrous_rates=[1, 3], act_layer='nn.GELU()', init='dirac',
                                                    r_num=2))
    assert backbone['rasa_recursions'] == 2 and backbone['atrous_rates'] == [1, 3]
    assert backbone['atrous_act_cfg'] == dict(type='GELU')


def test_an_unknown_rasa_cfg_key_is_refused_naming_the_closest_row():
    with pytest.raises(ValueError) as err:
        lvt.official_lvt_kwargs(_lvt_arch(atrous_rates=[1], r_nums=2))
    msg = str(err.value)
    assert "'rasa_cfg.r_nums' is not an option of the official lite_vision_transformer" in msg
    assert "rasa_cfg key 'r_nums' is not known" in msg and "closest known option is 'rasa_cfg.r_num'" in msg


# ---------------------------------------------------------------------- the converter script with a release config
def test_posmlp_video_converter_checks_against_a_release_style_yaml(tmp_path):
    """``--official-cfg`` reads a yaml config in the release's layout (with keys PosMLP_Video ignores, as
    the release's configs have) and verifies the converted weights against the model it describes."""
    import torch
    import yaml
    from toolcfg import load_tool
    tool = load_tool('tools/model_converters/posmlp_video2mmposmlp.py')
    d = torch.load(osp.join(DATA, 'posmlp_video_options.pt'), weights_only=False)
    case = d['cases']['shift_true']
    cfg = _merged(json.loads(case['arch_json']), {'POSMLP_VIDEO': {'T_STRIDE': 4, 'MLP_RATIOS': [3, 3, 3, 3]},
                                                  'MODEL': {'MODEL_NAME': 'PosMLP_Video'}, 'SOLVER': {'BASE_LR': 1e-3}})
    (tmp_path / 'cfg.yaml').write_text(yaml.safe_dump(cfg))
    src, dst = tmp_path / 'official.pth', tmp_path / 'ours.pth'
    torch.save({'model_state': case['state_dict']}, src)
    tool.main([str(src), str(dst), '--official-cfg', str(tmp_path / 'cfg.yaml')])
    assert torch.load(dst, weights_only=True)['state_dict']
    cfg['POSMLP_VIDEO']['EMBED_DIMS'] = [d * 2 for d in cfg['POSMLP_VIDEO']['EMBED_DIMS']]
    (tmp_path / 'cfg.yaml').write_text(yaml.safe_dump(cfg))
    from mmposmlp.models.checkpoints import CheckpointMismatchError
    with pytest.raises(CheckpointMismatchError, match='shape'):
        tool.main([str(src), str(dst), '--official-cfg', str(tmp_path / 'cfg.yaml')])


def test_converters_never_import_the_backbones():
    """Backbones import their converter at module level; the converters stay below them (no circle)."""
    import ast
    import glob
    root = osp.join(osp.dirname(DATA), '..', 'mmposmlp', 'models', 'converters')
    paths = glob.glob(osp.join(root, '*.py'))
    assert len(paths) >= 8
    for path in paths:
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.ImportFrom):
                assert 'backbones' not in (node.module or ''), f'{path}:{node.lineno} imports a backbone'
            elif isinstance(node, ast.Import):
                assert not any('backbones' in a.name for a in node.names), f'{path}:{node.lineno}'
