"""Throughput and peak memory of a model (or its backbone) from a config, against other configs,
presets and the authors' official implementation, all in the same run.

Examples::

    # PosMLP-T classifier vs the official code (checkout of github.com/Zhicaiwww/PosMLP)
    python tools/analysis/benchmark.py configs/posmlp/posmlp-t_8xb120_in1k.py --batch 16 --shape 224 224 \\
        --reference-repo /path/to/PosMLP --iters 5
    # backbone throughput per GFLOP at 800x1344 vs mmdet's Swin-T
    python tools/analysis/benchmark.py configs/posmlp/mask-rcnn_posmlp-t_1x_coco.py --backbone-only \\
        --compare mmdet-swin-t --batch 1 --shape 800 1344 --per-gflop
    # eager vs torch.compile; with_cp vs without (peak training memory)
    python tools/analysis/benchmark.py CFG --backbone-only --compile-compare
    python tools/analysis/benchmark.py CFG --mode train --cp-compare --memory --iters 0
    # scaling plot (time and memory against input size), fitted exponents
    python tools/analysis/benchmark.py CFG --backbone-only --compare mmdet-swin-t \\
        --scaling 224 448 672 896 1344 --plot docs/figures/scaling.png

See ``tools/analysis/speed_memory.py`` for the measurement protocol (round-robin timing, medians,
ratios from one run; peak memory per candidate in a fresh process on CPU).
"""
import argparse
import json
import os.path as osp
import sys

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
sys.path.insert(0, ROOT)

from tools.analysis import speed_memory as B  # noqa: E402

