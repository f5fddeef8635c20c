"""Evaluation-pipeline parity for video: encoded mp4 -> network input, ours vs the official test loader.

The official PosMLP-Video code is a PySlowFast fork. Its Kinetics test loader (``datasets/kinetics.py``,
test mode; paper Sec. 4.2: 4 clips x 3 crops) does, per view ``i`` of ``NUM_ENSEMBLE_VIEWS x
NUM_SPATIAL_CROPS``: temporal index ``i // crops``, spatial index ``i % crops``; ``decoder.decode``
(``get_start_end_idx`` with DATA.USE_OFFSET_SAMPLING, a clip of ``NUM_FRAMES * SAMPLING_RATE /
TARGET_FPS * fps`` source frames, ``temporal_sampling`` = float32 ``torch.linspace`` truncated);
``tensor_normalize`` (0.45 / 0.225 on [0, 1] RGB); ``spatial_sampling`` = short side to TEST_CROP_SIZE
(``floor`` for the long side, torch bilinear, ``align_corners=False``) and ``uniform_crop`` (``ceil``
centre offsets). The reference below writes those definitions out on PyAV-decoded frames, as the fork's
``pyav`` backend does: decode-window frames are those whose pts lie in ``[int(start * duration /
frames), int(end * duration / frames)]`` plus the first one after (``pyav_decode_stream``,
``buffer_size=0``), then the centred clip of that window. The official yaml selects the ``torchvision``
backend (``torchvision.io._read_video_from_memory``, resizing inside FFmpeg); torchvision removed its video
decoding in 0.26, so it cannot run with the torchvision 0.28 of the supported stack; PyAV is PySlowFast's
default backend.

The Something-Something V1 test loader (``datasets/sth.py``, frame folders) takes per segment the frame
``round(seg * i) + int(seg / (views + 1) * (k + 1))`` (``get_seq_frames``, mmaction's ``UniformSample``
test mode), reads it with ``cv2.imdecode`` and keeps BGR, resizes the short side to TEST_CROP_SIZE and
crops at spatial index ``i % NUM_SPATIAL_CROPS`` (0, the first crop, for one crop). The official
Something-Something V2 configs (``configs/SSV2/SSV2_MLP_*.yaml``) select the same ``sth`` loader on frame
folders named ``{:06d}.jpg`` (not ``datasets/ssv2.py``); the SSv2 test builds our configs' own test dataset
on such folders.

Every PosMLP-Video Kinetics, SSv1 and SSv2 config's ``test_pipeline`` + ``data_preprocessor`` must give every
view within one grey level of the reference; mmaction2's own ``SampleFrames`` / ``Resize`` /
``ThreeCrop`` / ``CenterCrop`` must not (so the test can fail).
"""
import glob
import math
import os.path as osp

import numpy as np
import pytest
import torch

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))

# official facts (configs/K400/K400_MLP_*.yaml, slowfast/config/defaults.py, paper Sec. 4.2), as data
OFFICIAL_K400 = dict(SAMPLING_RATE=4, TARGET_FPS=30, USE_OFFSET_SAMPLING=True, TEST_CROP_SIZE=224,
                     MEAN=0.45, STD=0.225, NUM_ENSEMBLE_VIEWS=4, NUM_SPATIAL_CROPS=3)
# (fps, width, height, frames): odd sizes, landscape and portrait, 30 fps and 25 fps
VIDEOS = [(30, 170, 128, 120), (25, 128, 171, 97)]
# behind `slow`: 24 fps square, and a video shorter than one clip (the clip indices are clamped)
SLOW_VIDEOS = [(24, 160, 160, 150), (30, 171, 129, 41)]
_CACHE = {}


def _kinetics_configs():
    files = sorted(glob.glob(osp.join(ROOT, 'configs', 'posmlp_video', '*kinetics400*.py')))
    assert files, 'no PosMLP-Video Kinetics config found'
    return files


