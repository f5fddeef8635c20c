"""ONNX export (tools/deployment/pytorch2onnx.py): every family, static and dynamic sizes, checked in
onnxruntime against PyTorch; the in-graph window layouts equal the cached eager ones.

Small archs on CPU. The default suite runs the layout equalities (the export form of the PosMLP
layouts against the cached one) and the refusals; the exports themselves (each takes minutes on 2
cores: torch.export's shape reasoning) are ``slow``.
"""
import os.path as osp

import pytest
import torch

from toolcfg import load_tool

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
pytest.importorskip('onnx')
pytest.importorskip('onnxruntime')
pytest.importorskip('onnxscript')

SMALL_POSMLP = ("dict(_delete_=True, embed_dims=[16, 32, 64, 128], depths=[2, 1, 1, 1], groups=[2, 4, 4, 8], "
                "mlp_ratios=[2, 2, 2, 2], window_sizes=[4, 4, 4, 2])")
SMALL_VIDEO = ("dict(_delete_=True, embed_dims=[8, 16, 32, 64], depths=[1, 1, 1, 1], groups=[2, 2, 4, 4], "
               "mlp_ratio=2, window_sizes=[[4, 4, 4], [4, 4, 4], [4, 4, 4], [4, 2, 2]])")

#: name -> (shipped config, overrides making it small, export size, dynamic?)
CASES = {
    'posmlp_classifier': ('configs/posmlp/posmlp-t_8xb120_in1k.py',
                          f'model = dict(backbone=dict(arch={SMALL_POSMLP}, shift=True), '
                          'head=dict(in_channels=128, num_classes=10))', (70, 93)),
    'posmlp_retinanet': ('configs/posmlp/retinanet_posmlp-t_1x_coco.py',
                         f'model = dict(backbone=dict(arch={SMALL_POSMLP}, init_cfg=None), '
                         'neck=dict(in_channels=[32, 64, 128], out_channels=32), '
                         'bbox_head=dict(in_channels=32, feat_channels=32, num_classes=3))', (75, 101)),
    'posmlp_mask_rcnn': ('configs/posmlp/mask-rcnn_posmlp-t_1x_coco.py',
                         f'model = dict(backbone=dict(arch={SMALL_POSMLP}, init_cfg=None), '
                         'neck=dict(in_channels=[16, 32, 64, 128]))', (75, 101)),
    'posmlp_semantic_fpn': ('configs/posmlp/fpn_posmlp-t_8xb2-40k_ade20k-512x512.py',
                            f'model = dict(backbone=dict(arch={SMALL_POSMLP}, init_cfg=None), '
                            'neck=dict(in_channels=[16, 32, 64, 128]))', (75, 101)),
    'posmlp_video_recognizer': ('configs/posmlp_video/posmlp-video-s_4xb8-u16-60e_sthv1-rgb.py',
                                f'model = dict(backbone=dict(arch={SMALL_VIDEO}, init_cfg=None), '
                                'cls_head=dict(in_channels=64, num_classes=7))', (6, 40, 50)),
    'wavemlp_classifier': ('configs/wavemlp/wavemlp-t_8xb128_in1k.py',
                           "model = dict(backbone=dict(arch=dict(_delete_=True, depths=[1, 1, 1, 1], "
                           "embed_dims=[16, 32, 64, 128], mlp_ratios=[2, 2, 2, 2])), "
                           "head=dict(in_channels=128, num_classes=10))", (70, 93)),
    'pvt_peg_classifier': ('configs/cpvt/pvt-peg-t-gap_8xb128_in1k.py',
                           "model = dict(backbone=dict(arch=dict(_delete_=True, depths=[1, 1, 1, 1], "
                           "embed_dims=[16, 32, 64, 128], num_heads=[1, 2, 2, 4], mlp_ratios=[2, 2, 2, 2], "
                           "sr_ratios=[8, 4, 2, 1])), head=dict(in_channels=128, num_classes=10))", (70, 93)),
    'cpvt_classifier': ('configs/cpvt/cpvt-ti_8xb128_in1k.py',
                        "model = dict(backbone=dict(arch=dict(_delete_=True, embed_dims=64, num_layers=2, num_heads=2, "
                        "feedforward_channels=128), peg_positions=(0, 1)), head=dict(in_channels=64, num_classes=10))",
                        (70, 93)),
    'imlp_poolformer_classifier': ('configs/imlp/poolformer-s12-imlp_32xb128_in1k.py', '', (64, 64)),
    'imlp_swin_classifier': ('configs/imlp/swin-t-imlp_16xb64_in1k.py',
                             "model = dict(backbone=dict(arch=dict(_delete_=True, embed_dims=16, depths=[1, 2, 1, 1], "
                             "num_heads=[1, 1, 2, 2])), head=dict(in_channels=128, num_classes=10))", (64, 64)),
}
#: static only, with the tool's refusal (tested in test_dynamic_refusal_is_one_sentence)
STATIC_ONLY = {'imlp_swin_classifier', 'posmlp_semantic_fpn'}


