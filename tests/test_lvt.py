"""LVT (Lite Vision Transformer) and its IMLP host: exact conversion of official models (fp64), the converter CLI,
option validation, the configs of IMLP Table 1's "Portable ViT" rows with their params / FLOPs.

The official vectors (tests/data/lvt_options.pt, lvt_full.pt; README_lvt.md says how they were made) come from
the official code with random weights; no official code is imported here.
"""
import functools
import json
import math
import os.path as osp

import pytest
import torch

from mmposmlp.models.backbones.lvt import LVT
from mmposmlp.models.converters.lvt import convert_official_lvt, official_lvt_kwargs
from mmposmlp.models.heads import LVTClassAttentionHead
from mmposmlp.models.checkpoints import CheckpointMismatchError
from toolcfg import load_tool

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
DATA = osp.join(ROOT, 'tests', 'data')
CFG_DIR = osp.join(ROOT, 'configs', 'imlp')

# IMLP paper Table 1, "Portable ViT": (params M, GFLOPs), reported
TABLE1 = {
    'lvt-r1': (5.52, 0.76), 'lvt-r2': (5.52, 0.84), 'lvt-r3': (5.52, 0.92), 'lvt-r4': (5.52, 1.00),
    'lvt-r1-imlp': (4.98, 0.68), 'lvt-r2-imlp': (4.98, 0.76), 'lvt-r3-imlp': (4.98, 0.84), 'lvt-r4-imlp': (4.98, 0.92),
}
SMALL = dict(depths=[1, 1, 1, 1], embed_dims=[8, 8, 16, 32], num_heads=[2, 2, 2, 4], mlp_ratios=[4, 8, 4, 4],
             depthwise_mlp=[False, True, True, True], sr_ratios=[8, 4, 2, 1], sa_layers=['csa', 'rasa', 'rasa', 'rasa'])
IMLP5 = dict(type='mmposmlp.IMLP', expansion_ratio=2, kernel_size=5)


@pytest.fixture(scope='module')
def options():
    return torch.load(osp.join(DATA, 'lvt_options.pt'), weights_only=True)


def _official_arch(case):
    arch = json.loads(case['arch_json'])
    kind = arch.pop('kind')
    if kind == 'dense':
        arch['with_cls_head'] = False
    return arch


def _build(arch, converted, dtype=torch.float64):
    bk, hk = official_lvt_kwargs(arch)
    backbone = LVT(**bk)
    backbone.load_state_dict({k[9:]: v for k, v in converted.items() if k.startswith('backbone.')}, strict=True)
    head = None
    if hk is not None:
        head = LVTClassAttentionHead(**hk)
        head.load_state_dict({k[5:]: v for k, v in converted.items() if k.startswith('head.')}, strict=True)
        head.to(dtype).eval()
    return backbone.to(dtype).eval(), head


def _run(backbone, head, x):
    with torch.no_grad():
        feats = backbone(x)
        return head(feats) if head is not None else torch.cat([f.flatten(1) for f in feats], 1)


# ----------------------------------------------------------------------------- exact conversion
@pytest.mark.parametrize('name', ['cls_r3', 'cls_r1_no_atrous', 'dense_sa_rates_1_2_dirac_qk_scale'])
def test_official_small_models_convert_exactly(options, name):
    case = options['cases'][name]
    converted = convert_official_lvt(case['state_dict'])
    for dtype, ref, tol in ((torch.float64, case['outputs_fp64'], 1e-10), (torch.float32, case['outputs_fp32'], 1e-4)):
        backbone, head = _build(_official_arch(case), converted, dtype)
        for x, r in zip(options['inputs'], ref):
            out = _run(backbone, head, x.to(dtype))
            assert out.shape == r.shape
            err = (out.double() - r.double()).abs().max().item()
            assert err < tol, f'{name} {dtype}: max |ours - official| = {err:.3g}'