def _write_videos(tmp_path_factory, specs):
    """Small H.264 mp4s (yuv444p, so odd sizes are kept) whose every frame is different."""
    import av
    out = []
    for fps, w, h, n in specs:
        path = str(tmp_path_factory.mktemp('mp4') / f'clip_{w}x{h}_{fps}fps.mp4')
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
        with av.open(path, 'w') as container:
            stream = container.add_stream('libx264', rate=fps)
            stream.width, stream.height, stream.pix_fmt = w, h, 'yuv444p'
            stream.options = {'crf': '18', 'g': '12'}
            for t in range(n):
                img = np.stack([128 + 100 * np.sin(xx / (9 + c) + t / 5 + c) * np.cos(yy / 13 - t / 7)
                                for c in range(3)], -1)
                img[(t * 3) % (h - 10):(t * 3) % (h - 10) + 10, :12] = (255, 0, 0)  # moving edge
                frame = av.VideoFrame.from_ndarray(np.clip(img, 0, 255).astype(np.uint8), format='rgb24')
                for packet in stream.encode(frame):
                    container.mux(packet)
            for packet in stream.encode():
                container.mux(packet)
        out.append(path)
    return out


@pytest.fixture(scope='module')
def videos(tmp_path_factory):
    return _write_videos(tmp_path_factory, VIDEOS)


@pytest.fixture(scope='module')
def slow_videos(tmp_path_factory):
    return _write_videos(tmp_path_factory, SLOW_VIDEOS)


def _official_views(path, num_frames, facts=OFFICIAL_K400):
    """PySlowFast's test views (pyav backend) as (temporal index, spatial index) -> C x T x H x W."""
    key = ('official', path, num_frames, repr(sorted(facts.items())))
    if key not in _CACHE:
        _CACHE[key] = _official_views_uncached(path, num_frames, facts)
    return _CACHE[key]


def _official_views_uncached(path, num_frames, facts):
    import av
    with av.open(path) as container:
        stream = container.streams.video[0]
        fps, frames_length, duration = float(stream.average_rate), stream.frames, stream.duration
        decoded = [(f.pts, f.to_rgb().to_ndarray()) for f in container.decode(video=0)]
    pts = [p for p, _ in decoded]
    frames = torch.as_tensor(np.stack([img for _, img in decoded]))

    def start_end(size, clip, idx, n):  # decoder.get_start_end_idx, test mode
        delta = max(size - clip, 0)
        if facts['USE_OFFSET_SAMPLING']:
            start = math.floor(delta / 2) if n == 1 else idx * math.floor(delta / (n - 1))
        else:
            start = delta * idx / n
        return start, start + clip - 1

    clip = facts['SAMPLING_RATE'] * num_frames / facts['TARGET_FPS'] * fps
    crop = facts['TEST_CROP_SIZE']
    views = {}
    for k in range(facts['NUM_ENSEMBLE_VIEWS']):
        s, e = start_end(frames_length, clip, k, facts['NUM_ENSEMBLE_VIEWS'])
        tb = duration / frames_length
        lo, hi = int(s * tb), int(e * tb)
        window = [i for i, p in enumerate(pts) if lo <= p <= hi]
        window += [i for i, p in enumerate(pts) if p > hi][:1]
        s, e = start_end(len(window), clip, 0, 1)
        index = torch.linspace(s, e, num_frames).clamp(0, len(window) - 1).long()
        clip_frames = frames[window][index].float() / 255.0
        clip_frames = ((clip_frames - facts['MEAN']) / facts['STD']).permute(3, 0, 1, 2)  # C T H W
        h, w = clip_frames.shape[2:]
        if min(h, w) != crop:
            nh, nw = (int(math.floor(h / w * crop)), crop) if w < h else (crop, int(math.floor(w / h * crop)))
            clip_frames = torch.nn.functional.interpolate(clip_frames, size=(nh, nw), mode='bilinear',
                                                          align_corners=False)
        h, w = clip_frames.shape[2:]
        for sp in range(facts['NUM_SPATIAL_CROPS']):
            sp_idx = sp if facts['NUM_SPATIAL_CROPS'] > 1 else 1
            y, x = int(math.ceil((h - crop) / 2)), int(math.ceil((w - crop) / 2))
            if h > w:
                y = {0: 0, 1: y, 2: h - crop}[sp_idx]
            else:
                x = {0: 0, 1: x, 2: w - crop}[sp_idx]
            views[(k, sp)] = clip_frames[:, :, y:y + crop, x:x + crop]
    return views


