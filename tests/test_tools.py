"""tools/train.py + tools/test.py on upstream configs of all four libraries, the torch 2.13 checkpoint
round trip, and one-line errors for bad input (issue 2, items 3-4)."""
import os
import pickle

import pytest
import torch

from toolcfg import (MASK_RCNN, RESNET18_CLS, SEM_FPN, TSN, load_tool, repo_path, run_tool, write_cfg)

TRAIN = repo_path('tools', 'train.py')
TEST = repo_path('tools', 'test.py')


def _short_error(res, *needles):
    """A user error: exit code 1, one ERROR line naming the problem, no traceback."""
    assert res.returncode == 1, res.stderr[-3000:]
    assert 'Traceback' not in res.stderr, res.stderr[-3000:]
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith('ERROR: ')]
    assert len(lines) == 1, res.stderr[-3000:]
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


# ---------------------------------------------------------------- compat (unit, fast)
class _Evil:
    def __reduce__(self):
        return (os.system, ('echo pwned > /dev/null',))


class _EvilGetattr:
    def __reduce__(self):  # getattr on an allow-listed class: the first step of a gadget chain
        import numpy as np
        return (getattr, (np.ndarray, 'tofile'))


class _EvilDunder:
    def __reduce__(self):
        from mmengine.logging.history_buffer import HistoryBuffer
        return (getattr, (HistoryBuffer, '__class__'))


def test_safe_load_reads_mmengine_meta_but_refuses_code(tmp_path):
    from mmengine.logging import MessageHub

    from mmposmlp.utils.compat import safe_torch_load
    hub = MessageHub.get_instance('mmposmlp-compat-test')
    for i in range(3):
        hub.update_scalar('train/loss', 1.0 / (i + 1))
    ckpt = {'meta': {'iter': 3, 'seed': 0}, 'message_hub': hub.state_dict(),
            'state_dict': {'w': torch.ones(2)}}
    path = str(tmp_path / 'mm.pth')
    torch.save(ckpt, path)
    with pytest.raises(pickle.UnpicklingError):  # torch 2.13's default refuses mmengine's objects
        torch.load(path)
    loaded = safe_torch_load(path)
    # the HistoryBuffer comes back as plain data (no mmengine object is built from the file)
    assert loaded['message_hub']['log_scalars']['train/loss']['log_history'][-1].item() == pytest.approx(1 / 3)
    for evil in (_Evil(), _EvilGetattr(), _EvilDunder()):
        bad = str(tmp_path / 'evil.pth')
        torch.save({'state_dict': {}, 'x': evil}, bad)
        with pytest.raises(pickle.UnpicklingError):
            safe_torch_load(bad)
    # nothing was allow-listed process-wide: the plain default still refuses
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path)


def test_cpu_distributed_cfg():
    from mmengine.config import Config

    from mmposmlp.utils.dist import setup_cpu_distributed, slurm_master_port
    cfg = Config(dict(env_cfg=dict(dist_cfg=dict(backend='nccl'), cudnn_benchmark=False)))
    assert not setup_cpu_distributed(cfg, 'none')
    assert cfg.env_cfg.dist_cfg.backend == 'nccl'
    if torch.cuda.is_available():
        pytest.skip('CPU fallback applies only without CUDA')
    assert setup_cpu_distributed(cfg, 'pytorch')
    assert cfg.env_cfg.dist_cfg.backend == 'gloo'
    assert cfg.model_wrapper_cfg.device_ids is None
    assert cfg.model_wrapper_cfg.type == 'MMDistributedDataParallel'
    torch.cuda.set_device(0)  # no-op instead of mmengine's AttributeError on CPU torch
    assert slurm_master_port(123) != slurm_master_port(124)
    assert 20000 <= slurm_master_port(10 ** 9 + 7) < 40000


# ---------------------------------------------------------------- upstream configs, 2 iterations
# slow (13-24 s each): tools/train.py trains each library's upstream configs in the default suite elsewhere:
# Mask R-CNN and UperNet in test_posmlp_e2e.py, Semantic FPN in test_wavemlp.py, TSN and ResNet-18 with the
# toy fragments in test_toy_configs.py, and ResNet-18 in the `trained_cls` fixture below
@pytest.mark.slow
@pytest.mark.parametrize('name,template', [('mask_rcnn', MASK_RCNN), ('sem_fpn', SEM_FPN), ('tsn', TSN),
                                           ('resnet18', RESNET18_CLS)])
