"""Every checkpoint wrapper the official training scripts write, through ``init_cfg`` and the
converter CLIs: EMA weights preferred (with a switch), no key dropped silently."""
import json
import os
import os.path as osp

import pytest
import torch

from mmposmlp.models.checkpoints import CheckpointMismatchError, extract_state_dict, load_checkpoint_file
from toolcfg import load_tool

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
DATA = osp.join(ROOT, 'tests', 'data')


def _weights():
    return {'a.weight': torch.ones(2, 2), 'a.bias': torch.zeros(2)}


def _ema():
    return {k: v + 1 for k, v in _weights().items()}


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# one per wrapper format: (file content, weights taken by default, weights taken with prefer_ema=False)
WRAPPERS = {
    'timm_checkpoint_saver': ({'epoch': 3, 'arch': 'PosMLP_T14_224', 'state_dict': _weights(),
                               'state_dict_ema': _ema(), 'optimizer': {'state': {}}, 'version': 2,
                               'metric': 80.1}, _ema(), _weights()),
    'deit_model_ema': ({'model': _weights(), 'model_ema': _ema(), 'optimizer': {}, 'lr_scheduler': {},
                        'epoch': 299, 'scaler': {}}, _ema(), _weights()),
    'slowfast_model_state': ({'epoch': 30, 'model_state': _weights(), 'optimizer_state': {},
                              'cfg': 'MODEL:\n  ARCH: posmlp\n'}, _weights(), _weights()),
    'mmdet2_detector': ({'meta': {'mmdet_version': '2.25.0', 'CLASSES': ('a', 'b')},
                         'state_dict': {'backbone.' + k: v for k, v in _weights().items()},
                         'optimizer': {}}, {'backbone.' + k: v for k, v in _weights().items()}, None),
    'ddp_module_prefix': ({'state_dict': {'module.' + k: v for k, v in _weights().items()}}, _weights(), None),
    'bare_state_dict': (_weights(), _weights(), None),
}


@pytest.mark.parametrize('name', list(WRAPPERS))
def test_wrapper_formats(name, tmp_path):
    content, default, trained = WRAPPERS[name]
    path = tmp_path / f'{name}.pth'
    torch.save(content, path)
    assert _same(load_checkpoint_file(str(path)), default)
    assert _same(load_checkpoint_file(str(path), prefer_ema=False), trained if trained is not None else default)


def test_wrapper_errors_name_the_problem():
    with pytest.raises(CheckpointMismatchError, match='no state dict found'):
        extract_state_dict({'epoch': 1, 'weights': [1, 2]})
    with pytest.raises(CheckpointMismatchError, match="'state_dict' entry is not a state dict"):
        extract_state_dict({'state_dict': {'a': 1}})


# --------------------------------------------------------------------------- Wave-MLP CLI
def test_wavemlp_cli_whole_mmdet_checkpoint(tmp_path):
    """An official fork_feat detector file: the backbone is converted, neck/heads kept by name."""
    from mmposmlp.models.converters.wave_mlp import convert_official_wavemlp
    d = torch.load(osp.join(DATA, 'wavemlp_bn.pt'), weights_only=True)
    backbone = {k: v for k, v in d['state_dict'].items() if not k.startswith(('head.', 'norm.'))}
    for i in (0, 2, 4, 6):
        c = d['state_dict']['norm.weight'].shape[0] if i == 6 else None
        if c:
            backbone[f'norm{i}.weight'] = d['state_dict']['norm.weight']
            backbone[f'norm{i}.bias'] = d['state_dict']['norm.bias']
    state = {'backbone.' + k: v for k, v in backbone.items()}
    state.update({'neck.lateral_convs.0.conv.weight': torch.zeros(4, 16, 1, 1),
                  'roi_head.bbox_head.fc_cls.weight': torch.zeros(3, 8)})
    src, dst = tmp_path / 'mask_rcnn_wavemlp.pth', tmp_path / 'out.pth'
    torch.save({'meta': {'mmdet_version': '2.11.0'}, 'state_dict': state, 'optimizer': {}}, src)
    load_tool('tools', 'model_converters', 'wavemlp2mmposmlp.py').main([str(src), str(dst)])
    out = torch.load(dst, weights_only=True)['state_dict']
    ref = convert_official_wavemlp(backbone)
    assert all(torch.equal(out[k], ref[k]) for k in ref)
    assert 'backbone.norm3.weight' in out and 'neck.lateral_convs.0.conv.weight' in out
    assert 'roi_head.bbox_head.fc_cls.weight' in out
    assert len(out) == len(ref) + 2