MASK_RCNN_POSMLP_T = 'configs/posmlp/mask-rcnn_posmlp-t_1x_coco.py'
POSMLP_VIDEO_S = 'configs/posmlp_video/posmlp-video-s_4xb8-16x4x1-60e_kinetics400-rgb.py'
#: --suite name -> [(title, arguments, input shape)]; ``{det}`` / ``{video}`` are the batch sizes of SUITE_BATCH
SUITES = {
    'swin': [
        ('Mask R-CNN training step, whole detectors: PosMLP-T vs Swin-T (mmdet config)',
         [MASK_RCNN_POSMLP_T, '--compare', 'mmdet-mask-rcnn-swin-t', '--mode', 'train', '--batch', '{det}'],
         (800, 1344)),
        ('backbone training step: PosMLP-T vs Swin-T',
         [MASK_RCNN_POSMLP_T, '--backbone-only', '--compare', 'mmdet-swin-t', '--mode', 'train', '--batch', '{det}'],
         (800, 1344)),
        ('backbone inference: PosMLP-T vs Swin-T',
         [MASK_RCNN_POSMLP_T, '--backbone-only', '--compare', 'mmdet-swin-t', '--mode', 'infer', '--batch', '{det}'],
         (800, 1344)),
        ('training step, whole recognizers: PosMLP-Video-S vs Video Swin-T (mmaction2 config)',
         [POSMLP_VIDEO_S, '--compare', 'mmaction-swin3d-t-k400', '--mode', 'train', '--batch', '{video}'],
         (16, 224, 224)),
    ],
}
#: batch sizes of the suites: one image / clip on CPU; the training batches of the papers' GPUs on CUDA
SUITE_BATCH = {'cpu': dict(det=1, video=1), 'cuda': dict(det=2, video=8)}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('config', nargs='?', help='config file (or a preset: ' + ', '.join(B.PRESETS) + ')')
    p.add_argument('--suite', choices=sorted(SUITES), help='run a fixed set of comparisons and print their ratios: '
                   "'swin' = PosMLP-T vs Swin-T (whole Mask R-CNN training step, backbone training and inference at "
                   '800x1344) and PosMLP-Video-S vs Video Swin-T (training step), all with peak memory')
    p.add_argument('--compare', nargs='+', default=[], metavar='CONFIG',
                   help='other configs/presets measured in the same run, alternating')
    p.add_argument('--reference-repo', metavar='PATH',
                   help="root of the authors' official checkout; its model (same arch, same weights) is "
                        'checked for equal outputs, then measured too')
    p.add_argument('--mode', choices=['infer', 'train'], default='infer')
    p.add_argument('--amp', choices=['fp32', 'bf16', 'fp16'], default='fp32', help='autocast dtype')
    p.add_argument('--device', default='cpu')
    p.add_argument('--batch', type=int, default=1)
    p.add_argument('--shape', type=int, nargs='+', default=[224, 224], metavar='N',
                   help='H W for images, T H W for video clips')
    p.add_argument('--backbone-only', action='store_true')
    p.add_argument('--compile', action='store_true', help='torch.compile every candidate (the backbone '
                                                         'inside whole models)')
    p.add_argument('--compile-compare', action='store_true',
                   help='also measure the main config compiled, next to eager')
    p.add_argument('--compile-freezing', action='store_true',
                   help="inductor's inference freezing (torch._inductor.config.freezing = True: weights "
                        'become constants, weight-only work is folded; the recommended CPU inference '
                        'setting); inference only')
    p.add_argument('--channels-last', action='store_true',
                   help='weights and inputs in channels_last (channels_last_3d for clips) memory format')
    p.add_argument('--profile', metavar='TXT',
                   help='write a torch.profiler operator table of the first candidate (3 steps) to this file')
    p.add_argument('--module-profile', metavar='MD',
                   help='write, for every candidate, seconds per module (forward / backward, main operator kinds) of '
                        'one step and, in training, the bytes autograd saves per module, as markdown tables')
    p.add_argument('--with-cp', action='store_true', help='gradient checkpointing in the backbones')
    p.add_argument('--cp-compare', action='store_true', help='also measure the main config with with_cp=True')
    p.add_argument('--threads', type=int, help='torch.set_num_threads (default: torch default); 1 gives '
                   'steadier numbers on a shared, oversubscribed machine')
    p.add_argument('--iters', type=int, default=5, help='timed rounds (0: no timing)')
    p.add_argument('--warmup', type=int, default=1)
    p.add_argument('--memory', action='store_true', help='measure peak memory of one step per candidate')
    p.add_argument('--per-gflop', action='store_true',
                   help='count FLOPs (fvcore, 1 MAC = 1 FLOP) per image and report GFLOP/s = throughput x GFLOPs')
    p.add_argument('--tol', type=float, default=1e-4, help='max |logits difference| vs the reference')
    p.add_argument('--scaling', type=int, nargs='+', metavar='SIZE',
                   help='square input sizes (or clip lengths with --scale-axis t) for a scaling sweep')
    p.add_argument('--scale-axis', choices=['hw', 't'], default='hw')
    p.add_argument('--plot', help='PNG for --scaling')
    p.add_argument('--suite-scale', type=float, default=1.0,
                   help='with --suite: scale the image sides (not the clip length) by this factor (quick runs)')
    p.add_argument('--json', help='write all results here')
    args = p.parse_args(argv)
    if args.config is None and not args.suite:
        p.error('give a config (or preset) to measure, or --suite')
    return args


def _shape(args, override=None):
    dims = list(override or args.shape)
    if len(dims) not in (2, 3):
        raise SystemExit(f'--shape takes H W or T H W, got {dims}')
    if len(dims) == 3:
        return (args.batch, 3, *dims)
    return (args.batch, 3, *dims)


def _specs(args):
    specs = [B.Spec(args.config, backbone_only=args.backbone_only, with_cp=args.with_cp, compile=args.compile)]
    if args.compile_compare:
        specs.append(B.Spec(args.config, backbone_only=args.backbone_only, with_cp=args.with_cp, compile=True))
    if args.cp_compare:
        specs.append(B.Spec(args.config, backbone_only=args.backbone_only, with_cp=True, compile=args.compile))
    for c in args.compare:
        specs.append(B.Spec(c, backbone_only=args.backbone_only, with_cp=args.with_cp, compile=args.compile))
    if args.reference_repo:
        specs.append(B.Spec('reference', backbone_only=args.backbone_only, reference_repo=args.reference_repo,
                            reference_cfg=args.config))
    try:
        B.check_comparable(specs)
    except ValueError as err:
        raise SystemExit(str(err)) from None
    seen = {}
    for s in specs:  # unique names (the same config may be compared with itself)
        seen[s.name] = seen.get(s.name, 0) + 1
        if seen[s.name] > 1:
            s.name = f'{s.name}#{seen[s.name]}'
    return specs