def _ours(pipeline_cfg, data_preprocessor, path):
    """Network input of our pipeline: (crops * clips) x C x T x H x W, crop-major as FormatShape makes it.

    Configs sharing a pipeline and preprocessor (the -b / -l variants inherit the -s ones) share the result.
    """
    key = ('ours', repr(pipeline_cfg), repr(data_preprocessor), path)
    if key not in _CACHE:
        _CACHE[key] = _ours_uncached(pipeline_cfg, data_preprocessor, path)
    return _CACHE[key]


def _ours_uncached(pipeline_cfg, data_preprocessor, path_or_results):
    from mmengine.dataset import Compose
    from mmengine.registry import DefaultScope
    from mmaction.registry import MODELS
    pre_cfg = {k: v for k, v in data_preprocessor.items() if k != 'blending'}
    with DefaultScope.overwrite_default_scope('mmaction'):
        import mmaction.datasets  # noqa: F401
        import mmaction.models  # noqa: F401
        import mmposmlp.datasets  # noqa: F401
        pipeline = Compose(pipeline_cfg)
        pre = MODELS.build(pre_cfg)
    results = path_or_results if isinstance(path_or_results, dict) else dict(
        filename=path_or_results, label=-1, start_index=0, modality='RGB')
    packed = pipeline(results)
    return pre(dict(inputs=[packed['inputs']], data_samples=[packed['data_samples']]), False)['inputs'][0]


def _max_grey(ours, ref, num_clips, facts=OFFICIAL_K400):
    crops = facts['NUM_SPATIAL_CROPS']
    assert ours.shape[0] == crops * num_clips, f'{ours.shape[0]} views, the official test has {crops * num_clips}'
    worst = 0.0
    for (k, sp), view in ref.items():
        assert ours[sp * num_clips + k].shape == view.shape
        worst = max(worst, ((ours[sp * num_clips + k] - view).abs().max() * facts['STD'] * 255).item())
    return worst


def _check_config(cfg_path, videos):
    from mmengine.config import Config
    cfg = Config.fromfile(cfg_path)
    pipeline = cfg.test_dataloader.dataset.pipeline
    types = [t['type'] for t in pipeline]
    if 'mmposmlp.ShuffleFrames' in types:  # the Table 6 shuffle test: the base pipeline + ShuffleFrames
        base = Config.fromfile(cfg_path.replace('_shuffle-test', '')).test_dataloader.dataset.pipeline
        i = types.index('mmposmlp.ShuffleFrames')
        assert pipeline[:i] + pipeline[i + 1:] == base, 'the shuffle test must differ from its base by ShuffleFrames'
        return
    sampler = [t for t in pipeline if t['type'].endswith('SampleFrames')][0]
    num_frames, num_clips = sampler['clip_len'], sampler['num_clips']
    mean, std = cfg.model.data_preprocessor['mean'], cfg.model.data_preprocessor['std']
    assert mean == [OFFICIAL_K400['MEAN'] * 255] * 3 and std == [OFFICIAL_K400['STD'] * 255] * 3
    assert num_clips == OFFICIAL_K400['NUM_ENSEMBLE_VIEWS']
    for path in videos:
        ref = _official_views(path, num_frames)
        ours = _ours(pipeline, cfg.model.data_preprocessor, path)
        grey = _max_grey(ours, ref, num_clips)
        assert grey <= 1.0 + 1e-3, f'{osp.basename(cfg_path)} / {osp.basename(path)}: {grey:.2f} grey levels'


@pytest.mark.parametrize('cfg_path', _kinetics_configs(), ids=lambda p: osp.basename(p)[:-3])
def test_kinetics_test_input_matches_official(cfg_path, videos):
    _check_config(cfg_path, videos)


@pytest.mark.slow
@pytest.mark.parametrize('cfg_path', _kinetics_configs(), ids=lambda p: osp.basename(p)[:-3])
def test_kinetics_test_input_matches_official_more_videos(cfg_path, slow_videos):
    _check_config(cfg_path, slow_videos)


