"""Every converter CLI on every file wrapper the official training scripts write: the converted weights are the
bare state dict's conversion, the EMA weights by default and the trained ones with ``--no-ema``."""
import argparse
import os.path as osp
import sys

import pytest
import torch

from toolcfg import load_tool

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
DATA = osp.join(ROOT, 'tests', 'data')


def _state(converter):
    """An official classification state dict of a small model (the shared test vectors)."""
    if converter == 'lvt2mmposmlp':
        return torch.load(osp.join(DATA, 'lvt_options.pt'), weights_only=True)['cases']['cls_r3']['state_dict']
    vector = {'posmlp2mmposmlp': 'posmlp_ggqpe.pt', 'pcpvt2mmposmlp': 'pcpvt.pt', 'wavemlp2mmposmlp': 'wavemlp_bn.pt',
              'posmlp_video2mmposmlp': 'posmlp_video.pt'}[converter]
    return torch.load(osp.join(DATA, vector), weights_only=True)['state_dict']


EXTRA_ARGS = {'posmlp_video2mmposmlp': ['--check-arch', 'none']}


def _perturbed(state):
    return {k: v + 1 if v.is_floating_point() else v for k, v in state.items()}


def _args():
    return argparse.Namespace(model='official', lr=1e-3, epochs=300)


# wrapper -> (file content from (ema, trained) weights, whether the file carries EMA weights)
WRAPPERS = {
    'bare_state_dict': (lambda ema, trained: trained, False),
    'ddp_module_prefix': (lambda ema, trained: {'state_dict': {'module.' + k: v for k, v in trained.items()}}, False),
    'timm_checkpoint_saver': (lambda ema, trained: {
        'epoch': 299, 'arch': 'official', 'state_dict': trained, 'state_dict_ema': ema, 'optimizer': {'state': {}},
        'version': 2, 'metric': 80.1, 'args': _args()}, True),
    'deit_model_ema_args': (lambda ema, trained: {
        'model': trained, 'model_ema': ema, 'optimizer': {}, 'lr_scheduler': {}, 'epoch': 299, 'scaler': {},
        'args': _args()}, True),
    'slowfast_model_state': (lambda ema, trained: {
        'epoch': 30, 'model_state': trained, 'optimizer_state': {}, 'cfg': 'MODEL:\n  ARCH: official\n'}, False),
}
CONVERTERS = ['posmlp2mmposmlp', 'pcpvt2mmposmlp', 'wavemlp2mmposmlp', 'posmlp_video2mmposmlp', 'lvt2mmposmlp']


def _convert(converter, src, dst, *flags, monkeypatch=None):
    tool = load_tool('tools', 'model_converters', converter + '.py')
    argv = [str(src), str(dst), *EXTRA_ARGS.get(converter, []), *flags]
    try:
        tool.main(argv)
    except TypeError:  # a main() that reads sys.argv
        monkeypatch.setattr(sys, 'argv', [converter + '.py', *argv])
        tool.main()
    return torch.load(dst, weights_only=True)['state_dict']


def _same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


@pytest.mark.parametrize('wrapper', list(WRAPPERS))
@pytest.mark.parametrize('converter', CONVERTERS)
def test_converter_takes_every_wrapper(converter, wrapper, tmp_path, monkeypatch):
    plain = _state(converter)
    torch.save(plain, tmp_path / 'bare.pth')
    expected = _convert(converter, tmp_path / 'bare.pth', tmp_path / 'bare_out.pth', monkeypatch=monkeypatch)
    build, has_ema = WRAPPERS[wrapper]
    trained = _perturbed(plain) if has_ema else plain
    torch.save(build(plain, trained), tmp_path / 'wrapped.pth')
    _same(_convert(converter, tmp_path / 'wrapped.pth', tmp_path / 'out.pth', monkeypatch=monkeypatch), expected)
    if has_ema:  # --no-ema takes the trained weights
        torch.save(trained, tmp_path / 'bare_trained.pth')
        expected_trained = _convert(converter, tmp_path / 'bare_trained.pth', tmp_path / 'bt_out.pth',
                                    monkeypatch=monkeypatch)
        got = _convert(converter, tmp_path / 'wrapped.pth', tmp_path / 'out_trained.pth', '--no-ema',
                       monkeypatch=monkeypatch)
        _same(got, expected_trained)
