"""Data transforms (registered in ``mmposmlp.registry.TRANSFORMS``; use ``type='mmposmlp.X'``)."""
from typing import Dict, Optional

import numpy as np
from mmcv.transforms import BaseTransform

from mmposmlp.registry import TRANSFORMS


@TRANSFORMS.register_module()
class ShuffleFrames(BaseTransform):
    """Randomly permute the frames inside every sampled clip (PosMLP-Video Table 6).

    Put it right after the decoding transform (``DecordDecode``/``PyAVDecode``/
    ``RawFrameDecode``) of a test pipeline: ``results['imgs']`` holds ``num_clips * clip_len``
    frames, clip after clip; each clip gets its own random order (all other keys untouched),
    so order-sensitive models lose accuracy while order-agnostic ones do not.

    Args:
        seed: seed of the permutations; ``None`` draws from numpy's global RNG. With a seed,
            the permutation of a sample depends on the seed and its ``filename``/``frame_dir``
            only (reproducible across workers).
    """

    def __init__(self, seed: Optional[int] = 0):
        self.seed = seed

    def _rng(self, results: Dict) -> np.random.Generator:
        if self.seed is None:
            return np.random.default_rng()
        name = str(results.get('filename', results.get('frame_dir', '')))
        return np.random.default_rng([self.seed, sum(map(ord, name)) & 0xFFFFFFFF, len(name)])

    def transform(self, results: Dict) -> Dict:
        if 'imgs' not in results:
            raise KeyError('ShuffleFrames needs decoded frames (results["imgs"]): place it after '
                           'DecordDecode / PyAVDecode / RawFrameDecode')
        imgs = results['imgs']
        clip_len = int(results.get('clip_len', len(imgs)))
        num_clips = len(imgs) // clip_len if clip_len else 0
        if clip_len <= 0 or num_clips * clip_len != len(imgs):
            raise ValueError(f'{len(imgs)} frames cannot be split into clips of {clip_len}')
        rng = self._rng(results)
        order = np.concatenate([c * clip_len + rng.permutation(clip_len) for c in range(num_clips)])
        results['imgs'] = [imgs[i] for i in order]
        if 'frame_inds' in results and len(results['frame_inds']) == len(imgs):
            results['frame_inds'] = np.asarray(results['frame_inds'])[order]
        results['frame_shuffle_order'] = order
        return results

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}(seed={self.seed})'