def test_mmaction_default_pipeline_differs_from_official(videos):
    """mmaction2's stock 4 x 3 test pipeline (PyAV decoding, to compare sampling and crops only) is off."""
    from mmengine.config import Config
    cfg = Config.fromfile(_kinetics_configs()[0])
    stock = [
        dict(type='PyAVInit'),
        dict(type='SampleFrames', clip_len=16, frame_interval=4, num_clips=4, test_mode=True),
        dict(type='PyAVDecode'),
        dict(type='Resize', scale=(-1, 224)),
        dict(type='ThreeCrop', crop_size=224),
        dict(type='FormatShape', input_format='NCTHW'),
        dict(type='PackActionInputs')
    ]
    for path in videos:
        grey = _max_grey(_ours(stock, cfg.model.data_preprocessor, path), _official_views(path, 16), 4)
        assert grey > 10, f'{osp.basename(path)}: mmaction2 default pipeline only {grey:.2f} grey levels off'


def test_slowfast_sampling_rejects_bad_arguments():
    from mmposmlp.datasets.slowfast_sampling import SlowFastSampleFrames, SlowFastUniformCrop
    with pytest.raises(ValueError, match='spatial_indices'):
        SlowFastUniformCrop(224, spatial_indices=(3, ))
    with pytest.raises(ValueError, match='clip_len'):
        SlowFastSampleFrames(clip_len=0)
    with pytest.raises(TypeError, match='PyAVInit'):
        SlowFastSampleFrames(clip_len=16)(dict(video_reader=object(), filename='x.mp4'))


# official facts (configs/SSV1/SSV1_MLP_*.yaml, datasets/sth.py; paper Sec. 4.2: 1 clip x 3 crops, the
# ablation tables 16x1x1), as data
OFFICIAL_SSV1 = dict(NUM_FRAMES=16, TEST_CROP_SIZE=224, MEAN=0.45, STD=0.225, NUM_ENSEMBLE_VIEWS=1,
                     IMAGE_TEMPLATE='{:05}.jpg')
# (width, height, frames): SSv1-like landscape frames and an odd portrait folder
FRAME_DIRS = [(176, 100, 37), (99, 131, 48)]


def _sthv1_configs():
    files = sorted(glob.glob(osp.join(ROOT, 'configs', 'posmlp_video', '*sthv1*.py')))
    assert files, 'no PosMLP-Video SSv1 config found'
    return files


def _write_frame_dirs(tmp_path_factory, template):
    """Folders of 1-based JPEG frames (cv2-encoded, as extracted SSv1/SSv2 frames), every frame different."""
    import cv2
    out = []
    for w, h, n in FRAME_DIRS:
        folder = tmp_path_factory.mktemp(f'frames_{w}x{h}')
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
        for t in range(n):
            img = np.stack([128 + 100 * np.sin(xx / (7 + 2 * c) + t / 3 + c) * np.cos(yy / 11 - t / 5)
                            for c in range(3)], -1)
            img[:, (t * 5) % (w - 8):(t * 5) % (w - 8) + 8] = (0, 40, 250)
            cv2.imwrite(str(folder / template.format(t + 1)),
                        np.clip(img, 0, 255).astype(np.uint8), [cv2.IMWRITE_JPEG_QUALITY, 90])
        out.append((str(folder), n))
    return out


@pytest.fixture(scope='module')
def frame_dirs(tmp_path_factory):
    return _write_frame_dirs(tmp_path_factory, OFFICIAL_SSV1['IMAGE_TEMPLATE'])


def _official_sth_views(folder, video_length, num_crops, facts=OFFICIAL_SSV1):
    """datasets/sth.py test views as (temporal index, spatial index) -> C x T x H x W (BGR channels)."""
    import cv2
    num_frames, views, crop = facts['NUM_FRAMES'], facts['NUM_ENSEMBLE_VIEWS'], facts['TEST_CROP_SIZE']
    out = {}
    for i in range(views * num_crops):
        k, sp = i // num_crops, i % num_crops
        seg = float(video_length - 1) / num_frames
        step = seg / (views + 1)
        seq = [int(np.round(seg * j)) + int(step * (k + 1)) + 1 for j in range(num_frames)]
        imgs = []
        for f in seq:
            with open(osp.join(folder, facts['IMAGE_TEMPLATE'].format(f)), 'rb') as fh:
                imgs.append(cv2.imdecode(np.frombuffer(fh.read(), np.uint8), cv2.IMREAD_COLOR))
        frames = torch.as_tensor(np.stack(imgs)).float() / 255.0
        frames = ((frames - facts['MEAN']) / facts['STD']).permute(3, 0, 1, 2)
        h, w = frames.shape[2:]
        if min(h, w) != crop:
            nh, nw = (int(math.floor(h / w * crop)), crop) if w < h else (crop, int(math.floor(w / h * crop)))
            frames = torch.nn.functional.interpolate(frames, size=(nh, nw), mode='bilinear', align_corners=False)
        h, w = frames.shape[2:]
        y, x = int(math.ceil((h - crop) / 2)), int(math.ceil((w - crop) / 2))
        if h > w:
            y = {0: 0, 1: y, 2: h - crop}[sp]
        else:
            x = {0: 0, 1: x, 2: w - crop}[sp]
        out[(k, sp)] = frames[:, :, y:y + crop, x:x + crop]
    return out


