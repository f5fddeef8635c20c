"""Wave-MLP backbone (Tang et al., CVPR 2022, https://arxiv.org/abs/2111.12294).

Re-implemented from the paper and checked against the official model
(huawei-noah/Efficient-AI-Backbones ``wavemlp_pytorch/models/wavemlp.py``) through the official
test vectors. ``converters.wave_mlp.convert_official_wavemlp`` maps official (timm-style) checkpoints to our keys.
"""
import copy
from typing import Optional, Sequence, Union

import torch
import torch.nn as nn
import torch.utils.checkpoint as cp
from mmcv.cnn import build_norm_layer
from mmcv.cnn.bricks import DropPath
from mmengine.model import BaseModule

from mmposmlp.registry import MODELS
from .base import FrozenStagesMixin, stage_reductions
from ..checkpoints import load_pretrained_init_cfg, pretrained_init_cfg
from ..converters.wave_mlp import checkpoint_filter_fn
from ..layers.patm import PATM, PHASE_MODES, WaveMLPFFN, check_window  # noqa: F401  (registers WaveMLPFFN)

BN = dict(type='BN')
GN1 = dict(type='GN', num_groups=1)  # official ``MyNorm`` = nn.GroupNorm(1, C), eps 1e-5


class WaveMLPConvEmbed(nn.Module):
    """Strided conv + optional norm: the stem (7x7/4, pad 2) and the downsamples (3x3/2, pad 1)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding,
                 norm_cfg: Optional[dict]):
        super().__init__()
        self.proj = nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding)
        self.norm = build_norm_layer(norm_cfg, out_channels)[1] if norm_cfg else nn.Identity()

    def forward(self, x):
        return self.norm(self.proj(x))


class WaveBlock(BaseModule):
    """``x + DropPath(PATM(norm1(x)))`` then ``x + DropPath(FFN(norm2(x)))`` (Fig. 2)."""

    def __init__(self, embed_dims, mlp_ratio, norm_cfg, phase_mode='fc', window_size=7,
                 phase_norm_cfg=BN, ffn_cfg=None, drop_rate=0., drop_path_rate=0.,
                 with_cp=False, qkv_bias=False, token_grid=None, init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        self.with_cp = with_cp
        self.norm1 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.token_mixer = PATM(embed_dims, phase_mode=phase_mode, window_size=window_size,
                                phase_norm_cfg=phase_norm_cfg, proj_drop=drop_rate, qkv_bias=qkv_bias,
                                token_grid=token_grid)
        self.norm2 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.ffn = build_ffn(ffn_cfg, embed_dims, mlp_ratio)
        self.drop_path = DropPath(drop_path_rate) if drop_path_rate > 0 else nn.Identity()

    def _inner_forward(self, x):
        x = x + self.drop_path(self.token_mixer(self.norm1(x)))
        return x + self.drop_path(self.ffn(self.norm2(x)))

    def forward(self, x):
        if self.with_cp and x.requires_grad:
            return cp.checkpoint(self._inner_forward, x, use_reentrant=False)
        return self._inner_forward(x)


def _stage_grids(window_size, img_size, downsamples) -> Optional[tuple]:
    """``((H, W), [stage grids])`` of a ``window_size='all'`` model: the stem (7x7/4, pad 2) and each
    downsample (3x3/2, pad 1) as conv output sizes; None for windowed models."""
    if window_size != 'all':
        check_window(window_size, None)
        if img_size is not None:
            raise ValueError(f"img_size={img_size!r} is only used with window_size='all' (Wave-MLP Table 7 "
                             f'"All"); a {window_size!r}-token window runs at any input size: remove img_size')
        return None
    if img_size is None:
        raise ValueError("window_size='all' (Wave-MLP Table 7 \"All\") fixes the input size: give img_size, "
                         'e.g. img_size=224 as the paper evaluates it')
    hw = tuple(img_size) if isinstance(img_size, (tuple, list)) else (img_size, img_size)
    size = [(v + 2 * 2 - 7) // 4 + 1 for v in hw]
    grids = [tuple(size)]
    for d in downsamples:
        if d:
            size = [(v + 2 * 1 - 3) // 2 + 1 for v in size]
        grids.append(tuple(size))
    return hw, grids


def build_ffn(ffn_cfg: Optional[dict], embed_dims: int, mlp_ratio: float) -> nn.Module:
    """Build the channel MLP from ``ffn_cfg``.

    The backbone passes ``embed_dims=C`` and ``feedforward_channels=int(C * mlp_ratio)``
    (the official hidden width); every other kwarg (``drop``, ``act_cfg``, ...) comes from
    ``ffn_cfg`` itself, and keys given in ``ffn_cfg`` win. The module is called as
    ``ffn(x)`` on NCHW maps, i.e. ``forward(x, hw_shape=None)`` must accept NCHW (the contract
    of ``mmposmlp.WaveMLPFFN`` and ``mmposmlp.IMLP``).
    """
    cfg = dict(type='mmposmlp.WaveMLPFFN') if ffn_cfg is None else copy.deepcopy(dict(ffn_cfg))
    cfg.setdefault('embed_dims', embed_dims)
    cfg.setdefault('feedforward_channels', int(embed_dims * mlp_ratio))
    return MODELS.build(cfg)


@MODELS.register_module()
class WaveMLP(FrozenStagesMixin, BaseModule):
    """Wave-MLP backbone (`An Image Patch is a Wave <https://arxiv.org/abs/2111.12294>`_).

    Archs (paper Table 2/8 and the official model definitions; T* = ``'t-dw'``):

    ====  ========  ==============  ==========  ========  =======  =========  =======
    arch  depths    embed_dims      mlp_ratios  norm      ds norm  phase      params*
    ====  ========  ==============  ==========  ========  =======  =========  =======
    t-dw  2,2,4,2   64,128,320,512  4,4,4,4     BN        yes      depthwise  15.29M
    t     2,2,4,2   64,128,320,512  4,4,4,4     BN        yes      fc         17.19M
    s     2,3,10,3  64,128,320,512  4,4,4,4     GN(1,C)   yes      fc         30.71M
    m     3,4,18,3  64,128,320,512  8,8,4,4     GN(1,C)   no       fc         44.06M
    b     2,2,18,2  96,192,384,768  4,4,4,4     GN(1,C)   no       fc         63.59M
    ====  ========  ==============  ==========  ========  =======  =========  =======

    (* with the 1000-class linear head; "ds norm" = norms after the stem and downsamples,
    the official ``ds_use_norm``.) The phase-estimation norm is BatchNorm in every arch.

    Args:
        arch (str | dict): a name above (aliases ``tiny-dw``, ``tiny``, ``small``, ``medium``,
            ``base``) or a dict with ``depths``, ``embed_dims``, ``mlp_ratios`` and optionally
            ``norm_cfg`` (default BN), ``stem_norm`` (default True; the official ``ds_use_norm``)
            and ``phase_mode`` (``'fc'`` default or ``'depthwise'``).
        in_channels (int): input channels. Defaults to 3.
        window_size (int | str): token-FC window (paper Table 7). Defaults to 7. ``'all'`` (Table 7
            "All") connects whole rows / columns and fixes the input size to ``img_size``.
        img_size (int | Sequence[int], optional): the only input size of a ``window_size='all'``
            model (Table 7 evaluates it at 224); refused with any other window size.
        out_indices (Sequence[int]): stages whose outputs are returned, each through an output
            norm ``norm{i}`` of the arch's norm type (official ``fork_feat`` norms). For
            classification use ``(3,)``: ``norm3`` is the official final ``norm``.
        phase_mode (str, optional): overrides the arch's phase estimation (``'fc'`` or
            ``'depthwise'``). The detector/segmentor sizes of paper Tables 3-4 match
            ``'depthwise'`` at every size (see configs/wavemlp/README.md).
        norm_cfg (dict, optional): overrides the arch's norm (e.g. SyncBN for dense training).
        phase_norm_cfg (dict): norm of the phase estimation. Defaults to BN.
        ffn_cfg (dict, optional): channel MLP, built with ``embed_dims``/``feedforward_channels``
            (see :func:`build_ffn`). Defaults to ``mmposmlp.WaveMLPFFN`` (official ``Mlp``).
        drop_rate (float): dropout after each PATM projection.
        drop_path_rate (float): stochastic depth, linearly increasing over all blocks.
        frozen_stages (int): -1 freezes nothing, 0 the stem, ``k`` the stem, the first ``k``
            stages, the downsamples between them and their output norms (shared convention,
            :class:`~mmposmlp.models.backbones.base.FrozenStagesMixin`).
        norm_eval (bool): keep every BatchNorm in eval mode during training.
        with_cp (bool): gradient checkpointing per block.
        qkv_bias (bool): biases of PATM's amplitude and channel FCs (official ``qkv_bias``).
        downsamples (Sequence[bool], optional): per stage after the first, whether a downsample
            precedes it (default all; official ``transitions[i] = False`` with equal channels:
            none, the stage keeps its predecessor's resolution).
        init_cfg (dict, optional): ``dict(type='Pretrained', checkpoint=..., prefix=None)``
            loads converted (or official) weights through ``mmposmlp.models.load_pretrained``,
            failing on any missing backbone key except new output norms ``norm0-2``.
    """

    arch_zoo = {
        **dict.fromkeys(['t-dw', 'tiny-dw'], dict(
            depths=[2, 2, 4, 2], embed_dims=[64, 128, 320, 512], mlp_ratios=[4, 4, 4, 4],
            norm_cfg=BN, stem_norm=True, phase_mode='depthwise')),
        **dict.fromkeys(['t', 'tiny'], dict(
            depths=[2, 2, 4, 2], embed_dims=[64, 128, 320, 512], mlp_ratios=[4, 4, 4, 4],
            norm_cfg=BN, stem_norm=True, phase_mode='fc')),
        **dict.fromkeys(['s', 'small'], dict(
            depths=[2, 3, 10, 3], embed_dims=[64, 128, 320, 512], mlp_ratios=[4, 4, 4, 4],
            norm_cfg=GN1, stem_norm=True, phase_mode='fc')),
        **dict.fromkeys(['m', 'medium'], dict(
            depths=[3, 4, 18, 3], embed_dims=[64, 128, 320, 512], mlp_ratios=[8, 8, 4, 4],
            norm_cfg=GN1, stem_norm=False, phase_mode='fc')),
        **dict.fromkeys(['b', 'base'], dict(
            depths=[2, 2, 18, 2], embed_dims=[96, 192, 384, 768], mlp_ratios=[4, 4, 4, 4],
            norm_cfg=GN1, stem_norm=False, phase_mode='fc')),
    }
    num_stages = 4

    def __init__(self,
                 arch: Union[str, dict] = 't',
                 in_channels: int = 3,
                 window_size: Union[int, str] = 7,
                 img_size: Optional[Union[int, Sequence[int]]] = None,
                 out_indices: Sequence[int] = (3,),
                 phase_mode: Optional[str] = None,
                 norm_cfg: Optional[dict] = None,
                 phase_norm_cfg: dict = BN,
                 ffn_cfg: Optional[dict] = None,
                 drop_rate: float = 0.,
                 drop_path_rate: float = 0.,
                 frozen_stages: int = -1,
                 norm_eval: bool = False,
                 with_cp: bool = False,
                 qkv_bias: bool = False,
                 downsamples: Optional[Sequence[bool]] = None,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        pretrained_init_cfg(self)  # refuse a misspelt Pretrained init_cfg when built, not when loading
        arch = self.arch_settings = self._parse_arch(arch)
        downsamples = self._checked_downsamples(downsamples)
        self.depths = list(arch['depths'])
        self.embed_dims = list(arch['embed_dims'])
        self.mlp_ratios = list(arch['mlp_ratios'])
        self.phase_mode = phase_mode or arch.get('phase_mode', 'fc')
        if self.phase_mode not in PHASE_MODES:
            raise ValueError(f'phase_mode must be one of {PHASE_MODES}, got {self.phase_mode!r}')
        self.norm_cfg = copy.deepcopy(norm_cfg or arch.get('norm_cfg', BN))
        stem_norm_cfg = self.norm_cfg if arch.get('stem_norm', True) else None
        self.in_channels = in_channels
        self.window_size = window_size
        grids = _stage_grids(window_size, img_size, downsamples)
        self.img_size, self.stage_grids = grids if grids else (None, None)
        self._set_out_indices(out_indices, self.num_stages)
        self._set_frozen_stages(frozen_stages, self.num_stages, norm_eval)

        # stem: hard-wired 7x7 stride-4 pad-2 conv (official PatchEmbedOverlapping)
        self.patch_embed = WaveMLPConvEmbed(in_channels, self.embed_dims[0], 7, 4, 2, stem_norm_cfg)
        block_cfg = dict(phase_mode=self.phase_mode, window_size=window_size, phase_norm_cfg=phase_norm_cfg,
                         ffn_cfg=ffn_cfg, drop_rate=drop_rate, with_cp=with_cp, qkv_bias=qkv_bias)
        self._build_stages(downsamples, stem_norm_cfg, drop_path_rate, block_cfg)
        for i in self.out_indices:
            self.add_module(f'norm{i}', build_norm_layer(self.norm_cfg, self.embed_dims[i])[1])
        self._set_feature_info(self.embed_dims, stage_reductions(4, downsamples))
        self._freeze_stages()

    def _checked_downsamples(self, downsamples: Optional[Sequence[bool]]):
        """One bool per stage after the first (default all True); a stage without one keeps its channels."""
        downsamples = [True] * (self.num_stages - 1) if downsamples is None else [bool(d) for d in downsamples]
        if len(downsamples) != self.num_stages - 1:
            raise ValueError(f'downsamples needs {self.num_stages - 1} entries (one per stage after the first), '
                             f'got {len(downsamples)}')
        dims = self.arch_settings['embed_dims']
        for i, d in enumerate(downsamples):
            if not d and dims[i] != dims[i + 1]:
                raise ValueError(f'stage {i + 1} has no downsample but changes channels: set downsamples[{i}]=True')
        return downsamples

    def _build_stages(self, downsamples, stem_norm_cfg: Optional[dict], drop_path_rate: float,
                      block_cfg: dict) -> None:
        """The stages of Wave blocks and the (3x3/2) downsamples between them."""
        total = sum(self.depths)
        dpr = [drop_path_rate * k / (total - 1) if total > 1 else 0. for k in range(total)]
        self.stages = nn.ModuleList()
        self.downsamples = nn.ModuleList()
        k = 0
        for i, (depth, dims, ratio) in enumerate(zip(self.depths, self.embed_dims, self.mlp_ratios)):
            if i > 0:
                self.downsamples.append(WaveMLPConvEmbed(self.embed_dims[i - 1], dims, 3, 2, 1, stem_norm_cfg)
                                        if downsamples[i - 1] else nn.Identity())
            grid = self.stage_grids[i] if self.stage_grids else None
            self.stages.append(nn.Sequential(*[
                WaveBlock(dims, ratio, self.norm_cfg, drop_path_rate=dpr[k + j], token_grid=grid, **block_cfg)
                for j in range(depth)]))
            k += depth

    def _parse_arch(self, arch) -> dict:
        if isinstance(arch, str):
            key = arch.lower()
            if key not in self.arch_zoo:
                raise ValueError(f'unknown Wave-MLP arch {arch!r}; choose one of '
                                 f'{sorted(self.arch_zoo)} or pass a dict with depths, '
                                 'embed_dims and mlp_ratios')
            return copy.deepcopy(self.arch_zoo[key])
        if not isinstance(arch, dict):
            raise TypeError(f'arch must be a str or dict, got {type(arch).__name__}')
        required = {'depths', 'embed_dims', 'mlp_ratios'}
        missing = required - set(arch)
        if missing:
            raise ValueError(f'custom arch dict is missing {sorted(missing)} '
                             f'(needs {sorted(required)})')
        unknown = set(arch) - required - {'norm_cfg', 'stem_norm', 'phase_mode'}
        if unknown:
            raise ValueError(f'custom arch dict has unknown keys {sorted(unknown)}; allowed: '
                             'depths, embed_dims, mlp_ratios, norm_cfg, stem_norm, phase_mode')
        for key in required:
            if len(arch[key]) != self.num_stages:
                raise ValueError(f'arch[{key!r}] needs {self.num_stages} entries, got {arch[key]}')
        if arch.get('phase_mode', 'fc') not in PHASE_MODES:
            raise ValueError(f"arch['phase_mode'] must be one of {PHASE_MODES}, "
                             f"got {arch['phase_mode']!r}")
        return copy.deepcopy(dict(arch))

    # ------------------------------------------------------------------ forward
    def forward_stages(self, x: torch.Tensor):
        """Raw outputs of the 4 stages (after their blocks, before the next downsample and
        without output norms): the official ``network[0/2/4/6]`` features."""
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f'WaveMLP expects an (N, {self.in_channels}, H, W) tensor, got '
                             f'{tuple(x.shape)}')
        if x.shape[2] < 3 or x.shape[3] < 3:
            raise ValueError(f'input {tuple(x.shape[2:])} is too small: the 7x7 stride-4 stem '
                             'with padding 2 needs H, W >= 3')
        if self.img_size is not None and tuple(x.shape[2:]) != self.img_size:
            raise ValueError(f"this WaveMLP (window_size='all', Wave-MLP Table 7 \"All\") takes "
                             f'{self.img_size[0]}x{self.img_size[1]} inputs only and got '
                             f'{x.shape[2]}x{x.shape[3]}: resize the input or build it with img_size='
                             f'{x.shape[2] if x.shape[2] == x.shape[3] else tuple(x.shape[2:])}.')
        x = self.patch_embed(x)
        outs = []
        for i, stage in enumerate(self.stages):
            if i > 0:
                x = self.downsamples[i - 1](x)
            x = stage(x)
            outs.append(x)
        return outs

    def forward(self, x: torch.Tensor):
        feats = self.forward_stages(x)
        return tuple(getattr(self, f'norm{i}')(feats[i]) for i in self.out_indices)

    # ------------------------------------------------------------------ train utils
    def _frozen_modules(self):
        modules = [self.patch_embed]
        for i in range(self.frozen_stages):
            if i > 0:
                modules.append(self.downsamples[i - 1])
            modules.append(self.stages[i])
            if i in self.out_indices:
                modules.append(getattr(self, f'norm{i}'))
        return modules

    # ------------------------------------------------------------------ weights
    def init_weights(self):
        pretrained = pretrained_init_cfg(self)
        if pretrained is not None:
            allowed_missing = [f'norm{i}.*' for i in self.out_indices if i != 3]
            load_pretrained_init_cfg(self, pretrained, converter=checkpoint_filter_fn,
                                     allowed_missing=allowed_missing)
            self._is_init = True
            return
        super().init_weights()
