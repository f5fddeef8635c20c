"""Benchmark and complexity tools: output format, medians, ratios, exponents, FLOP counting.

Tiny models, 1-2 iterations; no timing is asserted (only that the numbers are computed from the
measured times the way the docs say)."""
import json
import os.path as osp
import sys

import pytest
import torch
import torch.nn as nn

from tools.analysis import speed_memory as B
from tools.analysis import params_flops as C

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path.insert(0, ROOT)

TINY_CFG = """
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)
default_scope = 'mmpretrain'
model = dict(
    type='ImageClassifier',
    backbone=dict(type='mmposmlp.PosMLP', arch=dict(embed_dims=[8, 16, 32, 64], depths=[1, 1, 1, 1],
                  groups=[2, 4, 8, 16], window_sizes=[4, 4, 4, 2]), out_indices=(3, ), drop_path_rate=0.),
    neck=dict(type='GlobalAveragePooling'),
    head=dict(type='LinearClsHead', num_classes=10, in_channels=64))
"""


@pytest.fixture(scope='module')
def tiny_cfg(tmp_path_factory):
    path = tmp_path_factory.mktemp('cfg') / 'tiny-posmlp_in1k.py'
    path.write_text(TINY_CFG)
    return str(path)


# ---------------------------------------------------------------------------- pure logic
def test_summarize_medians_and_ratios():
    rows = B.summarize({'a': [1.0, 3.0, 2.0], 'b': [4.0, 8.0, 6.0, 100.0, 5.0]}, batch=4)
    assert [r['name'] for r in rows] == ['a', 'b']
    assert rows[0]['median_s'] == 2.0 and rows[1]['median_s'] == 6.0
    assert rows[0]['throughput'] == pytest.approx(2.0) and rows[1]['throughput'] == pytest.approx(4 / 6)
    assert rows[0]['first_over_this'] == pytest.approx(1.0)
    assert rows[1]['first_over_this'] == pytest.approx(3.0)  # a is 3x faster than b
    assert rows[1]['iters'] == 5 and rows[1]['min_s'] == 4.0


def test_time_alternating_rotates_order():
    calls = []
    steps = {n: (lambda n=n: calls.append(n)) for n in 'abc'}
    times = B.time_alternating(steps, iters=3, warmup=1)
    assert calls[:3] == ['a', 'b', 'c']  # warm-up
    assert calls[3:] == ['a', 'b', 'c', 'b', 'c', 'a', 'c', 'a', 'b']
    assert {k: len(v) for k, v in times.items()} == {'a': 3, 'b': 3, 'c': 3}
    assert all(t >= 0 for v in times.values() for t in v)


def test_fit_exponent():
    xs = [196, 784, 1764, 3136]
    assert B.fit_exponent(xs, [3 * x for x in xs]) == pytest.approx(1.0)
    assert B.fit_exponent(xs, [0.5 * x ** 2 for x in xs]) == pytest.approx(2.0)
    with pytest.raises(ValueError, match='two different sizes'):
        B.fit_exponent([5, 5], [1, 2])


def test_count_flops_is_macs():
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.Flatten(), nn.Linear(8 * 6 * 6, 10))
    flops, _ = C.count_flops(model, (1, 3, 6, 6))
    assert flops == 8 * 3 * 9 * 36 + 8 * 36 * 10  # one multiply-add = one FLOP


def test_reported_lookup_and_markdown():
    rep = C.reported_for('configs/posmlp/posmlp-t_8xb120_in1k.py')
    assert rep['params_m'] == 21 and rep['gflops'] == 5.2 and 'Table 2' in rep['source']
    assert C.reported_for('configs/x/unknown-model.py') is None
    rows = [dict(config='configs/posmlp/posmlp-t_8xb120_in1k.py', params_m=20.93, gflops=5.22, input='224x224',
                 counted='whole model', note='', reported=rep),
            dict(config='configs/posmlp/broken.py', params_m=None, gflops=None, note='build failed: KeyError: x')]
    md = C.markdown_table(rows)
    assert '## posmlp' in md and '| posmlp-t_8xb120_in1k | 20.93 | 5.22 | 224x224 |' in md
    assert '-0.3%' in md and '+0.4%' in md  # params / FLOPs relative to the paper
    assert '| broken | n/a | n/a |' in md and 'build failed' in md
    assert 'fvcore' in md and '1 multiply-add = 1 FLOP' in md