def _ours_frames(pipeline_cfg, data_preprocessor, folder, n):
    key = ('ours-frames', repr(pipeline_cfg), repr(data_preprocessor), folder)
    if key not in _CACHE:
        results = dict(frame_dir=folder, total_frames=n, label=-1, start_index=1, offset=0,
                       filename_tmpl=OFFICIAL_SSV1['IMAGE_TEMPLATE'], modality='RGB')
        _CACHE[key] = _ours_uncached(pipeline_cfg, data_preprocessor, results)
    return _CACHE[key]


def _sth_num_crops(cfg_path):
    """The paper's crops: 16x1x1 for the ablation variants (Tables 3, 5, 7, 8), else 1 clip x 3 crops."""
    return 1 if osp.basename(cfg_path).startswith('posmlp-video-s-') else 3


@pytest.mark.parametrize('cfg_path', _sthv1_configs(), ids=lambda p: osp.basename(p)[:-3])
def test_sthv1_test_input_matches_official(cfg_path, frame_dirs):
    from mmengine.config import Config
    cfg = Config.fromfile(cfg_path)
    pipeline = cfg.test_dataloader.dataset.pipeline
    crops = _sth_num_crops(cfg_path)
    facts = dict(OFFICIAL_SSV1, NUM_SPATIAL_CROPS=crops)
    mean, std = cfg.model.data_preprocessor['mean'], cfg.model.data_preprocessor['std']
    assert mean == [OFFICIAL_SSV1['MEAN'] * 255] * 3 and std == [OFFICIAL_SSV1['STD'] * 255] * 3
    for folder, n in frame_dirs:
        ref = _official_sth_views(folder, n, crops)
        ours = _ours_frames(pipeline, cfg.model.data_preprocessor, folder, n)
        grey = _max_grey(ours, ref, OFFICIAL_SSV1['NUM_ENSEMBLE_VIEWS'], facts)
        assert grey <= 1.0 + 1e-3, f'{osp.basename(cfg_path)} / {osp.basename(folder)}: {grey:.2f} grey levels'


@pytest.mark.parametrize('crops', [1, 3])
def test_mmaction_default_frame_pipeline_differs_from_official(crops, frame_dirs):
    """mmaction2's stock Resize + CenterCrop / ThreeCrop, even in BGR, is off the official SSv1 input."""
    from mmengine.config import Config
    cfg = Config.fromfile(_sthv1_configs()[0])
    stock = [
        dict(type='UniformSample', clip_len=16, test_mode=True),
        dict(type='RawFrameDecode'),
        dict(type='Resize', scale=(-1, 224)),
        dict(type='ThreeCrop', crop_size=224) if crops == 3 else dict(type='CenterCrop', crop_size=224),
        dict(type='FormatShape', input_format='NCTHW'),
        dict(type='PackActionInputs')
    ]
    pre = dict(cfg.model.data_preprocessor, to_rgb=True)
    facts = dict(OFFICIAL_SSV1, NUM_SPATIAL_CROPS=crops)
    for folder, n in frame_dirs:
        grey = _max_grey(_ours_frames(stock, pre, folder, n), _official_sth_views(folder, n, crops), 1, facts)
        assert grey > 10, f'{osp.basename(folder)}: mmaction2 default pipeline only {grey:.2f} grey levels off'


