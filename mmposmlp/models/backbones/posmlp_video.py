"""PosMLP-Video (Hao, Zhou, Wang, Ngo, He, Wang; IJCV 2024, https://arxiv.org/abs/2407.02934).

Positional temporal / spatial / spatio-temporal gating units (PoTGU, PoSGU, PoSTGU; paper
Sec. 3.2, Eq. 3-5) are the shared :class:`~mmposmlp.models.layers.gating.PositionalGatingUnit`
with a 1D ``(T,)``, 2D ``(H, W)`` or 3D ``(T, H, W)`` window; this file only wires them into
the video PosMLP modules/blocks of Fig. 2 and Fig. 6 and the hierarchical network of Fig. 3/4.
"""
import copy
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
import torch.utils.checkpoint as cp
from mmcv.cnn import ConvModule, build_activation_layer, build_norm_layer
from mmcv.cnn.bricks import DropPath
from mmengine.logging import print_log
from mmengine.model import BaseModule

from mmposmlp.registry import MODELS
from .base import ChannelsLastStagesMixin, stage_reductions
from ..checkpoints import load_pretrained_init_cfg, pretrained_init_cfg
from ..converters.posmlp_video import checkpoint_filter_fn
from ..layers.export_mode import exporting
from ..layers.gating import PositionalGatingUnit, init_gated_mlp_weights
from ..layers.windows import crop, make_layout, map_layout, pad_to_multiple, to_tuple

#: block types of Fig. 2 / Table 3 (paper names; lower case accepted).
BLOCK_TYPES = ('PoTGU+PoSGU', 'PoTGU->PoSGU', 'PoSGU->PoTGU', 'PoSTGU', 'PoSGU', 'PoTGU')
#: PoTGU+PoSGU versions of Fig. 6 / Table 8.
PARALLEL_VERSIONS = ('v1', 'v2', 'v3', 'v4')