def test_train_upstream_config_2_iters(name, template, toy_data, tmp_path):
    cfg = write_cfg(tmp_path / f'{name}.py', template, toy_data)
    res = run_tool([TRAIN, cfg, '--work-dir', str(tmp_path / 'work')], cwd=repo_path())
    assert res.returncode == 0, res.stderr[-4000:]
    ckpt = tmp_path / 'work' / 'iter_2.pth'
    assert ckpt.is_file()
    from mmposmlp.utils.compat import safe_torch_load
    meta = safe_torch_load(str(ckpt))['meta']
    assert meta['iter'] == 2
    assert (tmp_path / 'work' / 'last_checkpoint').read_text().strip().endswith('iter_2.pth')


# ---------------------------------------------------------------- round trip
@pytest.fixture(scope='module')
def trained_cls(toy_data, tmp_path_factory):
    """A tiny mmpretrain classifier trained 2 iterations by tools/train.py (checkpoints at 1 and 2)."""
    d = tmp_path_factory.mktemp('trained_cls')
    cfg = write_cfg(d / 'cls2.py', RESNET18_CLS, toy_data, iters=2, ckpt=1, val=True)
    res = run_tool([TRAIN, cfg, '--work-dir', str(d / 'work')], cwd=repo_path())
    assert res.returncode == 0, res.stderr[-4000:]
    return d, cfg


def test_train_checkpoint_test_resume_round_trip(trained_cls, toy_data, tmp_path):
    from mmposmlp.utils.compat import safe_torch_load
    d, cfg2 = trained_cls
    work = d / 'work'
    assert (work / 'iter_1.pth').is_file() and (work / 'iter_2.pth').is_file()
    assert not list(work.glob('*.tmp'))
    # our training writes plain data: torch 2.13's default (weights_only, no allow-list) reads it
    assert torch.load(str(work / 'iter_2.pth'))['meta']['iter'] == 2

    out = tmp_path / 'preds.pkl'
    res = run_tool([TEST, cfg2, str(work / 'iter_2.pth'), '--work-dir', str(tmp_path / 'test'), '--out', str(out)],
                   cwd=repo_path())
    assert res.returncode == 0, res.stderr[-4000:]
    assert 'accuracy/top1' in res.stdout + res.stderr
    with open(out, 'rb') as f:
        preds = pickle.load(f)
    assert len(preds) == 12  # 4 classes x 3 val images

    # --resume CKPT (the bare --resume is covered by test_fault_tolerance.py)
    cfg4 = write_cfg(tmp_path / 'cls4.py', RESNET18_CLS, toy_data, iters=4, ckpt=1)
    res = run_tool([TRAIN, cfg4, '--work-dir', str(tmp_path / 'work_b'), '--resume', str(work / 'iter_1.pth')],
                   cwd=repo_path())
    assert res.returncode == 0, res.stderr[-4000:]
    log = res.stdout + res.stderr
    assert 'resumed' in log.lower() and 'iter_1.pth' in log
    assert safe_torch_load(str(tmp_path / 'work_b' / 'iter_4.pth'))['meta']['iter'] == 4
    assert not (tmp_path / 'work_b' / 'iter_1.pth').exists()  # started at iteration 2


def test_resume_from_other_architecture_is_one_clear_error(trained_cls, toy_data, tmp_path):
    d, _ = trained_cls
    other = write_cfg(tmp_path / 'b.py', RESNET18_CLS, toy_data, iters=3,
                      extra="model = dict(backbone=dict(base_channels=16), head=dict(in_channels=128))\n")
    res = run_tool([TRAIN, other, '--work-dir', str(tmp_path / 'b'), '--resume', str(d / 'work' / 'iter_1.pth')],
                   cwd=repo_path())
    line = _short_error(res, 'written for a different model', 'shape-mismatched')
    assert 'iter_1.pth' in line


# ---------------------------------------------------------------- bad input -> one clear line
class _Res:
    def __init__(self, returncode, stderr):
        self.returncode, self.stderr = returncode, stderr


def _train_in_process(args, capsys):
    """tools/train.py's entry (run_cli(main)) in this process: the same output, without a new interpreter."""
    from mmposmlp.engine.entry import run_cli
    train = load_tool(TRAIN)
    rc = run_cli(train.main, args)
    return _Res(rc, capsys.readouterr().err)


def _test_in_process(args, capsys):
    from mmposmlp.engine.entry import run_cli
    test = load_tool(TEST)
    rc = run_cli(test.main, args)
    return _Res(rc, capsys.readouterr().err)


