"""PySlowFast's test-time video sampling as mmaction2 transforms (PosMLP-Video's official evaluation).

The official PosMLP-Video code is a PySlowFast fork; its Kinetics test loader takes, per view, a clip from
``decoder.decode`` (frame indices from ``get_start_end_idx`` and ``temporal_sampling``) and crops it with
``utils.spatial_sampling`` (``transform.random_short_side_scale_jitter`` with min = max, then
``transform.uniform_crop``). mmaction2's ``SampleFrames`` / ``Resize`` / ``ThreeCrop`` / ``CenterCrop``
place the clips, round the resized long side and centre the crops differently; these transforms give the
same frames and pixels. Register scope: ``mmposmlp`` (``type='mmposmlp.SlowFastSampleFrames'`` etc.).
"""
import math
from typing import Dict, List, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from mmcv.transforms import BaseTransform

from mmposmlp.registry import TRANSFORMS


def slowfast_clip_bounds(video_size: float, clip_size: float, clip_idx: int, num_clips: int,
                         use_offset: bool) -> Tuple[float, float]:
    """First and last (fractional) frame of test clip ``clip_idx`` of ``num_clips``.

    PySlowFast ``decoder.get_start_end_idx`` for ``clip_idx >= 0``: with ``delta = max(video_size -
    clip_size, 0)``, the start is ``delta * clip_idx / num_clips``, or with ``use_offset`` (DATA.
    USE_OFFSET_SAMPLING) ``clip_idx * floor(delta / (num_clips - 1))`` (``floor(delta / 2)`` for one clip);
    the end is ``start + clip_size - 1``.
    """
    delta = max(video_size - clip_size, 0)
    if use_offset:
        start = math.floor(delta / 2) if num_clips == 1 else clip_idx * math.floor(delta / (num_clips - 1))
    else:
        start = delta * clip_idx / num_clips
    return start, start + clip_size - 1


def slowfast_frame_indices(start: float, end: float, num_samples: int, num_frames: int) -> np.ndarray:
    """PySlowFast ``decoder.temporal_sampling``: ``num_samples`` float32 ``torch.linspace`` points from
    ``start`` to ``end``, clamped to ``[0, num_frames - 1]`` and truncated to integers."""
    index = torch.linspace(start, end, num_samples).clamp(0, num_frames - 1).long()
    return index.numpy()


@TRANSFORMS.register_module()
class SlowFastSampleFrames(BaseTransform):
    """Test-time clips of PySlowFast's Kinetics loader with its ``pyav`` decoding backend.

    Every view ``k`` of ``num_clips`` (TEST.NUM_ENSEMBLE_VIEWS) is decoded as ``decoder.pyav_decode``
    does: the clip spans ``clip_len * frame_interval / target_fps * fps`` source frames (so it covers the
    same time at any frame rate); ``get_start_end_idx`` over the stream's frame count gives its first and
    last frame, turned into a presentation-time window with ``int(idx * duration / frames)``; the frames
    whose pts lie in that window plus the first frame after it (``pyav_decode_stream`` with
    ``buffer_size=0``) are decoded; ``decoder.decode`` then takes the centred clip of that window
    (``get_start_end_idx(len(window), clip_size, 0, 1)``) and ``temporal_sampling`` picks ``clip_len``
    frames. A stream without a duration is decoded whole and the clip placed in all its frames.

    Needs ``results['video_reader']`` from ``PyAVInit`` (the packet timestamps are read from it, without
    decoding) and is followed by ``PyAVDecode``; sets ``frame_inds`` (views one after another),
    ``clip_len``, ``frame_interval`` and ``num_clips`` as mmaction's ``SampleFrames`` does.

    Args:
        clip_len: frames per clip (DATA.NUM_FRAMES).
        frame_interval: DATA.SAMPLING_RATE, in frames at ``target_fps``.
        num_clips: views along time (TEST.NUM_ENSEMBLE_VIEWS).
        target_fps: DATA.TARGET_FPS (30 in PySlowFast's defaults).
        use_offset: DATA.USE_OFFSET_SAMPLING.
    """

    def __init__(self, clip_len: int, frame_interval: int = 1, num_clips: int = 1, target_fps: float = 30,
                 use_offset: bool = False):
        if clip_len < 1 or frame_interval < 1 or num_clips < 1 or target_fps <= 0:
            raise ValueError('SlowFastSampleFrames needs clip_len, frame_interval, num_clips >= 1 and '
                             f'target_fps > 0, got {clip_len}, {frame_interval}, {num_clips}, {target_fps}')
        self.clip_len = clip_len
        self.frame_interval = frame_interval
        self.num_clips = num_clips
        self.target_fps = target_fps
        self.use_offset = use_offset

    @staticmethod
    def _stream_info(results: Dict):
        container = results.get('video_reader')
        streams = getattr(container, 'streams', None)
        if streams is None or not hasattr(container, 'demux'):
            raise TypeError('SlowFastSampleFrames reads packet timestamps from a PyAV container: put '
                            f"PyAVInit before it (got video_reader={type(container).__name__})")
        if not streams.video:
            raise ValueError(f"{results.get('filename', 'the video')} has no video stream")
        stream = streams.video[0]
        fps = float(stream.average_rate)
        frames_length, duration = stream.frames, stream.duration
        pts = sorted(p.pts for p in container.demux(stream) if p.pts is not None and p.size > 0)
        container.seek(0)  # rewind for PyAVDecode, which decodes from the first frame
        return fps, frames_length, duration, pts

    def clip_indices(self, fps: float, frames_length: int, duration, pts: Sequence[int]) -> List[np.ndarray]:
        """Frame indices (into the decoded frames, in presentation order) of every view."""
        clip_size = self.frame_interval * self.clip_len / self.target_fps * fps
        if not pts:
            raise ValueError('the video stream has no frames')
        views = []
        for k in range(self.num_clips):
            if duration is None or not frames_length:
                first, window = 0, len(pts)
                start, end = slowfast_clip_bounds(window, clip_size, k, self.num_clips, self.use_offset)
            else:
                start, end = slowfast_clip_bounds(frames_length, clip_size, k, self.num_clips, self.use_offset)
                timebase = duration / frames_length
                start_pts, end_pts = int(start * timebase), int(end * timebase)
                inside = [i for i, p in enumerate(pts) if start_pts <= p <= end_pts]
                after = [i for i, p in enumerate(pts) if p > end_pts][:1]
                chosen = inside + after
                if not chosen:
                    raise ValueError(f'no frame between pts {start_pts} and {end_pts}: the video is empty there')
                first, window = chosen[0], len(chosen)
                start, end = slowfast_clip_bounds(window, clip_size, 0, 1, self.use_offset)
            views.append(first + slowfast_frame_indices(start, end, self.clip_len, window))
        return views

    def transform(self, results: Dict) -> Dict:
        fps, frames_length, duration, pts = self._stream_info(results)
        results['frame_inds'] = np.concatenate(self.clip_indices(fps, frames_length, duration, pts))
        results['total_frames'] = len(pts)
        results['avg_fps'] = fps
        results['clip_len'] = self.clip_len
        results['frame_interval'] = self.frame_interval
        results['num_clips'] = self.num_clips
        return results

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(clip_len={self.clip_len}, frame_interval={self.frame_interval}, '
                f'num_clips={self.num_clips}, target_fps={self.target_fps}, use_offset={self.use_offset})')