def _flops(built, shape):
    from tools.analysis.params_flops import count_flops
    one = (1, *shape[1:])
    return count_flops(built.module if built.is_backbone else built.module, one, scope=built.scope)[0]


def run(args):
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    report = dict(machine=B.machine_description(), args=vars(args))
    specs = _specs(args)
    if args.scaling:
        return run_scaling(args, specs, report)
    shape = _shape(args)
    built = [B.build_candidate(s) for s in specs]
    scopes = sorted({b.scope for b in built if not b.is_backbone})
    if len(scopes) > 1:
        raise SystemExit(f'the whole models compared belong to different tasks ({", ".join(scopes)}): compare models '
                         'of one task, or backbones with --backbone-only.')
    if args.reference_repo:
        ours, ref = built[0], built[-1]
        if ours.is_backbone or ours.scope != 'mmpretrain':
            # equality is checked on the classifier: build it separately, same weights
            import mmposmlp.testing as T
            clf, _ = T.build_model_from_cfg(args.config)
            ref_full = B.randomize_(B.build_reference(args.config, args.reference_repo))
            chk = B.check_reference_equal(clf, ref_full, (2, 3, *shape[-2:]), args.tol)
        else:
            target = B.randomize_(ref.module)
            chk = B.check_reference_equal(ours.module, target, (min(args.batch, 2), *shape[1:]), args.tol)
        report['reference_check'] = chk
        print(f"reference check (perturbed official weights converted into ours, input {chk['shape']}): "
              f"max |ours - official| = {chk['max_abs_diff']:.3g} (tol {chk['tol']:g}, "
              f"max |logit| {chk['logits_abs_max']:.3g}) -> "
              f"{'EQUAL' if chk['equal'] else 'DIFFERENT'}")
        if not chk['equal']:
            print('outputs differ: the speed comparison would not be meaningful; stopping', file=sys.stderr)
            return report, 2
    rows = []
    if args.iters > 0:
        steps = {b.spec.name: B.make_step(b, shape, args.mode, args.amp, args.device, args.channels_last)
                 for b in built}
        times = B.time_alternating(steps, args.iters, args.warmup, args.device)
        rows = B.summarize(times, args.batch)
        report['times'] = times
        if args.profile:
            table = B.profile_step(steps[built[0].spec.name], args.device)
            with open(args.profile, 'w') as f:
                f.write(f'# {built[0].spec.name}: {args.mode}, {args.amp}, input {tuple(shape)}, '
                        f"{report['machine'].get('cuda') or report['machine']['cpu']}\n{table}\n")
            print(f'profile of {built[0].spec.name} written to {args.profile}')
        del steps
    else:
        rows = [dict(name=b.spec.name) for b in built]
    if args.module_profile:
        _module_profile(args, built, shape)
    if args.per_gflop:
        for r, b in zip(rows, built):
            if b.spec.compile:
                r['gflops'] = None
                continue
            r['gflops'] = _flops(b, shape) / 1e9
            if 'throughput' in r:
                r['gflop_per_s'] = r['throughput'] * r['gflops']
    built_measured = [b.measured for b in built]
    del built
    if args.memory:
        for r, s in zip(rows, specs):
            r['memory'] = B.measure_memory(s, shape, args.mode, args.amp, args.device, threads=args.threads,
                                           channels_last=args.channels_last)
    for r, b in zip(rows, built_measured):
        r['measured'] = b
    report['results'] = rows
    _print_rows(rows, args, shape)
    return report, 0


STEP_TEXT = {'train': 'training step = forward + loss + backward (no optimizer step)',
             'infer': 'inference step (no_grad, eval mode)'}