def _regenerate(keys, seed):
    """The README_lvt.md randomisation of the official state dict, in its key order."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for k, shape in keys:
        if len(shape) >= 2:
            out[k] = torch.randn(shape, generator=g) * (1.0 / math.sqrt(math.prod(shape[1:])))
        elif k.endswith('weight'):
            out[k] = torch.rand(shape, generator=g) + 0.5
        else:
            out[k] = torch.randn(shape, generator=g) * 0.1
    return out


@pytest.mark.parametrize("r", [1, 2, 3, 4])
def test_full_size_official_lvt_cls_converts_exactly_fp64(r):
    full = torch.load(osp.join(DATA, 'lvt_full.pt'), weights_only=True)
    case = full['cases'][f'lvt_cls_r{r}']
    state = _regenerate(case['keys'], case['seed'])
    bad = [k for k, v in state.items() if not math.isclose(float(v.double().sum()), case['sums'][k], rel_tol=1e-9,
                                                           abs_tol=1e-9)]
    assert not bad, f'the regenerated weights differ from the generator\'s (torch RNG changed?): {bad[:3]}'
    arch = dict(layers=[2, 2, 2, 2], embed_dims=[64, 64, 160, 256], num_heads=[2, 2, 5, 8], mlp_ratios=[4, 8, 4, 4],
                mlp_depconv=[False, True, True, True], sr_ratios=[8, 4, 2, 1],
                sa_layers=['csa', 'rasa', 'rasa', 'rasa'], rasa_cfg=case['rasa_cfg'], post_layers=['ca', 'ca'])
    backbone, head = _build(arch, convert_official_lvt(state))
    assert sum(p.numel() for p in backbone.parameters()) + sum(p.numel() for p in head.parameters()) == \
        case['num_params'] == 5521844
    # the default arch is the released one; its backbone alone is the official README's "3.4M backbone params"
    assert backbone.arch_settings == LVT(rasa_recursions=r).arch_settings
    assert sum(p.numel() for p in backbone.parameters()) == 3429092
    g = torch.Generator().manual_seed(full['input_seed'])
    inputs = [torch.randn(s, generator=g) for s in full['input_shapes']]
    for x, ref in zip(inputs, case['outputs_fp64']):
        err = (_run(backbone, head, x.double()) - ref).abs().max().item()
        assert err < 1e-12, f'R={r}: max |ours - official| = {err:.3g}'


# ----------------------------------------------------------------------------- converter CLI and init_cfg
def _cli():
    return load_tool('tools', 'model_converters', 'lvt2mmposmlp.py')


def test_converter_cli_takes_the_ema_weights_of_a_timm_checkpoint_unless_told(options, tmp_path):
    case = options['cases']['cls_r3']
    plain = case['state_dict']
    ema = {k: v + 1 if v.is_floating_point() else v for k, v in plain.items()}
    src = tmp_path / 'lvt.pth.tar'
    torch.save({'epoch': 3, 'arch': 'lvt_cls', 'state_dict': {'module.' + k: v for k, v in ema.items()},
                'state_dict_ema': plain}, src)
    cli = _cli()
    cli.main([str(src), str(tmp_path / 'ema.pth')])
    cli.main([str(src), str(tmp_path / 'plain.pth'), '--no-ema'])
    got_ema = torch.load(tmp_path / 'ema.pth', weights_only=True)
    got_plain = torch.load(tmp_path / 'plain.pth', weights_only=True)
    assert got_ema['meta']['converter'] == 'lvt2mmposmlp'
    backbone, head = _build(_official_arch(case), got_ema['state_dict'])
    x = options['inputs'][0].double()
    assert (_run(backbone, head, x) - case['outputs_fp64'][0]).abs().max() < 1e-10
    k = 'head.fc.weight'
    assert torch.equal(got_plain['state_dict'][k], convert_official_lvt(ema)[k])


def test_converter_cli_converts_the_backbone_of_a_whole_segmentor_and_keeps_the_rest(options, tmp_path):
    case = options['cases']['dense_sa_rates_1_2_dirac_qk_scale']
    state = {'backbone.' + k: v for k, v in case['state_dict'].items()}
    state['decode_head.conv_seg.weight'] = torch.zeros(3, 4, 1, 1)
    torch.save({'meta': {'epoch': 1}, 'state_dict': state}, tmp_path / 'seg.pth')
    _cli().main([str(tmp_path / 'seg.pth'), str(tmp_path / 'out.pth')])
    out = torch.load(tmp_path / 'out.pth', weights_only=True)['state_dict']
    assert 'decode_head.conv_seg.weight' in out and 'backbone.norm3.weight' in out
    backbone, _ = _build(_official_arch(case), out)
    ref = torch.cat([r.flatten(1) for r in case['outputs_fp64'][:1]], 1)
    assert (_run(backbone, None, options['inputs'][0].double()) - ref).abs().max() < 1e-10


def test_converter_refuses_unknown_keys_and_the_plain_lvt_classifier_in_one_sentence(options):
    sd = dict(options['cases']['cls_r3']['state_dict'])
    sd['backbone.1.1.0.attn.extra.weight'] = torch.zeros(1)
    with pytest.raises(KeyError, match=r"unexpected key 'backbone\.1\.1\.0\.attn\.extra\.weight'"):
        convert_official_lvt(sd)
    plain = {k: v for k, v in options['cases']['cls_r3']['state_dict'].items()
             if not k.startswith(('post_network', 'cls_token', 'aux_head'))}
    with pytest.raises(ValueError, match='plain lvt classifier') as err:
        convert_official_lvt(plain)
    assert '\n' not in str(err.value)
    with pytest.raises(ValueError, match='not an official LVT state dict'):
        convert_official_lvt({'stages.0.weight': torch.zeros(1)})


def test_init_cfg_loads_an_official_dense_checkpoint_exactly_and_refuses_a_wrong_arch(options, tmp_path):
    case = options['cases']['dense_sa_rates_1_2_dirac_qk_scale']
    path = tmp_path / 'dense.pth'
    torch.save({'state_dict': case['state_dict']}, path)
    bk, _ = official_lvt_kwargs(_official_arch(case))
    m = LVT(**bk, init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    m.init_weights()
    ref = torch.cat([r.flatten(1) for r in case['outputs_fp64'][:1]], 1)
    assert (_run(m.double().eval(), None, options['inputs'][0].double()) - ref).abs().max() < 1e-10
    bk['arch']['embed_dims'] = [8, 8, 16, 16]
    bk['arch']['num_heads'] = [2, 2, 2, 2]
    wrong = LVT(**bk, init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    with pytest.raises(CheckpointMismatchError, match='have another shape'):
        wrong.init_weights()


# ----------------------------------------------------------------------------- options
@pytest.mark.parametrize('kwargs, message', [
    (dict(rasa_recursions=0), 'rasa_recursions is the number R of RASA recursions, an int >= 1'),
    (dict(rasa_recursions=True), 'rasa_recursions is the number R'),
    (dict(rasa_recursions=2.0), 'rasa_recursions is the number R'),
    (dict(atrous_rates=()), 'atrous_rates must be a non-empty sequence of positive ints'),
    (dict(atrous_rates=(1, 0)), 'atrous_rates must be'),
    (dict(atrous_rates=3), 'atrous_rates must be'),
    (dict(arch='lvt-s'), r"unknown arch 'lvt-s'; choose one of \['lvt'\]"),
    (dict(arch=dict(SMALL, sa_layers=['csa', 'rasa', 'rasa', 'attn'])), r"sa_layers 'attn' is not one of"),
    (dict(arch={k: v for k, v in SMALL.items() if k != 'sr_ratios'}), r"missing \['sr_ratios'\]"),
    (dict(arch=dict(SMALL, depths=[1, 1, 1])), 'one value per stage'),
    (dict(ffn_cfg='IMLP'), 'ffn_cfg must be None'),
    (dict(ffn_cfg=dict(type='NoSuchFFN')), "ffn_cfg type 'NoSuchFFN' is not registered in mmposmlp"),
    (dict(out_indices=(4, )), r'out_indices must be in \[-4, 4\)'),
    (dict(frozen_stages=5), r'frozen_stages must be in \[-1, 4\]'),
])
def test_options_are_checked_in_one_sentence(kwargs, message):
    kwargs.setdefault('arch', SMALL)
    with pytest.raises(ValueError, match=message) as err:
        LVT(**kwargs)
    assert '\n' not in str(err.value)


@pytest.mark.parametrize('change, message', [
    (dict(window=7), "'window' is not an option of the official lite_vision_transformer"),
    (dict(rasa_cfg=dict(r_num=2, atrous_rates=[1], act_layer='nn.SiLU(True)', init='kaiming', gamma=1)),
     "rasa_cfg key 'gamma' is not known"),
    (dict(rasa_cfg=dict(r_num=2, atrous_rates=[1], act_layer='nn.Mish()', init='kaiming')),
     "act_layer 'nn.Mish\\(\\)' is not supported"),
    (dict(rasa_cfg=None), "sa_layers use 'rasa' but rasa_cfg is None"),
    (dict(post_layers=['ca', 'sa']), "post_layers \\['ca', 'sa'\\] are not all 'ca'"),
    (dict(norm_layer='nn.BatchNorm2d'), 'norm_layer'),
])
def test_official_options_are_mapped_or_refused_in_one_sentence(options, change, message):
    arch = _official_arch(options['cases']['cls_r3'])
    arch.update(change)
    with pytest.raises(ValueError, match=message) as err:
        official_lvt_kwargs(arch)
    assert '\n' not in str(err.value)
    # the accepted no-op options map to nothing
    arch = _official_arch(options['cases']['cls_r3'])
    assert official_lvt_kwargs(dict(arch, patch_size=8, drop_rate=0.3)) == official_lvt_kwargs(arch)


# ----------------------------------------------------------------------------- toy build / forward / train
def test_toy_lvt_imlp_dense_outputs_frozen_stages_and_a_training_step():
    torch.manual_seed(0)
    m = LVT(arch=SMALL, ffn_cfg=IMLP5, out_indices=(0, 1, 2, 3), out_norm=True, frozen_stages=2,
            drop_path_rate=0.1)
    m.init_weights()
    outs = m(torch.randn(2, 3, 64, 48))
    assert [tuple(o.shape) for o in outs] == [(2, 8, 16, 12), (2, 8, 8, 6), (2, 16, 4, 3), (2, 32, 2, 2)]
    assert m.out_channels == [8, 8, 16, 32]
    frozen = [n for n, p in m.named_parameters() if not p.requires_grad]
    assert frozen and all(n.startswith(('stages.0.', 'stages.1.', 'norm0.', 'norm1.')) for n in frozen)
    assert all(p.requires_grad for n, p in m.named_parameters() if n.startswith(('stages.2.', 'norm2.')))
    assert sum(type(b.mlp).__name__ == 'IMLP' for s in m.stages for b in s.blocks) == 4
    m.train()
    assert not m.stages[0].training and m.stages[2].training

    from mmpretrain.structures import DataSample
    backbone = LVT(arch=SMALL, ffn_cfg=IMLP5, rasa_recursions=3)
    head = LVTClassAttentionHead(num_classes=5, in_channels=32, num_heads=4, ffn_cfg=IMLP5)
    backbone.init_weights(), head.init_weights()
    samples = [DataSample().set_gt_label(i) for i in (1, 4)]
    losses = head.loss(backbone(torch.randn(2, 3, 64, 64)), samples)
    assert set(losses) == {'loss_cls', 'loss_dense'}
    sum(losses.values()).backward()
    no_grad = [n for mod in (backbone, head) for n, p in mod.named_parameters() if p.grad is None]
    assert not no_grad, f'parameters without a gradient (DDP would fail): {no_grad}'
    backbone.eval(), head.eval()
    pred = head.predict(backbone(torch.randn(3, 3, 64, 64)))
    assert len(pred) == 3 and pred[0].pred_score.shape == (5, )


# ----------------------------------------------------------------------------- configs and Table 1
CONFIGS = [f'lvt-r{r}{v}_8xb128_in1k.py' for r in (1, 2, 3, 4) for v in ('', '-imlp')]


@functools.lru_cache(maxsize=None)  # the params and FLOPs tests share the builds
def _model_from_config(name):
    from mmengine.config import Config
    from mmengine.registry import DefaultScope
    from mmpretrain.registry import MODELS
    cfg = Config.fromfile(osp.join(CFG_DIR, name))
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        return MODELS.build(cfg.model), cfg


def test_every_portable_vit_row_has_a_config_differing_only_in_r_and_the_ffn():
    import glob
    from mmengine.config import Config
    assert sorted(osp.basename(p) for p in glob.glob(osp.join(CFG_DIR, 'lvt-*.py'))) == sorted(CONFIGS)
    base = Config.fromfile(osp.join(CFG_DIR, 'lvt-r2_8xb128_in1k.py')).to_dict()
    for r in (1, 2, 3, 4):
        plain = Config.fromfile(osp.join(CFG_DIR, f'lvt-r{r}_8xb128_in1k.py')).to_dict()
        imlp = Config.fromfile(osp.join(CFG_DIR, f'lvt-r{r}-imlp_8xb128_in1k.py')).to_dict()
        assert plain['model']['backbone']['rasa_recursions'] == r
        assert imlp['model']['backbone'].pop('ffn_cfg') == imlp['model']['head'].pop('ffn_cfg') == IMLP5
        assert imlp == plain
        plain['model']['backbone']['rasa_recursions'] = 2
        assert plain == base


@pytest.mark.parametrize('name', CONFIGS)
def test_config_params_match_table1(name):
    model, _ = _model_from_config(name)
    params = sum(p.numel() for p in model.parameters()) / 1e6
    paper = TABLE1[name.split('_')[0]][0]
    # LVT: the released lvt_cls, exactly 5,521,844; + IMLP*: 4.954M, 0.5% under the paper (README: "LVT hosts")
    assert abs(params / paper - 1) < 0.01, f'{name}: {params:.3f}M vs paper {paper}M'


def _paper_convention_gflops(model):
    """fvcore FLOPs without the attention matmuls and RASA's functional atrous convs (the module-hook
    convention that reproduces Table 1's LVT figures)."""
    from fvcore.nn import FlopCountAnalysis

    class Whole(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m.head(self.m.backbone(x))

    fca = FlopCountAnalysis(Whole(model).eval(), torch.randn(1, 3, 224, 224))
    fca.unsupported_ops_warnings(False), fca.uncalled_modules_warnings(False)
    ops = fca.by_operator()
    atrous = sum(v for k, v in fca.by_module().items() if k.endswith('attn.atrous'))
    return (fca.total() - ops.get('matmul', 0) - ops.get('bmm', 0) - atrous) / 1e9


@pytest.mark.parametrize('name', [n if n.startswith(('lvt-r1', 'lvt-r4')) else pytest.param(n, marks=pytest.mark.slow)
                                  for n in CONFIGS])
def test_config_flops_match_table1_in_the_papers_counting(name):
    model, _ = _model_from_config(name)
    ours = _paper_convention_gflops(model)
    paper = TABLE1[name.split('_')[0]][1]
    # LVT rows: 0.760 / 0.841 / 0.922 / 1.003 vs 0.76 / 0.84 / 0.92 / 1.00; + IMLP*: 1.3-2.2% under the paper
    tol = 0.01 if 'imlp' not in name else 0.025
    assert abs(ours / paper - 1) < tol, f'{name}: {ours:.3f}G vs paper {paper}G'


# ----------------------------------------------------------------------------- MixToken (official training forward)
def test_mix_token_training_step_matches_the_official_forward_and_loss(options, monkeypatch):
    """The official lvt_cls training forward (MixToken box, class logits, token logits flipped back) and its
    TokenLabelCrossEntropy with image-level smoothed targets, float64, for boxes given by the official RNG."""
    from mmpretrain.structures import DataSample
    vec = options['train_mix_token']
    case = options['cases'][vec['case']]
    bk, hk = official_lvt_kwargs(_official_arch(case))
    backbone = LVT(**bk, mix_token=True)
    head = LVTClassAttentionHead(**hk, loss=dict(type='LabelSmoothLoss', label_smooth_val=vec['smoothing'],
                                                 mode='original'),
                                 cls_weight=vec['cls_weight'], dense_weight=vec['dense_weight'])
    converted = convert_official_lvt(case['state_dict'])
    backbone.load_state_dict({k[9:]: v for k, v in converted.items() if k.startswith('backbone.')})
    head.load_state_dict({k[5:]: v for k, v in converted.items() if k.startswith('head.')})
    backbone.double().train(), head.double().train()
    x = torch.randn(vec['input_shape'], generator=torch.Generator().manual_seed(vec['input_seed']),
                    dtype=torch.float64)
    samples = [DataSample().set_gt_label(int(t)) for t in vec['labels']]
    for run in vec['runs']:
        box = tuple(run['box'])  # official (bbx1, bby1, bbx2, bby2): rows bbx, columns bby
        monkeypatch.setattr(backbone, '_draw_mix_box', lambda rows, cols, box=box: box)
        feats = backbone(x)
        assert feats.mix_box == box and feats.mix_grid == (4, 4)
        cls_logits, aux = head.forward_train(feats)
        assert (cls_logits - run['x_cls']).abs().max() < 1e-10
        unmixed = aux.reshape(4, 4, 4, -1).clone()
        r1, c1, r2, c2 = box
        unmixed[:, r1:r2, c1:c2] = unmixed.flip(0)[:, r1:r2, c1:c2]
        assert (unmixed.reshape(aux.shape) - run['x_aux']).abs().max() < 1e-10
        losses = head.loss(feats, samples)
        assert abs(float(sum(losses.values())) - run['loss']) < 1e-10, (box, losses, run['loss'])
    # without a box (evaluation, or mix_token=False) the loss is the plain one: no flipping, no label mixing
    backbone.mix_token = False
    plain = head.loss(backbone(x), samples)
    assert abs(float(sum(plain.values())) - vec['runs'][1]['loss']) < 1e-6  # run 1 has an empty box


def test_mix_token_draws_boxes_inside_the_grid_and_mixes_only_them():
    torch.manual_seed(0)
    m = LVT(arch=SMALL, mix_token=True).train()
    x = torch.randn(3, 32, 32, 8)
    areas = set()
    for _ in range(40):
        mixed, (box, grid) = m._mix_tokens(x)
        r1, c1, r2, c2 = box
        assert grid == (4, 4) and 0 <= r1 <= r2 <= 4 and 0 <= c1 <= c2 <= 4
        inside = torch.zeros(32, 32, dtype=torch.bool)
        inside[8 * r1:8 * r2, 8 * c1:8 * c2] = True
        assert torch.equal(mixed[:, inside], x.flip(0)[:, inside]) and torch.equal(mixed[:, ~inside], x[:, ~inside])
        areas.add((r2 - r1) * (c2 - c1))
    assert len(areas) > 1
    with pytest.raises(ValueError, match='train at input sizes divisible by 32'):
        m(torch.randn(2, 3, 48, 48))
    assert not isinstance(m.eval()(torch.randn(1, 3, 64, 64)), type(m.train()(torch.randn(1, 3, 64, 64))))


def test_imlp_config_trains_with_mix_token_in_mmpretrains_classifier():
    """lvt-r2-imlp's model as the Runner builds it (small arch): train_step through the data preprocessor,
    MixToken features, the head's loss and AdamW; every parameter gets a gradient."""
    from mmengine.config import Config
    from mmposmlp.testing import build_model_from_cfg, train_iterations
    cfg = Config.fromfile(osp.join(CFG_DIR, 'lvt-r2-imlp_8xb128_in1k.py'))
    assert cfg.model.backbone.mix_token is True
    cfg.model.backbone.arch = dict(SMALL, embed_dims=[8, 8, 16, 16], num_heads=[2, 2, 2, 2])
    cfg.model.head.update(in_channels=16, num_heads=2, num_classes=1000)
    model, scope = build_model_from_cfg(cfg)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    torch.manual_seed(1)  # 128x128: a 4x4 last grid, where MixToken boxes can be non-empty
    losses = train_iterations(model, scope, iters=2, shape=(128, 128))
    assert all(math.isfinite(v) for v in losses)
    unchanged = [n for n, p in model.named_parameters() if torch.equal(before[n], p.detach())]
    assert not unchanged, f'parameters not updated: {unchanged[:5]}'


def test_plain_lvt_checkpoint_initialises_lvt_imlp_but_its_ffns(options, tmp_path):
    """An official LVT checkpoint into LVT + IMLP: everything but the FFNs loads, the host FFN keys are left
    unused and the IMLP keys keep their initialisation (reported); a checkpoint lacking other weights raises."""
    case = options['cases']['dense_sa_rates_1_2_dirac_qk_scale']
    path = tmp_path / 'dense.pth'
    torch.save({'state_dict': case['state_dict']}, path)
    bk, _ = official_lvt_kwargs(_official_arch(case))
    plain = LVT(**bk, init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    plain.init_weights()
    torch.manual_seed(0)
    m = LVT(**bk, ffn_cfg=IMLP5, init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    m.init_weights()
    rep = m.ffn_load_report
    assert rep['new_ffn_keys'] and all('.mlp.' in k for k in rep['new_ffn_keys'] + rep['dropped_host_ffn_keys'])
    assert {k.rsplit('.', 1)[0].rsplit('.', 1)[0] for k in rep['dropped_host_ffn_keys']} >= {
        'stages.1.blocks.0.mlp'}
    own, ref = m.state_dict(), plain.state_dict()
    shared = [k for k in own if '.mlp.' not in k]
    assert shared and all(torch.equal(own[k], ref[k]) for k in shared)
    fc1 = own['stages.0.blocks.0.mlp.fc1.weight']
    assert fc1.std() < 0.03 and not torch.equal(fc1, torch.zeros_like(fc1))  # IMLP's trunc-normal(0.02) init
    broken = dict(case['state_dict'])
    del broken['backbone.0.0.proj.weight']
    torch.save({'state_dict': broken}, path)
    with pytest.raises(CheckpointMismatchError, match='missing 1 weights'):
        LVT(**bk, ffn_cfg=IMLP5, init_cfg=dict(type='Pretrained', checkpoint=str(path))).init_weights()