# official facts (configs/SSV2/SSV2_MLP_{S,B}{16,32}.yaml: TRAIN/TEST.DATASET sth, IMAGE_TEMPLATE "{:06d}.jpg",
# TEST_CROP_SIZE 224, no MEAN/STD override; paper Sec. 4.2: 1 clip x 3 crops), as data
OFFICIAL_SSV2 = dict(OFFICIAL_SSV1, IMAGE_TEMPLATE='{:06d}.jpg', NUM_SPATIAL_CROPS=3)


def _sthv2_configs():
    files = sorted(glob.glob(osp.join(ROOT, 'configs', 'posmlp_video', '*sthv2*.py')))
    assert files, 'no PosMLP-Video SSv2 config found'
    return files


@pytest.fixture(scope='module')
def sthv2_frame_dirs(tmp_path_factory):
    """SSv2 frame folders with their annotation list ("folder num_frames label", the official list format)."""
    dirs = _write_frame_dirs(tmp_path_factory, OFFICIAL_SSV2['IMAGE_TEMPLATE'])
    ann = tmp_path_factory.mktemp('ann') / 'sthv2_val_list_rawframes.txt'
    ann.write_text(''.join(f'{osp.basename(folder)} {n} {i}\n' for i, (folder, n) in enumerate(dirs)))
    return str(ann), osp.dirname(dirs[0][0]), dirs


def _ours_dataset(cfg, ann_file, root):
    """Network inputs of every item of the config's own test dataset (its type, file name template and
    start index) built on ``ann_file`` / ``root``."""
    key = ('ours-dataset', repr(cfg.test_dataloader.dataset), repr(cfg.model.data_preprocessor), ann_file)
    if key not in _CACHE:
        from mmengine.registry import DefaultScope
        from mmaction.registry import DATASETS, MODELS
        pre_cfg = {k: v for k, v in cfg.model.data_preprocessor.items() if k != 'blending'}
        with DefaultScope.overwrite_default_scope('mmaction'):
            import mmaction.datasets  # noqa: F401
            import mmaction.models  # noqa: F401
            import mmposmlp.datasets  # noqa: F401
            dataset = DATASETS.build(dict(cfg.test_dataloader.dataset, ann_file=ann_file,
                                          data_prefix=dict(img=root)))
            pre = MODELS.build(pre_cfg)
        out = []
        for i in range(len(dataset)):
            packed = dataset[i]
            out.append(pre(dict(inputs=[packed['inputs']], data_samples=[packed['data_samples']]),
                           False)['inputs'][0])
        _CACHE[key] = out
    return _CACHE[key]


@pytest.mark.parametrize('cfg_path', _sthv2_configs(), ids=lambda p: osp.basename(p)[:-3])
def test_sthv2_test_input_matches_official(cfg_path, sthv2_frame_dirs):
    from mmengine.config import Config
    cfg = Config.fromfile(cfg_path)
    if 'shuffle-test' in cfg_path:  # the Table 6 shuffle test: the base pipeline + ShuffleFrames
        pipeline = cfg.test_dataloader.dataset.pipeline
        types = [t['type'] for t in pipeline]
        base = Config.fromfile(cfg_path.replace('_shuffle-test', '')).test_dataloader.dataset.pipeline
        i = types.index('mmposmlp.ShuffleFrames')
        assert pipeline[:i] + pipeline[i + 1:] == base, 'the shuffle test must differ from its base by ShuffleFrames'
        return
    mean, std = cfg.model.data_preprocessor['mean'], cfg.model.data_preprocessor['std']
    assert mean == [OFFICIAL_SSV2['MEAN'] * 255] * 3 and std == [OFFICIAL_SSV2['STD'] * 255] * 3
    ann_file, root, dirs = sthv2_frame_dirs
    ours = _ours_dataset(cfg, ann_file, root)
    assert len(ours) == len(dirs)
    for (folder, n), view in zip(dirs, ours):
        ref = _official_sth_views(folder, n, OFFICIAL_SSV2['NUM_SPATIAL_CROPS'], OFFICIAL_SSV2)
        grey = _max_grey(view, ref, OFFICIAL_SSV2['NUM_ENSEMBLE_VIEWS'], OFFICIAL_SSV2)
        assert grey <= 1.0 + 1e-3, f'{osp.basename(cfg_path)} / {osp.basename(folder)}: {grey:.2f} grey levels'