def _print_rows(rows, args, shape):
    unit = 'clips/s' if len(shape) == 5 else 'img/s'
    fmt = ' | channels_last' if args.channels_last else ''
    threads = f' | {args.threads} thread(s)' if args.threads else ''
    print(f"\n{STEP_TEXT[args.mode]} | {args.amp}{fmt} | {args.device}{threads} | input {tuple(shape)} | "
          f"{args.iters} rounds, medians")
    head = f"{'candidate':36s} {'measured':44s} {'median s':>9s} {unit:>9s} {'ratio*':>7s}"
    extra_g = any('gflops' in r for r in rows)
    if extra_g:
        head += f" {'GFLOPs':>8s} {'GFLOP/s':>8s}"
    if args.memory:
        head += f" {'peak MiB':>9s} {'mem ratio':>9s}"
    print(head)
    first_mem = rows[0].get('memory', {}).get('peak_mib') if rows else None
    for r in rows:
        line = f"{r['name'][:36]:36s} {r.get('measured', '')[:44]:44s}"
        if 'median_s' in r:
            line += f" {r['median_s']:9.4f} {r['throughput']:9.2f} {r['first_over_this']:7.3f}"
        else:
            line += f" {'-':>9s} {'-':>9s} {'-':>7s}"
        if extra_g:
            g = r.get('gflops')
            line += f" {g:8.2f}" if g else f" {'-':>8s}"
            line += f" {r['gflop_per_s']:8.2f}" if r.get('gflop_per_s') else f" {'-':>8s}"
        if args.memory:
            mem = r['memory'].get('peak_mib', float('nan'))
            ratio = first_mem / mem if first_mem and mem else float('nan')
            line += f" {mem:9.1f} {ratio:9.3f}"
        print(line)
    print('* ratio = throughput of the first candidate / this one (same run); '
          "mem ratio = the first candidate's peak memory / this one's" if args.memory else
          '* ratio = throughput of the first candidate / this one (same run)')


def _module_profile(args, built, shape):
    from tools.analysis import module_profile as MP
    parts = []
    for b in built:
        step = B.make_step(b, shape, args.mode, args.amp, args.device, args.channels_last)
        times = MP.time_by_module(step, b.module, warmup=max(args.warmup, 1))
        saved = MP.saved_bytes_by_module(step.loss, b.module) if args.mode == 'train' else None
        parts.append(f'### {b.spec.name}: {b.measured}\n\n{STEP_TEXT[args.mode]}, {args.amp}, input {tuple(shape)}, '
                     f'{args.threads or "default"} thread(s), one profiled step\n\n{MP.markdown(times, saved)}\n')
        del step
    with open(args.module_profile, 'w') as f:
        f.write('\n'.join(parts))
    print(f'module profile written to {args.module_profile}')


def run_scaling(args, specs, report):
    sizes = args.scaling
    results = {s.name: [] for s in specs}
    built = [B.build_candidate(s) for s in specs]
    for size in sizes:
        if args.scale_axis == 't':
            if len(args.shape) != 3:
                raise SystemExit('--scale-axis t needs --shape T H W (T is replaced by each size)')
            shape = (args.batch, 3, size, args.shape[1], args.shape[2])
            x = size
        else:
            shape = (args.batch, 3, *(([args.shape[0]] if len(args.shape) == 3 else []) + [size, size]))
            x = size * size // 16  # stride-4 tokens
        steps = {b.spec.name: B.make_step(b, shape, args.mode, args.amp, args.device) for b in built}
        times = B.time_alternating(steps, max(args.iters, 1), args.warmup, args.device)
        for row in B.summarize(times, args.batch):
            pt = dict(size=size, x=x, time_s=row['median_s'] / args.batch, ratio=row['first_over_this'])
            results[row['name']].append(pt)
        print(f'size {size}: ' + ', '.join(f"{n} {results[n][-1]['time_s']:.4f}s" for n in results), flush=True)
    del built
    if args.memory:
        for s in specs:
            for pt in results[s.name]:
                size = pt['size']
                if args.scale_axis == 't':
                    shape = (args.batch, 3, size, args.shape[1], args.shape[2])
                else:
                    shape = (args.batch, 3, *(([args.shape[0]] if len(args.shape) == 3 else []) + [size, size]))
                pt['mem_mib'] = B.measure_memory(s, shape, args.mode, args.amp, args.device,
                                                 threads=args.threads).get('peak_mib')
                print(f"memory {s.name} {size}: {pt['mem_mib']:.1f} MiB", flush=True)
    fits = {}
    for n, pts in results.items():
        xs = [p['x'] for p in pts]
        fits[n] = dict(time_exponent=B.fit_exponent(xs, [p['time_s'] for p in pts]) if len(pts) > 1 else None)
        if args.memory and all(p.get('mem_mib') and p['mem_mib'] > 0 for p in pts) and len(pts) > 1:
            fits[n]['memory_exponent'] = B.fit_exponent(xs, [p['mem_mib'] for p in pts])
    xlabel = 'clip length T' if args.scale_axis == 't' else 'tokens at stride 4 (H*W/16)'
    print(f'\nfitted exponents (y ~ x^k, x = {xlabel}):')
    for n, f in fits.items():
        print(f'  {n}: ' + ', '.join(f'{k} {v:.3f}' for k, v in f.items() if v is not None))
    report.update(scaling=results, fits=fits)
    if args.plot:
        m = report['machine']
        B.plot_scaling(results, args.plot, xlabel,
                       title=f"{args.mode}, batch {args.batch}, {args.amp}, {m['cpu']} ({m['torch_threads']} threads), "
                             f"torch {m['torch']}")
        print(f'plot written to {args.plot}')
    return report, 0