@TRANSFORMS.register_module()
class SlowFastShortSideResize(BaseTransform):
    """Short side to ``scale``, long side ``floor(long / short * scale)``, torch bilinear
    (``align_corners=False``, no antialiasing) on float frames: PySlowFast
    ``transform.random_short_side_scale_jitter`` with ``min_size = max_size = scale`` (frames whose short
    side already equals ``scale`` are left untouched). The frames become float32 (not rounded), as the
    official loader resizes normalized float tensors.
    """

    def __init__(self, scale: int):
        if int(scale) != scale or scale < 1:
            raise ValueError(f'SlowFastShortSideResize needs a positive integer scale, got {scale!r}')
        self.scale = int(scale)

    def transform(self, results: Dict) -> Dict:
        imgs = results['imgs']
        h, w = imgs[0].shape[:2]
        if min(h, w) == self.scale:
            results['imgs'] = [np.asarray(img, dtype=np.float32) for img in imgs]
            return results
        if w < h:
            new_h, new_w = int(math.floor(h / w * self.scale)), self.scale
        else:
            new_h, new_w = self.scale, int(math.floor(w / h * self.scale))
        x = torch.from_numpy(np.stack(imgs).astype(np.float32)).permute(0, 3, 1, 2)
        y = F.interpolate(x, size=(new_h, new_w), mode='bilinear', align_corners=False)
        y = y.permute(0, 2, 3, 1).contiguous().numpy()
        results['imgs'] = list(y)
        results['img_shape'] = (new_h, new_w)
        results['scale_factor'] = np.array([new_w / w, new_h / h], dtype=np.float32)
        return results

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}(scale={self.scale})'


@TRANSFORMS.register_module()
class SlowFastUniformCrop(BaseTransform):
    """Square crops of PySlowFast ``transform.uniform_crop``: offsets ``ceil((size - crop) / 2)``, and
    along the long side the first, centre and last crop for ``spatial_idx`` 0, 1, 2 (mmaction's
    ``CenterCrop`` / ``ThreeCrop`` centre with floor).

    Args:
        crop_size: TEST_CROP_SIZE.
        spatial_indices: the crops to take, ``(1, )`` (TEST.NUM_SPATIAL_CROPS 1: the centre) or
            ``(0, 1, 2)`` (3 crops). Crops are stacked crop after crop, every one holding all frames, as
            mmaction's ``ThreeCrop`` does (``FormatShape`` then makes crop-major views).
    """

    def __init__(self, crop_size: int, spatial_indices: Sequence[int] = (1, )):
        spatial_indices = tuple(spatial_indices)
        if not spatial_indices or any(i not in (0, 1, 2) for i in spatial_indices):
            raise ValueError(f'SlowFastUniformCrop spatial_indices must be taken from 0, 1, 2 (first, centre, '
                             f'last along the long side), got {spatial_indices}')
        self.crop_size = int(crop_size)
        self.spatial_indices = spatial_indices

    def transform(self, results: Dict) -> Dict:
        imgs = results['imgs']
        h, w = imgs[0].shape[:2]
        c = self.crop_size
        if min(h, w) < c:
            raise ValueError(f'frames of {h}x{w} are smaller than the {c} crop: resize the short side to >= {c}')
        out, boxes = [], []
        for idx in self.spatial_indices:
            y, x = int(math.ceil((h - c) / 2)), int(math.ceil((w - c) / 2))
            if h > w:
                y = {0: 0, 1: y, 2: h - c}[idx]
            else:
                x = {0: 0, 1: x, 2: w - c}[idx]
            out.extend(img[y:y + c, x:x + c] for img in imgs)
            boxes.append([x, y, x + c, y + c])
        results['imgs'] = out
        results['crop_bbox'] = np.array(boxes if len(boxes) > 1 else boxes[0])
        results['img_shape'] = (c, c)
        return results

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}(crop_size={self.crop_size}, spatial_indices={self.spatial_indices})'