# ---------------------------------------------------------------------------- with a tiny model
def test_make_step_infer_and_train_backbone(tiny_cfg):
    built = B.build_candidate(B.Spec(tiny_cfg, backbone_only=True))
    assert built.is_backbone and built.scope is None
    B.make_step(built, (1, 3, 32, 32), 'infer')()
    B.make_step(built, (1, 3, 32, 32), 'train', amp='bf16')()
    assert all(p.grad is None for p in built.module.parameters())  # grads cleared after the step
    with pytest.raises(ValueError, match='mode'):
        B.make_step(built, (1, 3, 32, 32), 'predict')


def test_make_step_whole_model_train(tiny_cfg):
    built = B.build_candidate(B.Spec(tiny_cfg, with_cp=True))
    assert built.scope == 'mmpretrain' and built.module.backbone.stages[0].with_cp
    B.make_step(built, (2, 3, 32, 32), 'train')()


def test_cli_compare_json(tiny_cfg, tmp_path, capsys):
    from tools.analysis import benchmark as tool
    out = tmp_path / 'r.json'
    code = tool.main([tiny_cfg, '--compare', tiny_cfg, '--batch', '2', '--shape', '32', '32', '--iters', '2',
                      '--warmup', '0', '--per-gflop', '--json', str(out)])
    assert code == 0
    rep = json.loads(out.read_text())
    rows = rep['results']
    assert len(rows) == 2 and rep['machine']['torch'] == torch.__version__
    for r, ts in zip(rows, rep['times'].values()):
        assert len(ts) == 2
        assert r['median_s'] == pytest.approx(sorted(ts)[0] / 2 + sorted(ts)[1] / 2)
        assert r['throughput'] == pytest.approx(2 / r['median_s'])
        assert r['gflops'] > 0 and r['gflop_per_s'] == pytest.approx(r['throughput'] * r['gflops'])
    assert rows[1]['first_over_this'] == pytest.approx(rows[0]['throughput'] / rows[1]['throughput'])
    text = capsys.readouterr().out
    assert 'ratio*' in text and 'img/s' in text


def test_cli_channels_last_and_profile(tiny_cfg, tmp_path, capsys):
    """--channels-last puts weights and input in channels_last memory; --profile writes the operator
    table of the first candidate."""
    from tools.analysis import benchmark as tool
    prof = tmp_path / 'prof.txt'
    code = tool.main([tiny_cfg, '--batch', '1', '--shape', '32', '32', '--iters', '1',
                      '--warmup', '0', '--channels-last', '--profile', str(prof)])
    assert code == 0
    text = prof.read_text()
    assert text.startswith('# tiny-posmlp_in1k: infer') and 'Name' in text and 'aten::' in text
    assert 'channels_last' in capsys.readouterr().out
    built = B.build_candidate(B.Spec(tiny_cfg))
    B.make_step(built, (1, 3, 32, 32), 'infer', channels_last=True)()
    conv = built.module.backbone.patch_embed[0].conv.weight
    assert conv.is_contiguous(memory_format=torch.channels_last) and not conv.is_contiguous()


@pytest.mark.parametrize('extra,message', [(['--compile-compare', '--mode', 'train'], 'inference only'),
                                           ([], 'needs --compile')])
def test_cli_compile_freezing_refuses_misuse(tiny_cfg, extra, message):
    from tools.analysis import benchmark as tool
    with pytest.raises(SystemExit, match=message):
        tool.main([tiny_cfg, '--compile-freezing', '--iters', '0'] + extra)


def test_cli_scaling_plot(tiny_cfg, tmp_path):
    from tools.analysis import benchmark as tool
    png = tmp_path / 's.png'
    out = tmp_path / 's.json'
    assert tool.main([tiny_cfg, '--backbone-only', '--scaling', '32', '64', '--iters', '1', '--warmup', '0',
                      '--plot', str(png), '--json', str(out)]) == 0
    rep = json.loads(out.read_text())
    (name, pts), = rep['scaling'].items()
    assert [p['size'] for p in pts] == [32, 64] and [p['x'] for p in pts] == [64, 256]
    assert rep['fits'][name]['time_exponent'] == pytest.approx(
        B.fit_exponent([64, 256], [p['time_s'] for p in pts]))
    assert png.stat().st_size > 1000


def test_memory_inprocess_reports_step_peak(tiny_cfg):
    built = B.build_candidate(B.Spec(tiny_cfg, backbone_only=True))
    res = B.measure_memory_inprocess(built, (1, 3, 64, 64), 'train')
    assert res['peak_mib'] >= 0 and 'rss' in res['method']