def suite_arguments(args) -> list:
    """``[(title, argv)]`` of the comparisons of ``args.suite`` with the shared options passed on."""
    batch = SUITE_BATCH['cuda' if str(args.device).startswith('cuda') else 'cpu']
    shared = ['--device', args.device, '--amp', args.amp, '--iters', str(args.iters), '--warmup', str(args.warmup)]
    shared += ['--threads', str(args.threads)] if args.threads else []
    shared += ['--memory'] if args.iters or args.memory else []
    out = []
    for title, argv, shape in SUITES[args.suite]:
        argv = [osp.join(ROOT, argv[0])] + [a.format(**batch) for a in argv[1:]]
        sides = [max(32, round(d * args.suite_scale / 32) * 32) for d in shape[-2:]]
        out.append((title, argv + ['--shape'] + [str(d) for d in (*shape[:-2], *sides)] + shared))
    return out


def run_suite(args):
    report = dict(machine=B.machine_description(), suite=args.suite, runs=[])
    for title, argv in suite_arguments(args):
        shown = ' '.join(osp.relpath(a, ROOT) if a.startswith(ROOT) else a for a in argv)
        print(f'\n=== {title}\n    tools/analysis/benchmark.py {shown}', flush=True)
        sub = parse_args(argv)
        rep, code = run(sub)
        if code:
            return report, code
        report['runs'].append(dict(title=title, argv=argv, args=vars(sub), results=rep['results']))
    print(f"\nsummary ({report['machine']['cpu'] or 'cpu'}, {args.threads or 'default'} thread(s), {args.amp}): "
          'speed ratio = PosMLP throughput / Swin throughput (> 1: PosMLP faster), memory ratio = PosMLP peak / '
          'Swin peak (< 1: PosMLP leaner), same process, candidates alternating')
    print(f"{'comparison':90s} {'speed ratio':>11s} {'memory ratio':>12s}")
    for run_ in report['runs']:
        ours, swin = run_['results'][0], run_['results'][1]
        speed = swin.get('first_over_this', float('nan'))  # PosMLP's throughput / Swin's
        m0, m1 = (r.get('memory', {}).get('peak_mib', float('nan')) for r in (ours, swin))
        run_['speed_ratio'], run_['memory_ratio'] = speed, m0 / m1 if m1 else float('nan')
        print(f"{run_['title'][:90]:90s} {speed:11.3f} {run_['memory_ratio']:12.3f}")
    return report, 0


def main(argv=None):
    args = parse_args(argv)
    if args.suite:
        report, code = run_suite(args)
        if args.json:
            with open(args.json, 'w') as f:
                json.dump(report, f, indent=1, default=str)
        return code
    if args.compile_freezing:
        if args.mode == 'train':
            raise SystemExit('--compile-freezing turns weights into constants: inference only (drop it for '
                             '--mode train)')
        if not (args.compile or args.compile_compare):
            raise SystemExit('--compile-freezing needs --compile or --compile-compare')
        import torch._inductor.config as inductor_config
        inductor_config.freezing = True
    report, code = run(args)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(report, f, indent=1, default=str)
    return code


if __name__ == '__main__':
    sys.exit(main())