def _tool():
    return load_tool('tools', 'deployment', 'pytorch2onnx.py')


def _case(tmp_path, name):
    """A small config inheriting the shipped one, and a random-weight checkpoint of its model."""
    from mmengine.registry import MODELS

    from mmposmlp.engine.entry import load_config
    base, overrides, size = CASES[name]
    cfg_path = tmp_path / f'{name}.py'
    cfg_path.write_text(f"_base_ = '{osp.join(ROOT, base)}'\n{overrides}\n")
    cfg, _ = load_config(str(cfg_path))
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    with torch.no_grad():  # non-trivial norms and biases, so the check compares real values
        for n, p in model.named_parameters():
            if 'bias' in n or 'norm' in n or 'token_bias' in n:
                p.add_(0.1 * torch.randn_like(p))
    ckpt = tmp_path / f'{name}.pth'
    torch.save({'state_dict': model.state_dict()}, ckpt)
    return str(cfg_path), str(ckpt), size


def _export(tmp_path, capsys, name, dynamic, extra=()):
    cfg, ckpt, size = _case(tmp_path, name)
    out = tmp_path / f'{name}.onnx'
    flag = ['--clip'] if len(size) == 3 else ['--shape']
    argv = [cfg, ckpt, *flag, *map(str, size), '--out', str(out), *(['--dynamic'] if dynamic else []), *extra]
    _tool().main(argv)
    text = capsys.readouterr().out
    checks = [line for line in text.splitlines() if line.startswith('onnxruntime vs PyTorch')]
    assert checks and all(line.endswith('OK') for line in checks), text
    return out, checks


def _input_dims(path):
    import onnx
    dims = onnx.load(str(path)).graph.input[0].type.tensor_type.shape.dim
    return [d.dim_param or d.dim_value for d in dims]


# ---------------------------------------------------------------------------------- layouts
@pytest.mark.parametrize('shift', [False, True])
def test_in_graph_layouts_equal_cached_layouts(shift):
    """The export form (masks, padding and shift computed from the size) gives the eager model's
    outputs at sizes with and without padding, one and several windows per axis."""
    from mmposmlp.models.backbones.posmlp import PosMLP
    from mmposmlp.models.layers.export_mode import export_mode
    torch.manual_seed(0)
    arch = dict(embed_dims=[16, 32, 64, 128], depths=[2, 2, 2, 2], groups=[2, 4, 4, 8], mlp_ratios=[2, 2, 2, 2],
                window_sizes=[4, 4, 4, 2])
    model = PosMLP(arch=arch, shift=shift, out_indices=(0, 1, 2, 3), drop_path_rate=0.).double().eval()
    model.init_weights()
    for hw in [(64, 64), (70, 93), (16, 16), (37, 129)]:
        x = torch.randn(2, 3, *hw, dtype=torch.float64)
        with torch.no_grad():
            ref = model(x)
            with export_mode(model):
                got = model(x)
        for a, b in zip(ref, got):
            assert (a - b).abs().max() < 1e-12, (hw, shift)