@pytest.mark.slow  # a subprocess importing the OpenMMLab stack: ~15-60 s on the shared CPUs
def test_memory_in_fresh_process(tiny_cfg):
    res = B.measure_memory(B.Spec(tiny_cfg, backbone_only=True), (1, 3, 64, 64), 'train')
    assert 'error' not in res, res
    assert res['peak_mib'] >= 0 and 'fresh process' in res['method']


def test_reference_needs_checkout(tiny_cfg, tmp_path):
    with pytest.raises(FileNotFoundError, match='PosMLP checkout'):
        B.build_reference(tiny_cfg, str(tmp_path))


def test_config_complexity_and_failure(tiny_cfg, tmp_path):
    row = C.config_complexity(tiny_cfg)
    assert row['params_m'] > 0 and row['gflops'] > 0 and row['input'] == '224x224'
    bad = tmp_path / 'bad_in1k.py'
    bad.write_text("default_scope = 'mmpretrain'\nmodel = dict(type='NoSuchModel')\n")
    row = C.config_complexity(str(bad))
    assert row['params_m'] is None and row['note'].startswith('build failed')


# ---------------------------------------------------------------------------- what is compared
def test_cli_refuses_a_backbone_preset_beside_a_whole_model(tiny_cfg):
    """A whole model against a backbone alone is refused in one sentence naming both fixes."""
    from tools.analysis import benchmark as tool
    with pytest.raises(SystemExit) as err:
        tool.main([tiny_cfg, '--compare', 'mmdet-swin-t', '--iters', '0'])
    msg = str(err.value)
    assert msg.count('. ') == 0 and msg.endswith('.')
    assert "'mmdet-swin-t' is a backbone alone" in msg and '--backbone-only' in msg
    assert "'mmdet-mask-rcnn-swin-t'" in msg
    with pytest.raises(ValueError, match='measure both the same way'):
        B.check_comparable([B.Spec(tiny_cfg), B.Spec(tiny_cfg, name='b', backbone_only=True)])
    B.check_comparable([B.Spec(tiny_cfg, backbone_only=True), B.Spec('mmdet-swin-t')])  # backbones: fine
    B.check_comparable([B.Spec(tiny_cfg), B.Spec('mmdet-mask-rcnn-swin-t')])  # whole models: fine


def test_whole_model_presets_name_upstream_configs():
    for name, preset in B.PRESETS.items():
        if preset.kind == 'model':
            assert '::' in preset.config and preset.describes
        else:
            assert preset.cfg['type'] and B.PRESETS[preset.whole_model].kind == 'model'


def test_suite_arguments_compare_like_with_like():
    """--suite swin: four comparisons, each of like with like, with peak memory, scaled for quick runs."""
    from tools.analysis import benchmark as tool
    args = tool.parse_args(['--suite', 'swin', '--threads', '1', '--iters', '2', '--suite-scale', '0.25'])
    runs = tool.suite_arguments(args)
    assert len(runs) == 4
    for title, argv in runs:
        sub = tool.parse_args(argv)
        specs = tool._specs(sub)  # refuses mismatched comparisons
        assert len(specs) == 2 and sub.memory and sub.threads == 1 and sub.iters == 2
        assert sub.batch == 1
        assert all(B.measures_backbone(s) for s in specs) == sub.backbone_only
        assert sub.shape[-2:] == [192, 320] if len(sub.shape) == 2 else sub.shape == [16, 64, 64]
    modes = [tool.parse_args(a).mode for _, a in runs]
    assert modes == ['train', 'train', 'infer', 'train']
    cuda = tool.suite_arguments(tool.parse_args(['--suite', 'swin', '--device', 'cuda', '--amp', 'fp16']))
    assert [tool.parse_args(a).batch for _, a in cuda] == [2, 2, 2, 8]
    assert tool.parse_args(cuda[0][1]).shape == [800, 1344]


def test_cli_table_says_what_was_measured(tiny_cfg, capsys):
    from tools.analysis import benchmark as tool
    assert tool.main([tiny_cfg, '--batch', '1', '--shape', '32', '32', '--iters', '1', '--warmup', '0',
                      '--mode', 'train']) == 0
    out = capsys.readouterr().out
    assert 'ImageClassifier, whole model (mmpretrain)' in out and 'forward + loss + backward' in out
    assert tool.main([tiny_cfg, '--backbone-only', '--shape', '32', '32', '--iters', '1', '--warmup', '0']) == 0
    out = capsys.readouterr().out
    assert 'PosMLP, backbone' in out and 'inference step' in out


