"""Official key families that the classification test vectors do not contain, strictly loaded
and checked by what they compute (not only by their names)."""
import os.path as osp

import torch
import torch.nn.functional as F

from mmposmlp.models.backbones.wave_mlp import WaveMLP
from mmposmlp.models.converters.wave_mlp import convert_official_wavemlp

DATA = osp.join(osp.dirname(osp.abspath(__file__)), 'data')


def test_wavemlp_dense_norms_normalise_their_own_stage():
    """Official ``fork_feat`` Wave-MLP: ``norm{idx}`` normalises the output of ``network[idx]``,
    and ``network[0, 2, 4, 6]`` are the four stages, so ``norm0/2/4/6`` belong to stages 0-3.
    The test vector's per-stage features are exactly those outputs; the converted dense
    checkpoint must give ``BN_{norm 2i}(features_i)`` as output ``i``."""
    vec = torch.load(osp.join(DATA, 'wavemlp_bn.pt'), weights_only=True)
    state = {k: v for k, v in vec['state_dict'].items() if not k.startswith(('norm.', 'head.'))}
    g = torch.Generator().manual_seed(0)
    dims = [16, 32, 64, 128]
    for i, c in enumerate(dims):  # distinct statistics per norm, so any other stage's norm is wrong
        state[f'norm{2 * i}.weight'] = torch.rand(c, generator=g) + 0.5
        state[f'norm{2 * i}.bias'] = torch.randn(c, generator=g)
        state[f'norm{2 * i}.running_mean'] = torch.randn(c, generator=g)
        state[f'norm{2 * i}.running_var'] = torch.rand(c, generator=g) + 0.5
        state[f'norm{2 * i}.num_batches_tracked'] = torch.tensor(1)
    converted = convert_official_wavemlp(state)
    backbone = {k[len('backbone.'):]: v for k, v in converted.items() if k.startswith('backbone.')}
    assert len(backbone) == len(converted)
    model = WaveMLP(arch=dict(depths=[1, 1, 2, 1], embed_dims=dims, mlp_ratios=[4, 4, 4, 4]),
                    norm_cfg=dict(type='BN'), out_indices=(0, 1, 2, 3)).double().eval()
    model.load_state_dict(backbone, strict=True)
    with torch.no_grad():
        outs = model(vec['inputs'][0][:1].double())
    for i, (out, feat) in enumerate(zip(outs, vec['features'])):
        p = {k: state[f'norm{2 * i}.{k}'].double() for k in ('weight', 'bias', 'running_mean', 'running_var')}
        expected = F.batch_norm(feat, p['running_mean'], p['running_var'], p['weight'], p['bias'], False, 0., 1e-5)
        assert (out - expected).abs().max() < 1e-8, f'dense output {i} differs'


def test_ema_weights_are_taken_by_default_when_a_file_holds_both(tmp_path):
    """The official PosMLP and Twins evaluations use the EMA model: every loading path takes
    ``state_dict_ema`` / ``model_ema`` by default and the trained weights only when asked."""
    from mmposmlp.models.checkpoints import extract_state_dict, load_checkpoint_file
    trained, ema = {'w': torch.zeros(2)}, {'w': torch.ones(2)}
    for plain_key, ema_key in (('state_dict', 'state_dict_ema'), ('model', 'model_ema')):
        ckpt = {plain_key: trained, ema_key: ema}
        assert torch.equal(extract_state_dict(ckpt)['w'], ema['w'])
        assert torch.equal(extract_state_dict(ckpt, prefer_ema=False)['w'], trained['w'])
        path = str(tmp_path / f'{plain_key}.pth')
        torch.save(ckpt, path)
        assert torch.equal(load_checkpoint_file(path)['w'], ema['w'])