def test_export_mode_is_held_by_the_model_not_the_process():
    """The exporter's mode is set on one model's modules and restored after; another model is untouched."""
    from mmposmlp.models.backbones.posmlp import PosMLP
    from mmposmlp.models.layers.export_mode import ExportModeMixin, export_mode
    arch = dict(embed_dims=[8, 16, 32, 64], depths=[1, 1, 1, 1], groups=[2, 2, 4, 4], window_sizes=[4, 4, 2, 2])
    exported, other = PosMLP(arch=arch), PosMLP(arch=arch)

    def modes(model):
        return {m.export_mode for m in model.modules() if isinstance(m, ExportModeMixin)}

    assert len([m for m in exported.modules() if isinstance(m, ExportModeMixin)]) > 4  # stages, units, mixings
    with export_mode(exported):
        assert modes(exported) == {True} and modes(other) == {False}
    assert modes(exported) == {False}


def test_in_graph_masks_equal_cached_masks():
    """Per window, the class-combination mask of the in-graph layout is the cached layout's mask
    (1-3 axes, every padding amount, with and without shift)."""
    import itertools
    import math

    from mmposmlp.models.layers.windows import InGraphWindowLayout, WindowLayout, _window_masks

    def cls(i, g):
        return 2 if i == g - 1 else (1 if i == g - 2 else 0)

    checked = 0
    for window, valids in [((4, ), [(v, ) for v in range(1, 13)]),
                           ((3, 4), itertools.product(range(1, 10), range(1, 13))),
                           ((4, 3, 5), [(3, 7, 11), (4, 3, 5), (9, 4, 6)])]:
        for valid in valids:
            padded = tuple(-(-v // w) * w for v, w in zip(valid, window))
            for shift in itertools.product(*[(0, w // 2) for w in window]):
                cached = WindowLayout(padded, valid, window, shift, torch.device('cpu'))
                graph = InGraphWindowLayout(padded, valid, window, shift, torch.device('cpu'))
                assert tuple(graph.shift) == cached.shift
                masks = _window_masks(padded, valid, window, cached.shift)
                n = math.prod(window)
                grid = [p // w for p, w in zip(padded, window)]
                for index, pos in enumerate(itertools.product(*[range(g) for g in grid])):
                    k = 0
                    for a, i in enumerate(pos):
                        k = k * 3 + cls(i, grid[a])
                    ref = torch.ones(n, n, dtype=torch.bool) if masks is None else masks[0][masks[1][index]]
                    assert torch.equal(graph.patterns[k], ref), (window, valid, shift, pos)
                    checked += 1
                x = torch.randn(2, *padded, 3)
                assert torch.equal(graph.partition(x), cached.partition(x))
                assert torch.equal(graph.reverse(graph.partition(x)), x)
    assert checked > 1000


def test_video_in_graph_layouts_equal_cached_layouts():
    from mmposmlp.models.backbones.posmlp_video import PosMLPVideo
    from mmposmlp.models.layers.export_mode import export_mode
    torch.manual_seed(0)
    arch = dict(embed_dims=[8, 16, 32, 64], depths=[1, 1, 1, 1], groups=[2, 2, 4, 4], mlp_ratio=2,
                window_sizes=[[4, 4, 4], [4, 4, 4], [4, 4, 4], [4, 2, 2]])
    for block_type in ('PoTGU+PoSGU', 'PoSTGU'):
        model = PosMLPVideo(arch=arch, block_type=block_type, drop_path_rate=0.).double().eval()
        model.init_weights()
        x = torch.randn(1, 3, 6, 40, 50, dtype=torch.float64)
        with torch.no_grad():
            ref = model(x)
            with export_mode(model):
                got = model(x)
        assert (ref - got).abs().max() < 1e-12, block_type


# ---------------------------------------------------------------------------------- the tool
@pytest.mark.parametrize('name', ['imlp_swin_classifier', 'posmlp_semantic_fpn'])
def test_dynamic_refusal_is_one_sentence(tmp_path, capsys, name):
    """A model whose upstream code turns sizes into Python numbers (Swin's window choice, mmseg's
    Upsample) is refused for --dynamic, in one sentence naming the reason and the fix; nothing is
    written."""
    from mmposmlp.deployment import ExportError
    cfg, ckpt, size = _case(tmp_path, name)
    out = tmp_path / 'swin.onnx'
    with pytest.raises(ExportError) as err:
        _tool().main([cfg, ckpt, '--shape', *map(str, size), '--dynamic', '--out', str(out)])
    msg = str(err.value)
    assert 'static shapes only' in msg and 'drop --dynamic' in msg and msg.count('. ') == 0, msg
    assert not out.exists()
    # through the CLI wrapper: exit code 1 and the sentence on stderr
    from mmposmlp.engine.entry import run_cli
    assert run_cli(_tool().main, [cfg, ckpt, '--shape', *map(str, size), '--dynamic', '--out', str(out)]) == 1
    assert 'static shapes only' in capsys.readouterr().err


def test_wrong_input_kind_and_options_refused(tmp_path):
    from mmposmlp.deployment import ExportError
    cfg, ckpt, _ = _case(tmp_path, 'wavemlp_classifier')
    with pytest.raises(ExportError, match='--shape H W instead of --clip'):
        _tool().main([cfg, ckpt, '--clip', '4', '64', '64'])
    with pytest.raises(ExportError, match='--check-shape needs --dynamic'):
        _tool().main([cfg, ckpt, '--shape', '64', '64', '--check-shape', '80', '80'])
    with pytest.raises(SystemExit):
        _tool().main([cfg, ckpt, '--shape', '64', '64', '--no-such-option'])


@pytest.mark.slow
def test_posmlp_classifier_dynamic(tmp_path, capsys):
    """PosMLP (shifted windows, padding at every stage): one graph, exact at the export size and at
    sizes with other padding and other window counts (one window per axis at 16x16). ~5 min on 2 cores."""
    out, checks = _export(tmp_path, capsys, 'posmlp_classifier', dynamic=True,
                          extra=['--check-shape', '16', '16', '--check-shape', '146', '137'])
    assert len(checks) == 3
    dims = _input_dims(out)
    assert dims[:2] == [1, 3] and all(isinstance(d, str) for d in dims[2:]), dims


@pytest.mark.slow
@pytest.mark.parametrize('name', sorted(set(CASES) - {'imlp_swin_classifier'}))
def test_static_export(tmp_path, capsys, name):
    out, checks = _export(tmp_path, capsys, name, dynamic=False)
    assert len(checks) == 1 and all(isinstance(d, int) for d in _input_dims(out))


@pytest.mark.slow
@pytest.mark.parametrize('name', sorted(set(CASES) - STATIC_ONLY - {'posmlp_classifier'}))
def test_dynamic_export(tmp_path, capsys, name):
    out, checks = _export(tmp_path, capsys, name, dynamic=True)
    assert len(checks) == 2
    assert all(isinstance(d, str) for d in _input_dims(out)[2:])


@pytest.mark.slow
def test_backbone_part(tmp_path, capsys):
    out, checks = _export(tmp_path, capsys, 'posmlp_retinanet', dynamic=True, extra=['--part', 'backbone'])
    import onnx
    assert [o.name for o in onnx.load(str(out)).graph.output] == ['feat_0', 'feat_1', 'feat_2']


@pytest.mark.slow
def test_swin_dynamic_export_is_really_static_only(tmp_path):
    """What the refusal says: exporting mmpretrain's Swin with dynamic sizes does not give one graph
    that is right at every size (the export fails or the graph is wrong at another size)."""
    from mmposmlp.deployment.onnx_export import (ExportError, TensorPath, build_export_model,
                                                 check_onnxruntime)
    cfg, ckpt, size = _case(tmp_path, 'imlp_swin_classifier')
    model = build_export_model(cfg, ckpt)
    wrapper = TensorPath(model).eval()
    x = torch.randn(1, 3, 224, 224)
    path = str(tmp_path / 'swin.onnx')
    try:
        with torch.no_grad():
            torch.onnx.export(wrapper, (x, ), path, dynamo=True, dynamic_shapes={'x': {2: torch.export.Dim.DYNAMIC,
                                                                                       3: torch.export.Dim.DYNAMIC}})
    except Exception:  # noqa: BLE001
        return
    try:
        checks = check_onnxruntime(path, wrapper, [torch.randn(1, 3, 160, 96)])
    except (ExportError, Exception):  # noqa: BLE001  (onnxruntime shape errors)
        return
    assert not all(c.ok for c in checks)