def test_unknown_type_is_one_clear_error(toy_data, tmp_path, capsys):
    cfg = write_cfg(tmp_path / 'bad_type.py', RESNET18_CLS, toy_data,
                    extra="model = dict(backbone=dict(type='ResNett'))\n")
    line = _short_error(_train_in_process([cfg, '--work-dir', str(tmp_path / 'w')], capsys),
                        "unknown type 'ResNett'", 'spelling', 'custom_imports')
    assert len(line) < 600


def test_wrong_arch_is_one_clear_error(toy_data, tmp_path, capsys):
    cfg = write_cfg(tmp_path / 'bad_arch.py', RESNET18_CLS, toy_data,
                    extra="model = dict(backbone=dict(_delete_=True, type='mmposmlp.WaveMLP', arch='tinyy'))\n")
    _short_error(_train_in_process([cfg, '--work-dir', str(tmp_path / 'w')], capsys), 'tinyy', "'t'", 'tiny')


def test_missing_dataset_is_one_clear_error(tmp_path, capsys):
    missing = tmp_path / 'nowhere'
    cfg = write_cfg(tmp_path / 'no_data.py', RESNET18_CLS, str(missing))
    line = _short_error(_train_in_process([cfg, '--work-dir', str(tmp_path / 'w')], capsys),
                        'dataset not found', str(missing), 'make_toy_datasets.py')
    assert 'train_dataloader.dataset.data_root' in line
    _short_error(_test_in_process([cfg, str(tmp_path / 'nothing.pth')], capsys), 'nothing.pth', 'does not exist')


def test_local_rank_spellings_and_amp_on_cpu(toy_data, tmp_path, monkeypatch):
    train = load_tool(TRAIN)
    test = load_tool(TEST)
    for tool, extra in ((train, []), (test, ['ckpt.pth'])):
        for flag in ('--local-rank=1', '--local_rank=1'):
            monkeypatch.delenv('LOCAL_RANK', raising=False)
            args = tool.parse_args(['cfg.py'] + extra + [flag])
            assert args.local_rank == 1 and os.environ['LOCAL_RANK'] == '1'
    args = train.parse_args(['cfg.py', '--resume'])
    assert args.resume == 'auto'
    assert train.parse_args(['cfg.py', '--resume', 'a.pth']).resume == 'a.pth'
    assert train.parse_args(['cfg.py']).resume is None
    if torch.cuda.is_available():
        return
    from mmposmlp.engine.entry import UserError
    cfg = write_cfg(tmp_path / 'cls.py', RESNET18_CLS, toy_data)
    with pytest.raises(UserError, match='--amp needs a GPU'):
        train.main([cfg, '--amp', '--work-dir', str(tmp_path / 'w')])


SMALL_POSMLP = ("arch=dict(embed_dims=[16, 32, 64, 128], depths=[1, 1, 1, 1], groups=[2, 4, 8, 16], "
                "mlp_ratios=[2, 2, 2, 2], window_sizes=[7, 7, 7, 7]), out_indices=(0, 1, 2, 3), init_cfg=None")


def test_unprefixed_type_of_ours_is_answered_with_the_prefixed_name(toy_data, tmp_path, capsys):
    cfg = write_cfg(tmp_path / 'unprefixed.py', RESNET18_CLS, toy_data,
                    extra=f"model = dict(backbone=dict(_delete_=True, type='PosMLP', {SMALL_POSMLP}))\n")
    _short_error(_train_in_process([cfg, '--work-dir', str(tmp_path / 'w')], capsys),
                 "unknown type 'PosMLP'", 'did you mean `mmposmlp.PosMLP`', "write type='mmposmlp.PosMLP'")


def test_model_level_pretrained_left_in_an_upstream_config_is_named_with_its_fix(toy_data, tmp_path, capsys):
    """mmseg's configs set model.pretrained='open-mmlab://resnet50_v1c' for their ResNet; after swapping in our
    backbone it is refused as what it is (not as a missing file), with the fix."""
    cfg = write_cfg(tmp_path / 'seg.py', SEM_FPN, toy_data, extra=f"""
        model['pretrained'] = 'open-mmlab://resnet50_v1c'
        model['backbone'] = dict(_delete_=True, type='mmposmlp.PosMLP', {SMALL_POSMLP})
        model['neck'] = dict(in_channels=[16, 32, 64, 128])
        """)
    line = _short_error(_train_in_process([cfg, '--work-dir', str(tmp_path / 'w')], capsys),
                        "model.pretrained='open-mmlab://resnet50_v1c' is left from the upstream config",
                        '--cfg-options model.pretrained=None', 'mmposmlp.PosMLP')
    assert 'does not exist' not in line