# ---------------------------------------------------------------------------- module profile
def test_op_kinds_and_units():
    from tools.analysis import module_profile as MP
    assert MP.op_kind('aten::addmm') == MP.op_kind('AddmmBackward0') == 'FC GEMM'
    assert MP.op_kind('aten::baddbmm') == MP.op_kind('BmmBackward0') == MP.op_kind('aten::bmm')
    assert MP.op_kind('NativeLayerNormBackward0') == 'norm' and MP.op_kind('aten::index_copy_').startswith('layout')
    assert MP.unit_of('backbone.stages.2.blocks.17.norm') == 'backbone.stages.2.blocks.*.norm'
    assert MP.unit_of('backbone.stages.0.blocks.1.attn.w_msa.qkv') == 'backbone.stages.0.blocks.*.attn.w_msa'
    assert MP.unit_of('backbone.stages.1.downsample.conv') == 'backbone.stages.1.downsample'
    assert MP.unit_of('backbone.patch_embed.0.conv') == 'backbone.patch_embed'
    assert MP.unit_of('roi_head.mask_head.convs.0') == 'roi_head.mask_head' and MP.unit_of('') == '(model)'


def test_module_profile_of_a_training_step(tiny_cfg, tmp_path):
    from tools.analysis import module_profile as MP
    built = B.build_candidate(B.Spec(tiny_cfg))
    step = B.make_step(built, (2, 3, 32, 32), 'train')
    times = MP.time_by_module(step, built.module, warmup=1)
    blocks = times['backbone.stages.0.blocks.*']
    assert blocks['forward'] > 0 and blocks['backward'] > 0
    assert blocks.get('forward/FC GEMM', 0) > 0 and 'backbone.patch_embed' in times
    assert any(u.startswith('head') for u in times)
    saved = MP.saved_bytes_by_module(step.loss, built.module)
    assert saved['backbone.stages.0.blocks.*'] > 0
    md = MP.markdown(times, saved)
    assert '| **total** |' in md and 'backbone.stages.0.blocks.*' in md
    from tools.analysis import benchmark as tool
    out = tmp_path / 'mp.md'
    assert tool.main([tiny_cfg, '--mode', 'train', '--batch', '1', '--shape', '32', '32', '--iters', '0',
                      '--module-profile', str(out)]) == 0
    assert 'saved for backward MiB' in out.read_text()


def test_module_profile_leaves_the_stems_recomputing_path_on(tiny_cfg):
    """The profiler's hooks stay off the stem's modules: a hooked ConvPE takes the modules' path, which keeps
    several half-resolution maps more, so the profile would show a stem the training step does not run."""
    from mmposmlp.models.layers.norm_act_conv import no_hooks
    from tools.analysis import module_profile as MP
    built = B.build_candidate(B.Spec(tiny_cfg))
    stem = built.module.backbone.patch_embed
    tracker = MP._ModuleTracker(built.module, ranges=False)
    try:
        assert no_hooks(*[m for m in stem.modules() if m is not stem]) and not no_hooks(stem)
        assert not no_hooks(built.module.backbone.stages[0])  # the rest is still tracked
        built.module.train()
        assert stem._recomputing_training(torch.zeros(1, 3, 32, 32))
    finally:
        tracker.remove()


def test_suite_summary_prints_posmlp_over_swin(monkeypatch, capsys, tmp_path):
    """The summary's speed ratio is PosMLP's throughput over Swin's and its memory ratio PosMLP's peak over
    Swin's (the comparisons themselves are stubbed: building four detector / recognizer pairs is minutes)."""
    from tools.analysis import benchmark as tool
    ran = []

    def fake_run(args):
        ran.append(args)
        rows = [dict(name='posmlp', first_over_this=1.0, memory=dict(peak_mib=100.0)),
                dict(name='swin', first_over_this=0.8, memory=dict(peak_mib=125.0))]
        return dict(results=rows), 0

    monkeypatch.setattr(tool, 'run', fake_run)
    out = tmp_path / 's.json'
    assert tool.main(['--suite', 'swin', '--iters', '1', '--json', str(out)]) == 0
    assert len(ran) == 4 and all(a.memory for a in ran)
    text = capsys.readouterr().out
    assert text.count('   0.800        0.800') == 4
    rep = json.loads(out.read_text())
    assert [r['speed_ratio'] for r in rep['runs']] == [0.8] * 4
    assert [r['memory_ratio'] for r in rep['runs']] == [0.8] * 4