# --------------------------------------------------------------------------- PCPVT CLI
def test_pcpvt_cli_refuses_unknown_keys_unless_ignored(tmp_path):
    d = torch.load(osp.join(DATA, 'pcpvt.pt'), weights_only=True)
    state = dict(d['state_dict'], cls_token=torch.zeros(1, 1, 16))
    src, dst = tmp_path / 'pcpvt.pth', tmp_path / 'out.pth'
    torch.save({'model': state, 'epoch': 1}, src)
    tool = load_tool('tools', 'model_converters', 'pcpvt2mmposmlp.py')
    with pytest.raises(KeyError, match='cls_token'):
        tool.main([str(src), str(dst)])
    tool.main([str(src), str(dst), '--ignore-keys', 'cls_token'])
    out = torch.load(dst, weights_only=True)['state_dict']
    assert not any('cls_token' in k for k in out)
    # a whole segmentor: decode_head.* must be dropped explicitly
    seg = {'backbone.' + k: v for k, v in d['state_dict'].items() if not k.startswith('head.')}
    seg['decode_head.conv_seg.weight'] = torch.zeros(2, 4, 1, 1)
    torch.save({'meta': {}, 'state_dict': seg}, src)
    with pytest.raises(KeyError, match='decode_head'):
        tool.main([str(src), str(dst)])
    tool.main([str(src), str(dst), '--ignore-keys', 'decode_head.*'])


def test_pcpvt_init_cfg_prefers_ema_deit_wrapper(tmp_path):
    """Twins writes DeiT-style files ({'model', 'model_ema', ...}): init_cfg takes model_ema."""
    from mmposmlp.models.backbones.pvt_peg import PVTPEG
    from mmposmlp.models.converters.pvt_peg import convert_pcpvt
    d = torch.load(osp.join(DATA, 'pcpvt.pt'), weights_only=True)
    a = json.loads(d['arch_json'])
    arch = dict(embed_dims=a['embed_dims'], depths=a['depths'], num_heads=a['num_heads'],
                mlp_ratios=a['mlp_ratios'], sr_ratios=a['sr_ratios'])
    trained = {k: v - 1 if v.is_floating_point() else v for k, v in d['state_dict'].items()}
    src = tmp_path / 'twins.pth'
    torch.save({'model': trained, 'model_ema': d['state_dict'], 'epoch': 300}, src)
    for prefer_ema, ref in ((True, d['state_dict']), (False, trained)):
        model = PVTPEG(arch=arch, norm_after_stage=[False, False, False, True],
                       init_cfg=dict(type='Pretrained', checkpoint=str(src), prefer_ema=prefer_ema))
        model.init_weights()
        own = model.state_dict()
        conv = convert_pcpvt({k: v for k, v in ref.items()})
        assert all(torch.equal(own[k], v) for k, v in conv.items())


def test_mmengine_ema_hook_checkpoint_gives_either_weights(tmp_path):
    """mmengine's EMAHook swaps before saving (EMA weights in ``state_dict``, trained ones in
    ``ema_state_dict``): prefer_ema (default) takes the EMA weights, prefer_ema=False the trained ones."""
    from mmengine.hooks import EMAHook
    from mmengine.model import ExponentialMovingAverage
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    ema = ExponentialMovingAverage(model, momentum=0.5)
    for _ in range(3):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        model.train()(torch.randn(2, 3, 8, 8))
        ema.update_parameters(model)
    trained = {k: v.clone() for k, v in model.state_dict().items()}
    averaged = {k: v.clone() for k, v in ema.module.state_dict().items()}
    assert any(not torch.equal(trained[k], averaged[k]) for k in trained)
    ckpt = dict(meta=dict(epoch=1), state_dict={k: v.clone() for k, v in trained.items()})
    hook = EMAHook()
    hook.ema_model = ema
    hook.before_save_checkpoint(None, ckpt)
    path = str(tmp_path / 'epoch_1.pth')
    torch.save(ckpt, path)
    for prefer_ema, want in ((True, averaged), (False, trained)):
        got = load_checkpoint_file(path, prefer_ema=prefer_ema)
        assert got.keys() == want.keys()
        assert all(torch.equal(got[k], want[k]) for k in want), prefer_ema
    ckpt['ema_state_dict']['module.extra.weight'] = torch.zeros(1)
    with pytest.raises(CheckpointMismatchError, match="holds \\['extra.weight'\\] that its 'state_dict' lacks"):
        extract_state_dict(ckpt, prefer_ema=False)


def test_shape_mismatch_is_one_sentence_naming_input_size():
    """gMLP's SGU mixes all tokens: a checkpoint trained at 224 does not fit a 256 model; the error says so."""
    import tempfile
    from mmposmlp.models.backbones.gmlp import GMLP
    small = dict(embed_dims=16, feedforward_channels=32, num_layers=2)
    d = tempfile.mkdtemp()
    torch.save({'state_dict': GMLP(arch=small, img_size=64).state_dict()}, f'{d}/a.pth')
    m = GMLP(arch=small, img_size=80, init_cfg=dict(type='Pretrained', checkpoint=f'{d}/a.pth'))
    with pytest.raises(CheckpointMismatchError) as info:
        m.init_weights()
    msg = str(info.value)
    assert '\n' not in msg and '4 weight(s) have another shape' in msg, msg
    assert 'layers.0.gate.mixing.weight: checkpoint (16, 16) vs model (25, 25)' in msg and 'input size' in msg, msg
