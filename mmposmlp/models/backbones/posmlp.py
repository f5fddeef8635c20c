"""PosMLP image backbone (Wang et al., ACM MM 2022, https://arxiv.org/abs/2207.07284)."""
import copy
import functools
from typing import Dict, Optional, Sequence, Union

import torch
import torch.nn as nn
import torch.utils.checkpoint as cp
from mmcv.cnn import ConvModule, build_activation_layer, build_norm_layer
from mmcv.cnn.bricks import DropPath
from mmcv.cnn.bricks.transformer import PatchEmbed, PatchMerging
from mmengine.model import BaseModule

from mmposmlp.registry import MODELS
from ..checkpoints import load_pretrained_init_cfg, pretrained_init_cfg
from .base import ChannelsLastStagesMixin
from ..converters.posmlp import checkpoint_filter_fn
from ..layers.export_mode import ExportModeMixin, exporting
from ..layers.gating import PositionalGatingUnit, init_gated_mlp_weights
from ..layers.grouped_conv import GroupedConv2d
from ..layers.norm_act_conv import eager_cpu_training, no_hooks, norm_act_conv, plain_chain
from ..layers.norms import channels_first_norm_cfg
from ..layers.windows import map_layout, to_tuple


class ConvPatchEmbed(nn.Sequential):
    """ConvPE (paper Sec. 4.2, Fig. 2b): conv3x3/s2 -> conv3x3/s2 -> conv1x1, each + norm,
    GELU after the first two. ``H x W x 3`` -> ``ceil(H/4) x ceil(W/4) x C``. A ``LN`` norm
    normalises over channels (official ``stem_norm='LN'``)."""

    def __init__(self, in_channels: int, embed_dims: int, norm_cfg: dict, act_cfg: dict):
        norm_cfg = channels_first_norm_cfg(norm_cfg)
        specs = [(in_channels, embed_dims // 2, 3, 2, 1, act_cfg),
                 (embed_dims // 2, embed_dims, 3, 2, 1, act_cfg),
                 (embed_dims, embed_dims, 1, 1, 0, None)]
        super().__init__(*[
            ConvModule(i, o, k, stride=s, padding=p, bias=True, norm_cfg=norm_cfg, act_cfg=a)
            for i, o, k, s, p, a in specs
        ])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self._recomputing_training(x):
            return super().forward(x)
        first, second, third = self
        x = norm_act_conv(x, first.conv, first.norm, first.activate, second.conv)
        return third.norm(norm_act_conv(x, None, second.norm, second.activate, third.conv))

    def _recomputing_training(self, x: torch.Tensor) -> bool:
        """Whether training runs through :func:`norm_act_conv`, which keeps for backward only the image
        and the 1/4-resolution conv outputs (not the 1/2-resolution maps, the normed maps and the
        activations) and gives bit-identical results: eager CPU autograd without autocast, BatchNorm
        (batch or running statistics: ``norm_eval``), GELU, trainable parameters, no hooks on the stem's
        modules."""
        if not eager_cpu_training(x):
            return False
        first, second, third = self
        if not no_hooks(*self) or any(m.order != ('conv', 'norm', 'act') or m.with_explicit_padding
                                      or m.with_spectral_norm or getattr(m, 'efficient_conv_bn_eval_forward', None)
                                      for m in self):
            return False
        return (first.with_activation and second.with_activation and not third.with_activation
                and plain_chain(first.conv, first.norm, first.activate, second.conv)
                and plain_chain(None, second.norm, second.activate, third.conv))


class ConvPatchMerging(nn.Module):
    """ConvPM (Sec. 4.2, Fig. 2c): depthwise-multiplier conv3x3/s2 + LayerNorm over channels.

    Channels-last ``(B, H, W, C)`` in and out: the conv then runs on channels-last memory
    (several times faster on CPU for this depthwise conv) and the norm needs no permute copy.
    ``depthwise=False`` uses a full conv (official ``depth_conv=False``); a BatchNorm
    ``norm_cfg`` (official ``downsample_norm='BN'``) normalises the NCHW map.
    """

    def __init__(self, in_channels: int, out_channels: int, norm_cfg: dict, depthwise: bool = True):
        super().__init__()
        if depthwise and out_channels % in_channels:
            raise ValueError(f'ConvPM is a depthwise conv (groups=in_channels): out_channels={out_channels} '
                             f'must be a multiple of in_channels={in_channels}; fix embed_dims in the arch')
        conv = GroupedConv2d if depthwise else nn.Conv2d
        self.conv = conv(in_channels, out_channels, 3, stride=2, padding=1, groups=in_channels if depthwise else 1)
        self.norm = build_norm_layer(norm_cfg, out_channels)[1]
        self.channels_first_norm = isinstance(self.norm, nn.modules.batchnorm._BatchNorm)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, H, W, C) -> (B, H', W', C')
        x = self.conv(x.permute(0, 3, 1, 2))
        if self.channels_first_norm:
            return self.norm(x).permute(0, 2, 3, 1)
        return self.norm(x.permute(0, 2, 3, 1))


class LinearPatchEmbed(PatchEmbed):
    """Linear (non-overlapping) patch embedding, PosMLP Table 10 "Linear" PE: mmcv's (Swin's)
    ``PatchEmbed``, a conv with kernel = stride = ``patch_size`` and a norm over channels (the
    official ``PatchEmbed``). Sides that are not multiples of ``patch_size`` are zero-padded at the
    bottom/right, so the map is ``ceil(H/p) x ceil(W/p)`` (ConvPE's at ``p = 4``).

    NCHW in, channels-last ``(B, H', W', C)`` out.
    """

    def __init__(self, in_channels: int, embed_dims: int, patch_size: int, norm_cfg: Optional[dict]):
        super().__init__(in_channels, embed_dims, kernel_size=patch_size, stride=patch_size, norm_cfg=norm_cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens, (h, w) = super().forward(x)
        return tokens.view(x.shape[0], h, w, -1)


class LinearPatchMerging(PatchMerging):
    """Linear (non-overlapping) patch merging, PosMLP Table 10 "Linear" PM: mmcv's (Swin's)
    ``PatchMerging``, each 2x2 neighbourhood concatenated (4C), normed and mapped by a bias-free
    linear layer to the next stage's channels. (The official ``PatchMerging`` is this layer with
    its norm and reduction built for C instead of 4C channels: it does not run.) Odd sides are
    zero-padded at the bottom/right: ``ceil(H/2) x ceil(W/2)``, as ConvPM.

    Channels-last ``(B, H, W, C)`` in and out.
    """

    def __init__(self, in_channels: int, out_channels: int, norm_cfg: Optional[dict]):
        super().__init__(in_channels, out_channels, norm_cfg=norm_cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, H, W, C = x.shape
        tokens, (h, w) = super().forward(x.reshape(B, H * W, C), (H, W))
        return tokens.view(B, h, w, -1)


def _sampling_cfg(name: str, cfg: Optional[dict], linear_keys: set) -> Optional[dict]:
    """Check a ``patch_embed_cfg`` / ``downsample_cfg``: ``None`` for the conv default (the paper's
    ConvPE / ConvPM, set by ``stem_norm_cfg`` / ``downsample_norm_cfg`` / ``downsample_depthwise``),
    else the linear form's settings (``linear_keys``)."""
    if cfg is None:
        return None
    if not isinstance(cfg, dict) or cfg.get('type') not in ('conv', 'linear'):
        raise ValueError(f"{name} must be None or a dict with type 'conv' (default, the paper's) or 'linear' "
                         f'(non-overlapping, PosMLP Table 10), got {cfg!r}')
    allowed = linear_keys if cfg['type'] == 'linear' else {'type'}
    unknown = sorted(set(cfg) - allowed)
    if unknown:
        raise ValueError(f"{name} of type {cfg['type']!r} takes the keys {sorted(allowed)}, not {unknown}")
    return None if cfg['type'] == 'conv' else dict(cfg)


def _checked_sampling_cfgs(patch_embed_cfg, downsample_cfg, stem_norm_cfg, downsample_norm_cfg,
                           downsample_depthwise: bool):
    """The linear patch embedding's and patch merging's settings (None: ConvPE / ConvPM), refused
    when given with an option of the conv form they replace."""
    linear_embed = _sampling_cfg('patch_embed_cfg', patch_embed_cfg, {'type', 'patch_size', 'norm_cfg'})
    linear_merge = _sampling_cfg('downsample_cfg', downsample_cfg, {'type', 'norm_cfg'})
    if linear_embed is not None and stem_norm_cfg is not None:
        raise ValueError("stem_norm_cfg is ConvPE's norm and a linear patch_embed_cfg has no ConvPE: set "
                         "patch_embed_cfg['norm_cfg'] instead")
    if linear_merge is not None and (downsample_norm_cfg is not None or not downsample_depthwise):
        raise ValueError('downsample_norm_cfg / downsample_depthwise=False are options of ConvPM and a linear '
                         "downsample_cfg has no ConvPM: set downsample_cfg['norm_cfg'] instead")
    return linear_embed, linear_merge


class PosMLPBlock(nn.Module):
    """A PosMLP block (Fig. 2d): ``x + DropPath(FC2(PoSGU(GELU(FC1(LN(x))))))``.

    Operates on windows ``(B, nW, N, C)``; ``shift`` marks blocks that run on shifted windows.
    """

    def __init__(self, embed_dims: int, mlp_ratio: float, window, groups: int, gate_type: str,
                 shift: bool = False, drop_rate: float = 0., drop_path_rate: float = 0.,
                 norm_cfg: dict = None, act_cfg: dict = None, gate_cfg: Optional[dict] = None):
        super().__init__()
        hidden = int(mlp_ratio * embed_dims)
        self.shift = shift
        self.norm = build_norm_layer(norm_cfg, embed_dims)[1]
        self.fc1 = nn.Linear(embed_dims, hidden)
        self.act = build_activation_layer(act_cfg)
        self.gate = PositionalGatingUnit(hidden, window, groups, gate_type, **(gate_cfg or {}))
        self.fc2 = nn.Linear(self.gate.out_channels, embed_dims)
        self.drop = nn.Dropout(drop_rate)
        self.drop_path = DropPath(drop_path_rate) if drop_path_rate > 0 else nn.Identity()

    def forward(self, x: torch.Tensor, layout=None) -> torch.Tensor:
        y = self.gate.forward_mlp(x, self.fc1, self.act, self.fc2, layout, norm=self.norm)  # fc2(gate(act(fc1(LN x))))
        return x + self.drop_path(self.drop(y))


class PosMLPStage(ExportModeMixin, nn.Module):
    """ConvPM (except stage 0) + blocks on windows. Pads to the window multiple, masks the
    padding (and the shifted-window seams), crops back. Channels-last ``(B, H, W, C)`` in and
    out (the output is contiguous). In export mode the window layouts are built in the graph."""

    def __init__(self, in_channels: int, embed_dims: int, depth: int, window, shift_size,
                 downsample: bool, block_kwargs: Sequence[dict], norm_cfg: dict, with_cp: bool = False,
                 downsample_depthwise: bool = True, downsample_linear: bool = False):
        super().__init__()
        self.window = window
        self.shift_size = shift_size
        self.with_cp = with_cp
        if not downsample:
            self.downsample = None
        elif downsample_linear:
            self.downsample = LinearPatchMerging(in_channels, embed_dims, norm_cfg)
        else:
            self.downsample = ConvPatchMerging(in_channels, embed_dims, norm_cfg, downsample_depthwise)
        self.blocks = nn.ModuleList([PosMLPBlock(embed_dims=embed_dims, window=window, **kw)
                                     for kw in block_kwargs])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.downsample is not None:
            x = self.downsample(x)
        in_graph = exporting(self)
        layouts = {}
        current, windows = None, None
        for block in self.blocks:
            shift = self.shift_size if block.shift else (0, 0)
            if shift not in layouts:
                layouts[shift] = map_layout(x, self.window, shift, in_graph)
            layout = layouts[shift]
            if current is None:  # padding and partition in one scatter
                windows, current = layout.partition_map(x), layout
            elif layout is not current:
                windows, current = current.convert(windows, layout), layout
            if self.with_cp and windows.requires_grad:
                windows = cp.checkpoint(block, windows, layout, use_reentrant=False)
            else:
                windows = block(windows, layout)
        return current.reverse_map(windows)  # reverse and crop in one gather: contiguous for ConvPM


@MODELS.register_module()
class PosMLP(ChannelsLastStagesMixin, BaseModule):
    """PosMLP backbone: ConvPE stem, four stages of ConvPM + PosMLP blocks with the positional
    spatial gating unit (PoSGU), paper `Parameterization of Cross-Token Relations with Relative
    Positional Encoding for Vision MLP <https://arxiv.org/abs/2207.07284>`_.

    ==========  ==================  ===========  ===========  =========  =================
    arch        embed_dims          depths       params (M)*  FLOPs (G)* paper (Table 2)
    ==========  ==================  ===========  ===========  =========  =================
    tiny        96, 192, 384, 768   2, 2, 18, 2  20.93        see README 21M / 5.2G
    small       128, 256, 512, 1024 2, 2, 18, 2  36.82        see README 37M / 8.7G
    base        192, 384, 768, 1536 2, 2, 18, 2  81.98        see README 82M / 18.6G
    ==========  ==================  ===========  ===========  =========  =================

    \\* with the 1000-class head, measured (tests/test_posmlp.py). All archs: windows
    (14, 14, 14, 7), groups ``s`` (8, 16, 32, 64), expansion (4, 4, 4, 2) (the paper's
    gamma; ``mlp_ratios`` here), GGQPE gating, norm eps 1e-6 (official code).

    Args:
        arch: 'tiny' | 'small' | 'base' or a dict with ``embed_dims``, ``depths``, ``groups``,
            ``mlp_ratios``, ``window_sizes``.
        in_channels: input channels (the official stem is hard-wired to 3).
        gate_type: 'ggqpe' (default), 'gqpe', 'glrpe', 'lrpe', 'lrpe-m' or 'sgu'
            (:data:`~mmposmlp.models.layers.gating.GATE_TYPES`), or one per stage.
        window_sizes: override of the arch's per-stage windows (int or (h, w) each).
        shift: per-stage bool (or one bool): alternate blocks run on windows cyclically
            shifted by half a window (Swin), with masks. Dense-prediction configs turn it on.
        out_indices: stages whose outputs are returned (NCHW, strides 4/8/16/32).
        out_norm: add a LayerNorm ``norm{i}`` to each output (``norm3`` is the official
            final norm; ``norm0-2`` are new for dense prediction).
        drop_rate: dropout after the block's second FC (official ``drop``).
        drop_path_rate: stochastic depth, linear over all blocks.
        frozen_stages: -1 none; 0 the stem; k the stem and stages 0..k-1 (mmdet ResNet
            convention), kept frozen in ``train()``.
        norm_eval: keep BatchNorm layers (the stem's) in eval mode during training.
        with_cp: gradient checkpointing of every block.
        stem_norm_cfg: ConvPE's norms (default BN, eps 1e-6, official; ``LN`` = LayerNorm over
            channels).
        norm_cfg: block, ConvPM and output norms.
        downsample_norm_cfg: ConvPM's norm (default ``norm_cfg``; ``BN`` = official
            ``downsample_norm='BN'``).
        downsample_depthwise: ConvPM's conv is depthwise (official ``depth_conv``).
        patch_embed_cfg: ``None`` (default) = ConvPE; ``dict(type='linear', patch_size=4,
            norm_cfg=...)`` = a non-overlapping linear patch embedding
            (:class:`LinearPatchEmbed`, PosMLP Table 10 "Linear" PE, official ``stem=PatchEmbed``;
            ``norm_cfg`` defaults to ``norm_cfg``, ``None`` for none). Stage ``i`` is then at stride
            ``patch_size * 2**i``.
        downsample_cfg: ``None`` (default) = ConvPM; ``dict(type='linear', norm_cfg=...)`` = Swin's
            patch merging (:class:`LinearPatchMerging`, Table 10 "Linear" PM; norm over the 4C
            concatenation, default ``norm_cfg``).
        gate_cfg: extra :class:`PositionalGatingUnit` options (``split``, ``token_bias``,
            ``symmetric``, ``softmax``, ``learn_centers``, ``norm_cfg``, and the Fig. 3 variants
            ``combine='add'|'concat'`` and ``norm=True``).
        ape_size: ``(h, w)`` of a learned absolute position embedding added after the stem
            (official ``ape=True``: 56 x 56; PosMLP Table 9), resized bicubically to other maps.

    Output contract: a tuple with one NCHW tensor per ``out_indices`` entry (in that order), stage ``i`` at
    stride ``2**(i+2)`` and spatial size ``ceil(H / 2**(i+2))`` (``patch_size * 2**i`` with a
    linear patch embedding); any input size works
    (``size_divisibility == 1``). Channels in :attr:`out_channels` / :attr:`feature_info`.
    """

    arch_zoo = {
        **dict.fromkeys(['t', 'tiny'], dict(embed_dims=[96, 192, 384, 768])),
        **dict.fromkeys(['s', 'small'], dict(embed_dims=[128, 256, 512, 1024])),
        **dict.fromkeys(['b', 'base'], dict(embed_dims=[192, 384, 768, 1536])),
    }
    default_arch = dict(depths=[2, 2, 18, 2], groups=[8, 16, 32, 64], mlp_ratios=[4, 4, 4, 2],
                        window_sizes=[14, 14, 14, 7])
    size_divisibility = 1

    def __init__(self,
                 arch: Union[str, dict] = 'tiny',
                 in_channels: int = 3,
                 gate_type: Union[str, Sequence[str]] = 'ggqpe',
                 window_sizes: Optional[Sequence] = None,
                 shift: Union[bool, Sequence[bool]] = False,
                 out_indices: Sequence[int] = (3, ),
                 out_norm: bool = True,
                 drop_rate: float = 0.,
                 drop_path_rate: float = 0.1,
                 frozen_stages: int = -1,
                 norm_eval: bool = False,
                 with_cp: bool = False,
                 stem_norm_cfg: Optional[dict] = None,
                 norm_cfg: dict = dict(type='LN', eps=1e-6),
                 act_cfg: dict = dict(type='GELU'),
                 gate_cfg: Optional[dict] = None,
                 downsample_norm_cfg: Optional[dict] = None,
                 downsample_depthwise: bool = True,
                 ape_size: Optional[Sequence[int]] = None,
                 patch_embed_cfg: Optional[dict] = None,
                 downsample_cfg: Optional[dict] = None,
                 pretrained: Optional[str] = None,
                 init_cfg: Optional[Union[dict, list]] = None):
        if pretrained is not None:  # mmseg pushes a segmentor-level `pretrained` here
            init_cfg = dict(type='Pretrained', checkpoint=pretrained)
        super().__init__(init_cfg=init_cfg)
        pretrained_init_cfg(self)  # refuse a misspelt Pretrained init_cfg when built, not when loading
        s = self.arch_settings = self._parse_arch(arch)
        num_stages = len(s['embed_dims'])
        self.embed_dims = list(s['embed_dims'])
        self.in_channels = in_channels
        gate_types, shifts = self._per_stage_options(window_sizes, gate_type, shift)
        self._set_out_indices(out_indices, num_stages)
        self._set_frozen_stages(frozen_stages, num_stages, norm_eval)
        linear_embed, linear_merge = _checked_sampling_cfgs(patch_embed_cfg, downsample_cfg, stem_norm_cfg,
                                                            downsample_norm_cfg, downsample_depthwise)
        self._build_stem(linear_embed, stem_norm_cfg, norm_cfg, act_cfg, ape_size)
        merge_norm_cfg = (linear_merge.get('norm_cfg', norm_cfg) if linear_merge is not None
                          else downsample_norm_cfg or norm_cfg)
        block_cfg = dict(drop_rate=drop_rate, norm_cfg=norm_cfg, act_cfg=act_cfg, gate_cfg=gate_cfg)
        self._build_stages(gate_types, shifts, drop_path_rate, block_cfg,
                           dict(norm_cfg=merge_norm_cfg, with_cp=with_cp, downsample_depthwise=downsample_depthwise,
                                downsample_linear=linear_merge is not None))
        self._build_outputs(self.embed_dims, [self.stem_stride * 2**i for i in range(num_stages)], norm_cfg,
                            out_norm)
        self._freeze_stages()

    def _per_stage_options(self, window_sizes, gate_type, shift):
        """Set :attr:`window_sizes`; return the per-stage gate types and shifts (each refused unless it
        has one entry per stage)."""
        num_stages = len(self.embed_dims)
        windows = window_sizes if window_sizes is not None else self.arch_settings['window_sizes']
        self.window_sizes = [to_tuple(w, 2) for w in windows]
        gate_types = [gate_type] * num_stages if isinstance(gate_type, str) else list(gate_type)
        shifts = [shift] * num_stages if isinstance(shift, bool) else list(shift)
        for name, seq in (('window_sizes', self.window_sizes), ('gate_type', gate_types), ('shift', shifts)):
            if len(seq) != num_stages:
                raise ValueError(f'{name} has {len(seq)} entries but the arch has {num_stages} stages')
        return gate_types, shifts

    def _build_stem(self, linear_embed: Optional[dict], stem_norm_cfg: Optional[dict], norm_cfg: dict,
                    act_cfg: dict, ape_size) -> None:
        """ConvPE (or a linear patch embedding) and the optional absolute position embedding."""
        c0 = self.embed_dims[0]
        if linear_embed is None:
            self.patch_embed = ConvPatchEmbed(self.in_channels, c0, stem_norm_cfg or dict(type='BN', eps=1e-6),
                                              act_cfg)
            self.stem_stride = 4
        else:
            self.stem_stride = int(linear_embed.get('patch_size', 4))
            if self.stem_stride < 1:
                raise ValueError(f"patch_embed_cfg['patch_size'] must be a positive int, got {self.stem_stride}")
            self.patch_embed = LinearPatchEmbed(self.in_channels, c0, self.stem_stride,
                                                linear_embed.get('norm_cfg', norm_cfg))
        self.absolute_pos_embed = None
        if ape_size is not None:
            self.absolute_pos_embed = nn.Parameter(torch.zeros(1, c0, *to_tuple(ape_size, 2)))

    def _build_stages(self, gate_types, shifts, drop_path_rate: float, block_cfg: dict, stage_cfg: dict) -> None:
        """The four stages; block ``j`` of stage ``i`` shifts its windows when ``shifts[i]`` and ``j`` is odd."""
        s = self.arch_settings
        dpr = torch.linspace(0, drop_path_rate, sum(s['depths'])).tolist()
        self.stages = nn.ModuleList()
        cursor = 0
        for i, window in enumerate(self.window_sizes):
            block_kwargs = [
                dict(mlp_ratio=s['mlp_ratios'][i], groups=s['groups'][i], gate_type=gate_types[i],
                     shift=bool(shifts[i]) and j % 2 == 1, drop_path_rate=dpr[cursor + j], **block_cfg)
                for j in range(s['depths'][i])
            ]
            cursor += s['depths'][i]
            self.stages.append(PosMLPStage(
                self.embed_dims[i - 1] if i else self.embed_dims[0], self.embed_dims[i], s['depths'][i],
                window, tuple(w // 2 for w in window), downsample=i > 0, block_kwargs=block_kwargs, **stage_cfg))

    @classmethod
    def _parse_arch(cls, arch) -> Dict:
        if isinstance(arch, str):
            key = arch.lower()
            if key not in cls.arch_zoo:
                raise KeyError(f'unknown PosMLP arch {arch!r}; valid archs: '
                               f'{sorted(set(cls.arch_zoo))} or a dict with keys embed_dims, depths, '
                               'groups, mlp_ratios, window_sizes')
            return {**copy.deepcopy(cls.default_arch), **copy.deepcopy(cls.arch_zoo[key])}
        if not isinstance(arch, dict):
            raise TypeError(f'arch must be a name or a dict, got {type(arch).__name__}')
        settings = {**copy.deepcopy(cls.default_arch), **copy.deepcopy(arch)}
        unknown = set(settings) - {'embed_dims', 'depths', 'groups', 'mlp_ratios', 'window_sizes'}
        if unknown or 'embed_dims' not in arch:
            raise KeyError(f'a PosMLP arch dict needs embed_dims (and optionally depths, groups, '
                           f'mlp_ratios, window_sizes); unknown keys: {sorted(unknown)}')
        n = len(settings['embed_dims'])
        for k, v in settings.items():
            if len(v) != n:
                raise ValueError(f'arch[{k!r}] has {len(v)} entries, embed_dims has {n}')
        return settings

    # ------------------------------------------------------------------ weights
    def init_weights(self):
        pretrained = pretrained_init_cfg(self)
        if pretrained is not None:
            self._init_default()
            load_pretrained_init_cfg(self, pretrained, allowed_missing=self._new_output_norm_keys(),
                                     converter=functools.partial(checkpoint_filter_fn, model=self))
            self._is_init = True
            return
        super().init_weights()
        if self.init_cfg is None:
            self._init_default()

    def _init_default(self):
        init_gated_mlp_weights(self)
        if self.absolute_pos_embed is not None:
            from mmengine.model.weight_init import trunc_normal_
            trunc_normal_(self.absolute_pos_embed, std=0.02)

    def _frozen_parameters(self):
        return [self.absolute_pos_embed] if self.absolute_pos_embed is not None else []

    def _add_absolute_pos_embed(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` (B, H, W, C) + the APE, resized to (H, W) when the map differs."""
        pos = self.absolute_pos_embed
        if tuple(pos.shape[2:]) != tuple(x.shape[1:3]):
            pos = nn.functional.interpolate(pos, size=tuple(x.shape[1:3]), mode='bicubic', align_corners=False)
        return x + pos.permute(0, 2, 3, 1)

    # ------------------------------------------------------------------ forward
    def forward(self, x: torch.Tensor):
        if x.dim() != 4:
            raise ValueError(f'PosMLP expects an NCHW image batch, got shape {tuple(x.shape)}')
        if x.shape[1] != self.in_channels:
            raise ValueError(f'input has {x.shape[1]} channels but the backbone was built with '
                             f'in_channels={self.in_channels}')
        if isinstance(self.patch_embed, LinearPatchEmbed):
            x = self.patch_embed(x)  # (B, H, W, C)
        else:
            # channels-last memory from the stem on: its convs and ConvPM's depthwise convs are
            # much faster that way on CPU, and the stages' channels-last views need no copies
            x = self.patch_embed(x.contiguous(memory_format=torch.channels_last)).permute(0, 2, 3, 1)
        if self.absolute_pos_embed is not None:
            x = self._add_absolute_pos_embed(x)
        outs = {}
        for i, stage in enumerate(self.stages):
            x = stage(x)  # (B, H, W, C)
            if i in self.out_indices:
                outs[i] = self._output(i, x)
        return self._ordered_outputs(outs)