class IdentityGate(nn.Module):
    """A gating unit whose token mixing is the identity: ``Z = X1 * X2``.

    Image pre-training (paper Sec. 3.4): "since only the PoTGU and PoSTGU need to perform on
    the time axis, we can simply replace them with a residual connection"; the LN/FC layers
    around them are kept (and pre-trained), only their relative position biases are new when
    the model is inflated to video (``tools/model_converters/posmlp_video_inflate.py``).
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u, v = x.chunk(2, dim=-1)
        return u * v


def _gate_over(gate: nn.Module, x: torch.Tensor, axes: str, window,
               mlp: Optional[Tuple[nn.Linear, nn.Module, nn.Linear]] = None) -> torch.Tensor:
    """Apply ``gate`` to the channels-last map ``x`` (B, T, H, W, C) over ``axes``.

    With ``mlp = (fc1, act, fc2)``, ``x`` is the input of the module's first FC and the unit
    computes ``fc2(gate(act(fc1(x))))`` itself (:meth:`PositionalGatingUnit.forward_mlp`): the
    map is windowed at its ``C`` channels instead of the FCs' wider hidden tensor, which never
    needs a permute.

    ``'t'``: windows of ``window[0]`` frames at every spatial position (PoTGU);
    ``'hw'``: ``window[1:]`` spatial windows in every frame (PoSGU); ``'thw'``: 3D windows
    (PoSTGU). Maps are padded to window multiples and the padding is masked (shared
    machinery), so any clip length / size runs.
    """
    if isinstance(gate, IdentityGate):
        return gate(x) if mlp is None else mlp[2](gate(mlp[1](mlp[0](x))))
    in_graph = exporting(gate)  # the unit's export mode: layout computed in the graph
    if not in_graph:
        # the clips as one map (1, B, T, H, W) with windows of one clip (and, for 'hw', one frame; for
        # 't', one position): windows numbered by key mask over the whole batch, so each mask is one run
        win = {'t': (window[0], 1, 1), 'hw': (1, *window[1:]), 'thw': tuple(window)}[axes]
        layout = map_layout(x[None], (1, *win))
        if layout.masked:
            windows = layout.partition_map(x[None])
            windows = gate(windows, layout) if mlp is None else gate.forward_mlp(windows, *mlp, layout=layout)
            return layout.reverse_map(windows)[0]
    return _gate_over_row_major(gate, x, axes, window, mlp, in_graph)


def _gate_over_row_major(gate: nn.Module, x: torch.Tensor, axes: str, window,
                         mlp: Optional[Tuple[nn.Linear, nn.Module, nn.Linear]] = None,
                         in_graph: bool = False) -> torch.Tensor:
    """:func:`_gate_over` on row-major windows of each clip, frame or position: for maps that need no
    mask (windowed without padding; the temporal windows leave the output a permuted view) and in export
    mode (``in_graph``: sizes may be symbolic, padding, masks and crop computed in the graph)."""
    B, T, H, W, C = x.shape
    if axes == 't':
        y = x.permute(0, 2, 3, 1, 4).reshape(B * H * W, T, C)
        win, valid = tuple(window[:1]), (T, )
    elif axes == 'hw':
        y = x.reshape(B * T, H, W, C)
        win, valid = tuple(window[1:]), (H, W)
    else:
        y, win, valid = x, tuple(window), (T, H, W)
    y = pad_to_multiple(y, win, in_graph)
    layout = make_layout(y, valid, win, in_graph=in_graph)
    windows = layout.partition(y)
    windows = gate(windows, layout) if mlp is None else gate.forward_mlp(windows, *mlp, layout=layout)
    y = crop(layout.reverse(windows), valid, in_graph)
    C2 = y.shape[-1]
    if axes == 't':
        return y.reshape(B, H, W, T, C2).permute(0, 3, 1, 2, 4)
    if axes == 'hw':
        return y.reshape(B, T, H, W, C2)
    return y


class PosMLPVideoModule(nn.Module):
    """A video PosMLP module (Sec. 3.3, Fig. 2): ``FC2(G(GELU(FC1(LN(x)))))``.

    ``gates`` lists the axes of the gating units it holds (``'t'`` PoTGU, ``'hw'`` PoSGU,
    ``'thw'`` PoSTGU). With two gates, ``combine`` says how (Fig. 6): ``'split'`` (V2:
    FC1's output is split in channels, one half per unit, outputs concatenated), ``'concat'``
    (V3: both units see the same input, outputs concatenated), ``'add'`` (V4: outputs added).
    Each unit always receives ``mlp_ratio * C`` channels.
    """

    def __init__(self, embed_dims: int, mlp_ratio: float, window, groups: int, gates: Sequence[str],
                 gate_type: str = 'glrpe', combine: Optional[str] = None, image_mode: bool = False,
                 drop_rate: float = 0., norm_cfg: dict = None, act_cfg: dict = None,
                 gate_cfg: Optional[dict] = None):
        super().__init__()
        hidden = int(mlp_ratio * embed_dims)
        gate_cfg = dict(gate_cfg or {})
        if gate_cfg.get('split', True) is False or gate_cfg.get('combine', 'gate') == 'concat':
            raise ValueError(f'PosMLP-Video blocks take half of the hidden channels from each gating unit, so '
                             f'gate_cfg={gate_cfg} (a unit returning all of them) cannot be used here: drop '
                             "split=False / combine='concat' (PosMLP image ablations, Fig. 3c/3e).")
        self.axes = list(gates)
        self.combine = combine if len(self.axes) > 1 else None
        if len(self.axes) > 1 and combine not in ('split', 'concat', 'add'):
            raise ValueError(f"two gating units need combine='split'|'concat'|'add', got {combine!r}")
        self.window = tuple(window)
        self.norm = build_norm_layer(norm_cfg, embed_dims)[1]
        self.fc1 = nn.Linear(embed_dims, hidden * (2 if self.combine == 'split' else 1))
        self.act = build_activation_layer(act_cfg)
        for axes in self.axes:
            win = {'t': self.window[:1], 'hw': self.window[1:], 'thw': self.window}[axes]
            if image_mode and 't' in axes:
                gate = IdentityGate()
            else:
                gate = PositionalGatingUnit(hidden, win, groups, gate_type, **(gate_cfg or {}))
            self.add_module(self._gate_name(axes), gate)
        out = hidden // 2 * (2 if self.combine in ('split', 'concat') else 1)
        self.fc2 = nn.Linear(out, embed_dims)
        self.drop = nn.Dropout(drop_rate)

    @staticmethod
    def _gate_name(axes: str) -> str:
        return {'t': 'gate_t', 'hw': 'gate_s', 'thw': 'gate_st'}[axes]

    def gate(self, axes: str) -> nn.Module:
        return getattr(self, self._gate_name(axes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, H, W, C)
        if self.combine is None:  # the unit applies fc1 + act itself (fast path)
            mlp = (self.fc1, self.act, self.fc2)
            return self.drop(_gate_over(self.gate(self.axes[0]), self.norm(x), self.axes[0], self.window, mlp))
        h = self.act(self.fc1(self.norm(x)))
        if self.combine == 'split':
            parts = h.chunk(2, dim=-1)
            y = torch.cat([_gate_over(self.gate(a), p, a, self.window) for a, p in zip(self.axes, parts)], -1)
        else:
            outs = [_gate_over(self.gate(a), h, a, self.window) for a in self.axes]
            y = torch.cat(outs, -1) if self.combine == 'concat' else outs[0] + outs[1]
        return self.drop(self.fc2(y))


class PosMLPVideoBlock(nn.Module):
    """The video PosMLP blocks of Fig. 2 and Fig. 6 (channels-last ``(B, T, H, W, C)``).

    * ``'PoTGU+PoSGU'`` V1 (default, official ``PermutatorBlock``):
      ``x + DropPath(spatial(x) + temporal(x))``, two full modules, one residual.
      V2/V3/V4: one module with both units (``split``/``concat``/``add``), Fig. 6.
    * ``'PoTGU->PoSGU'`` / ``'PoSGU->PoTGU'`` (cascades): ``x = x + DropPath(first(x))``,
      ``x = x + DropPath(second(x))`` (``cascade_residual='each'``, a residual per module as
      in gMLP) or ``x + DropPath(second(first(x)))`` (``'outer'``). Fig. 2 is not legible in
      the stored text; both give the same params/FLOPs (Table 3).
    * ``'PoSTGU'``, ``'PoSGU'``, ``'PoTGU'``: one module, ``x + DropPath(module(x))``.
    No channel MLP follows (official code; Table 3's equal counts for the three combinations).
    """

    def __init__(self, embed_dims: int, block_type: str, version: str = 'v1',
                 cascade_residual: str = 'each', drop_path_rate: float = 0., **module_kwargs):
        super().__init__()
        self.block_type = block_type
        self.version = version
        self.cascade_residual = cascade_residual
        mk = dict(embed_dims=embed_dims, **module_kwargs)
        if block_type == 'PoTGU+PoSGU' and version == 'v1':
            self.spatial = PosMLPVideoModule(gates=['hw'], **mk)
            self.temporal = PosMLPVideoModule(gates=['t'], **mk)
            self.order = ['spatial', 'temporal']
        elif block_type == 'PoTGU+PoSGU':
            combine = {'v2': 'split', 'v3': 'concat', 'v4': 'add'}[version]
            self.mixer = PosMLPVideoModule(gates=['t', 'hw'], combine=combine, **mk)
            self.order = ['mixer']
        elif block_type in ('PoTGU->PoSGU', 'PoSGU->PoTGU'):
            self.temporal = PosMLPVideoModule(gates=['t'], **mk)
            self.spatial = PosMLPVideoModule(gates=['hw'], **mk)
            self.order = ['temporal', 'spatial'] if block_type == 'PoTGU->PoSGU' else ['spatial', 'temporal']
        else:
            name, axes = {'PoSTGU': ('joint', 'thw'), 'PoSGU': ('spatial', 'hw'),
                          'PoTGU': ('temporal', 't')}[block_type]
            setattr(self, name, PosMLPVideoModule(gates=[axes], **mk))
            self.order = [name]
        self.drop_path = DropPath(drop_path_rate) if drop_path_rate > 0 else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mods = [getattr(self, n) for n in self.order]
        if self.block_type == 'PoTGU+PoSGU' and self.version == 'v1':
            return x + self.drop_path(mods[0](x) + mods[1](x))
        if len(mods) == 2:
            if self.cascade_residual == 'outer':
                return x + self.drop_path(mods[1](mods[0](x)))
            x = x + self.drop_path(mods[0](x))
            return x + self.drop_path(mods[1](x))
        return x + self.drop_path(mods[0](x))


def _checked_block_options(block_type: str, parallel_version: str, cascade_residual: str) -> str:
    """The canonical spelling of ``block_type``; unknown block types, versions or residuals refused."""
    canonical = {b.lower(): b for b in BLOCK_TYPES}.get(str(block_type).lower())
    if canonical is None:
        raise KeyError(f'unknown block_type {block_type!r}; choose one of {list(BLOCK_TYPES)}')
    if parallel_version not in PARALLEL_VERSIONS:
        raise KeyError(f'unknown parallel_version {parallel_version!r}; choose one of {PARALLEL_VERSIONS}')
    if cascade_residual not in ('each', 'outer'):
        raise ValueError(f"cascade_residual must be 'each' or 'outer', got {cascade_residual!r}")
    return canonical


def _video_stem(in_channels: int, embed_dims: int, norm_cfg: dict, act_cfg: dict) -> nn.Sequential:
    """Two (1, 3, 3)/(1, 2, 2) Conv3d + norm, an activation between them (stride 4 in space)."""
    conv3d = dict(type='Conv3d')
    return nn.Sequential(
        ConvModule(in_channels, embed_dims // 2, (1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1), bias=True,
                   conv_cfg=conv3d, norm_cfg=norm_cfg, act_cfg=act_cfg),
        ConvModule(embed_dims // 2, embed_dims, (1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1), bias=True,
                   conv_cfg=conv3d, norm_cfg=norm_cfg, act_cfg=None))


class SpatialDownsample(nn.Module):
    """Fig. 4(b): Conv3d (1,3,3) stride (1,2,2) + LayerNorm over channels (channels-last)."""

    def __init__(self, in_channels: int, out_channels: int, norm_cfg: dict):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, (1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1))
        self.norm = build_norm_layer(norm_cfg, out_channels)[1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, H, W, C) -> (B, T, H', W', C')
        x = self.conv(x.permute(0, 4, 1, 2, 3))
        return self.norm(x.permute(0, 2, 3, 4, 1))


class PosMLPVideoStage(nn.Module):
    """Spatial downsampling (except stage 1) + video PosMLP blocks."""

    def __init__(self, in_channels: int, embed_dims: int, downsample: bool, block_kwargs: Sequence[dict],
                 norm_cfg: dict, with_cp: bool = False):
        super().__init__()
        self.with_cp = with_cp
        self.downsample = SpatialDownsample(in_channels, embed_dims, norm_cfg) if downsample else None
        self.blocks = nn.ModuleList([PosMLPVideoBlock(embed_dims=embed_dims, **kw) for kw in block_kwargs])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.downsample is not None:
            x = self.downsample(x)
        for block in self.blocks:
            if self.with_cp and x.requires_grad:
                x = cp.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return x


@MODELS.register_module()
class PosMLPVideo(ChannelsLastStagesMixin, BaseModule):
    """PosMLP-Video backbone for mmaction2 ``Recognizer3D``, paper `PosMLP-Video: Spatial and
    Temporal Relative Position Encoding for Efficient Video Recognition
    <https://arxiv.org/abs/2407.02934>`_ (IJCV 2024), Table 2, Fig. 2-4.

    ===========  ===================  =============  ====  ==================================
    arch         embed_dims           depths         r_e   params (174 cls), paper
    ===========  ===================  =============  ====  ==================================
    s            72, 144, 288, 576    3, 4, 9, 3     2     13.51M (official code 13,509,537)
    b            72, 144, 288, 576    4, 6, 15, 4    2     not in the stored paper text
    l            72, 144, 288, 576    4, 6, 15, 4    4     35.4M (SSv2, 174 classes)
    ===========  ===================  =============  ====  ==================================

    All archs: groups g = (8, 16, 32, 64), 3D windows 16x14x14 (stages 1-3) / 16x7x7
    (stage 4) (Table 5), LRPE gating (``'glrpe'``), no temporal downsampling. Table 2 gives
    only the depths and that S/B/L differ "in r_e and layer numbers"; r_e is fixed from the
    parameter counts: S = official code (fc1 C->2C), L = 35.4M needs r_e = 4 (measured in
    tests/test_posmlp_video.py and configs/posmlp_video/README.md); B is {4,6,15,4} with r_e 2.

    Args:
        arch: 's' | 'b' | 'l' (also 'posmlp-video-s', 'small', ...) or a dict with
            ``embed_dims``, ``depths``, ``mlp_ratio``, ``groups``, ``window_sizes``.
        block_type: one of :data:`BLOCK_TYPES` (Fig. 2 / Table 3), default 'PoTGU+PoSGU'.
        parallel_version: 'v1' (default, official) .. 'v4' of Fig. 6 / Table 8.
        cascade_residual: 'each' | 'outer', residuals of the cascaded blocks.
        gate_type: 'glrpe' (paper), 'ggqpe'/'gqpe' (Table 7), 'sgu' (gMLP SGU+TGU, Table 3),
            see :data:`~mmposmlp.models.layers.gating.GATE_TYPES`.
        window_sizes: per-stage ``(T, H, W)`` window override (int or 3-tuple each). Clips
            of another length run too: maps are padded to window multiples and masked.
        image_mode: image pre-training (Sec. 3.4): NCHW input treated as T=1, the units
            that span time (PoTGU, PoSTGU) replaced by identity gates, NCHW output.
        out_indices: stages returned; a single index returns a tensor (mmaction2 heads),
            except in ``image_mode`` (always a tuple, mmpretrain necks).
        out_norm: LayerNorm on the outputs (``norm3`` = official final norm).
        drop_rate / drop_path_rate: dropout after FC2 / stochastic depth (linear).
        frozen_stages: -1 none; 0 the stem; k the stem and stages 0..k-1.
        norm_eval: keep the stem BatchNorm3d in eval mode during training.
        with_cp: gradient checkpointing of every block.
        downsamples: per stage after the first, whether a spatial downsampling precedes it
            (default all; official ``TRANSITIONS[i] = False`` with equal channels: none, the
            stage keeps its predecessor's resolution). A stage without one needs the same
            channels as its predecessor.
        init_cfg: ``dict(type='Pretrained', checkpoint=..., prefix='backbone.')``; official
            SlowFast checkpoints are converted on the fly; add ``inflate=True`` to load an
            image-mode checkpoint (temporal units newly initialised and reported).

    Input ``(B, C, T, H, W)``; output ``(B, C_i, T, ceil(H/2^(i+2)), ceil(W/2^(i+2)))``.
    """

    arch_zoo = {
        **dict.fromkeys(['s', 'small', 'posmlp-video-s'], dict(depths=[3, 4, 9, 3], mlp_ratio=2)),
        **dict.fromkeys(['b', 'base', 'posmlp-video-b'], dict(depths=[4, 6, 15, 4], mlp_ratio=2)),
        **dict.fromkeys(['l', 'large', 'posmlp-video-l'], dict(depths=[4, 6, 15, 4], mlp_ratio=4)),
    }
    default_arch = dict(embed_dims=[72, 144, 288, 576], groups=[8, 16, 32, 64],
                        window_sizes=[[16, 14, 14], [16, 14, 14], [16, 14, 14], [16, 7, 7]])

    def __init__(self,
                 arch: Union[str, dict] = 's',
                 in_channels: int = 3,
                 block_type: str = 'PoTGU+PoSGU',
                 parallel_version: str = 'v1',
                 cascade_residual: str = 'each',
                 gate_type: str = 'glrpe',
                 window_sizes: Optional[Sequence] = None,
                 image_mode: bool = False,
                 out_indices: Sequence[int] = (3, ),
                 out_norm: bool = True,
                 drop_rate: float = 0.,
                 drop_path_rate: float = 0.1,
                 frozen_stages: int = -1,
                 norm_eval: bool = False,
                 with_cp: bool = False,
                 stem_norm_cfg: dict = dict(type='BN3d'),
                 norm_cfg: dict = dict(type='LN', eps=1e-5),
                 act_cfg: dict = dict(type='GELU'),
                 gate_cfg: Optional[dict] = None,
                 downsamples: Optional[Sequence[bool]] = None,
                 init_cfg: Optional[Union[dict, list]] = None):
        super().__init__(init_cfg=init_cfg)
        pretrained_init_cfg(self, extra_keys=('inflate', ))  # refuse a misspelt Pretrained init_cfg when built
        s = self.arch_settings = self._parse_arch(arch)
        num_stages = len(s['embed_dims'])
        self.downsamples = self._checked_downsamples(downsamples)
        self.block_type = _checked_block_options(block_type, parallel_version, cascade_residual)
        self.parallel_version, self.image_mode = parallel_version, image_mode
        windows = window_sizes if window_sizes is not None else s['window_sizes']
        self.window_sizes = [to_tuple(w, 3) for w in windows]
        if len(self.window_sizes) != num_stages:
            raise ValueError(f'window_sizes has {len(self.window_sizes)} entries, the arch has {num_stages} stages')
        self._set_out_indices(out_indices, num_stages)
        self._set_frozen_stages(frozen_stages, num_stages, norm_eval)
        self.embed_dims = list(s['embed_dims'])
        self.in_channels = in_channels
        self.patch_embed = _video_stem(in_channels, self.embed_dims[0], stem_norm_cfg, act_cfg)
        block_cfg = dict(block_type=self.block_type, version=parallel_version, cascade_residual=cascade_residual,
                         mlp_ratio=s['mlp_ratio'], gate_type=gate_type, image_mode=image_mode, drop_rate=drop_rate,
                         norm_cfg=norm_cfg, act_cfg=act_cfg, gate_cfg=gate_cfg)
        self._build_stages(drop_path_rate, block_cfg, norm_cfg, with_cp)
        self._build_outputs(self.embed_dims, stage_reductions(4, self.downsamples), norm_cfg, out_norm)
        self._freeze_stages()

    def _checked_downsamples(self, downsamples: Optional[Sequence[bool]]) -> List[bool]:
        """One bool per stage after the first (default all True); a stage without one keeps its channels."""
        dims = self.arch_settings['embed_dims']
        downsamples = [True] * (len(dims) - 1) if downsamples is None else [bool(d) for d in downsamples]
        if len(downsamples) != len(dims) - 1:
            raise ValueError(f'downsamples has {len(downsamples)} entries; the arch has {len(dims)} '
                             'stages, so it needs one per stage after the first')
        for i, d in enumerate(downsamples):
            if not d and dims[i] != dims[i + 1]:
                raise ValueError(f'stage {i + 1} has no downsampling but changes channels '
                                 f'({dims[i]} -> {dims[i + 1]}): set downsamples[{i}]=True')
        return downsamples

    def _build_stages(self, drop_path_rate: float, block_cfg: dict, norm_cfg: dict, with_cp: bool) -> None:
        depths = self.arch_settings['depths']
        groups = self.arch_settings['groups']
        dpr = torch.linspace(0, drop_path_rate, sum(depths)).tolist()
        self.stages = nn.ModuleList()
        cursor = 0
        for i, depth in enumerate(depths):
            block_kwargs = [dict(drop_path_rate=dpr[cursor + j], window=self.window_sizes[i], groups=groups[i],
                                 **block_cfg) for j in range(depth)]
            cursor += depth
            self.stages.append(PosMLPVideoStage(self.embed_dims[i - 1] if i else self.embed_dims[0],
                                                self.embed_dims[i], downsample=i > 0 and self.downsamples[i - 1],
                                                block_kwargs=block_kwargs, norm_cfg=norm_cfg, with_cp=with_cp))

    @classmethod
    def _parse_arch(cls, arch) -> Dict:
        keys = {'embed_dims', 'depths', 'mlp_ratio', 'groups', 'window_sizes'}
        if isinstance(arch, str):
            key = arch.lower()
            if key not in cls.arch_zoo:
                raise KeyError(f'unknown PosMLPVideo arch {arch!r}; valid archs: {sorted(set(cls.arch_zoo))} '
                               f'or a dict with keys {sorted(keys)}')
            return {**copy.deepcopy(cls.default_arch), **copy.deepcopy(cls.arch_zoo[key])}
        if not isinstance(arch, dict):
            raise TypeError(f'arch must be a name or a dict, got {type(arch).__name__}')
        unknown = set(arch) - keys
        if unknown or 'depths' not in arch:
            raise KeyError(f'a PosMLPVideo arch dict needs depths (and optionally {sorted(keys - {"depths"})}); '
                           f'unknown keys: {sorted(unknown)}')
        settings = {**copy.deepcopy(cls.default_arch), 'mlp_ratio': 2, **copy.deepcopy(dict(arch))}
        n = len(settings['depths'])
        for k in ('embed_dims', 'groups', 'window_sizes'):
            if len(settings[k]) != n:
                raise ValueError(f'arch[{k!r}] has {len(settings[k])} entries, depths has {n}')
        return settings

    # ------------------------------------------------------------------ weights
    def temporal_gate_keys(self) -> List[str]:
        """State-dict keys of the units that span time (new when inflating an image model)."""
        keys = []
        for name, m in self.named_modules():
            if isinstance(m, PositionalGatingUnit) and len(m.window) != 2:
                keys += [f'{name}.{k}' for k in m.state_dict()]
        return keys

    def init_weights(self):
        pretrained = pretrained_init_cfg(self, extra_keys=('inflate', ))
        if pretrained is not None:
            self._init_default()
            allowed = self._new_output_norm_keys()
            if pretrained.get('inflate', False):
                allowed += self.temporal_gate_keys()
            res = load_pretrained_init_cfg(self, pretrained, converter=checkpoint_filter_fn,
                                           allowed_missing=allowed)
            temporal = set(self.temporal_gate_keys())
            new = [k for k in res.missing_keys if k in temporal]
            if new:
                print_log(f'PosMLPVideo: inflated an image checkpoint; {len(new)} temporal-unit weights '
                          f'newly initialised (e.g. {new[:3]})', logger='current')
            self._is_init = True
            return
        if self.init_cfg is None:  # our default init (no per-parameter init log spam)
            self._init_default()
            self._is_init = True
            return
        super().init_weights()

    def _init_default(self):
        init_gated_mlp_weights(self)

    # ------------------------------------------------------------------ forward
    def forward(self, x: torch.Tensor):
        image_input = x.dim() == 4
        if image_input:
            if not self.image_mode:
                raise ValueError(f'PosMLPVideo got an image batch {tuple(x.shape)}; build it with '
                                 'image_mode=True for image pre-training, or feed (B, C, T, H, W) clips')
            x = x.unsqueeze(2)
        if x.dim() != 5:
            raise ValueError(f'PosMLPVideo expects (B, C, T, H, W) clips, got shape {tuple(x.shape)}')
        if x.shape[1] != self.in_channels:
            raise ValueError(f'input has {x.shape[1]} channels but the backbone was built with '
                             f'in_channels={self.in_channels}')
        if self.image_mode and x.shape[2] != 1:
            raise ValueError('image_mode=True has no temporal mixing: feed images (T=1) or build a video model')
        x = self.patch_embed(x).permute(0, 2, 3, 4, 1)  # (B, T, H, W, C)
        outs = {}
        for i, stage in enumerate(self.stages):
            x = stage(x)
            if i in self.out_indices:
                out = self._output(i, x)
                outs[i] = out[:, :, 0] if image_input else out
        outs = self._ordered_outputs(outs)
        if len(outs) == 1 and not self.image_mode:
            return outs[0]  # mmaction2 heads take a tensor
        return outs  # mmpretrain/mmdet convention

    def stage_features(self, x: torch.Tensor) -> List[torch.Tensor]:
        """Channels-last ``(B, T, H, W, C)`` output of every stage (no norm), for tests/tools."""
        x = self.patch_embed(x).permute(0, 2, 3, 4, 1)
        feats = []
        for stage in self.stages:
            x = stage(x)
            feats.append(x)
        return feats
