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
from mmengine.logging import print_log
from mmengine.model import BaseModule

from mmposmlp.registry import MODELS
from ..checkpoints import load_pretrained_init_cfg, pretrained_init_cfg
from .base import ChannelsLastStagesMixin
from ..layers.gating import PositionalGatingUnit, init_gated_mlp_weights
from ..layers.grouped_conv import GroupedConv2d
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


class PosMLPStage(nn.Module):
    """ConvPM (except stage 0) + blocks on windows. Pads to the window multiple, masks the
    padding (and the shifted-window seams), crops back. Channels-last ``(B, H, W, C)`` in and
    out (the output is contiguous)."""

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
        layouts = {}
        current, windows = None, None
        for block in self.blocks:
            shift = self.shift_size if block.shift else (0, 0)
            if shift not in layouts:
                layouts[shift] = map_layout(x, self.window, shift)
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

    Output contract: a tuple with one NCHW tensor per ``out_indices`` entry, stage ``i`` at
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
        self.arch_settings = self._parse_arch(arch)
        s = self.arch_settings
        num_stages = len(s['embed_dims'])
        windows = window_sizes if window_sizes is not None else s['window_sizes']
        self.window_sizes = [to_tuple(w, 2) for w in windows]
        gate_types = [gate_type] * num_stages if isinstance(gate_type, str) else list(gate_type)
        shifts = [shift] * num_stages if isinstance(shift, bool) else list(shift)
        for name, seq in (('window_sizes', self.window_sizes), ('gate_type', gate_types), ('shift', shifts)):
            if len(seq) != num_stages:
                raise ValueError(f'{name} has {len(seq)} entries but the arch has {num_stages} stages')
        out_indices = [i + num_stages if i < 0 else i for i in out_indices]
        if not all(0 <= i < num_stages for i in out_indices):
            raise ValueError(f'out_indices {out_indices} out of range for {num_stages} stages')
        self.out_indices = tuple(out_indices)
        self.frozen_stages = frozen_stages
        self.norm_eval = norm_eval
        self.embed_dims = list(s['embed_dims'])

        linear_embed = _sampling_cfg('patch_embed_cfg', patch_embed_cfg, {'type', 'patch_size', 'norm_cfg'})
        linear_merge = _sampling_cfg('downsample_cfg', downsample_cfg, {'type', 'norm_cfg'})
        if linear_embed is not None and stem_norm_cfg is not None:
            raise ValueError("stem_norm_cfg is ConvPE's norm and a linear patch_embed_cfg has no ConvPE: set "
                             "patch_embed_cfg['norm_cfg'] instead")
        if linear_merge is not None and (downsample_norm_cfg is not None or not downsample_depthwise):
            raise ValueError('downsample_norm_cfg / downsample_depthwise=False are options of ConvPM and a linear '
                             "downsample_cfg has no ConvPM: set downsample_cfg['norm_cfg'] instead")
        self.in_channels = in_channels
        if linear_embed is None:
            self.patch_embed = ConvPatchEmbed(in_channels, s['embed_dims'][0],
                                              stem_norm_cfg or dict(type='BN', eps=1e-6), act_cfg)
            self.stem_stride = 4
        else:
            self.stem_stride = int(linear_embed.get('patch_size', 4))
            if self.stem_stride < 1:
                raise ValueError(f"patch_embed_cfg['patch_size'] must be a positive int, got {self.stem_stride}")
            self.patch_embed = LinearPatchEmbed(in_channels, s['embed_dims'][0], self.stem_stride,
                                                linear_embed.get('norm_cfg', norm_cfg))
        self.absolute_pos_embed = None
        if ape_size is not None:
            self.absolute_pos_embed = nn.Parameter(torch.zeros(1, s['embed_dims'][0], *to_tuple(ape_size, 2)))
        dpr = torch.linspace(0, drop_path_rate, sum(s['depths'])).tolist()
        self.stages = nn.ModuleList()
        cursor = 0
        for i in range(num_stages):
            window = self.window_sizes[i]
            block_kwargs = [
                dict(mlp_ratio=s['mlp_ratios'][i], groups=s['groups'][i], gate_type=gate_types[i],
                     shift=bool(shifts[i]) and j % 2 == 1, drop_rate=drop_rate,
                     drop_path_rate=dpr[cursor + j], norm_cfg=norm_cfg, act_cfg=act_cfg, gate_cfg=gate_cfg)
                for j in range(s['depths'][i])
            ]
            cursor += s['depths'][i]
            self.stages.append(PosMLPStage(
                s['embed_dims'][i - 1] if i else s['embed_dims'][0], s['embed_dims'][i], s['depths'][i],
                window, tuple(w // 2 for w in window), downsample=i > 0, block_kwargs=block_kwargs,
                norm_cfg=(linear_merge.get('norm_cfg', norm_cfg) if linear_merge is not None
                          else downsample_norm_cfg or norm_cfg), with_cp=with_cp,
                downsample_depthwise=downsample_depthwise, downsample_linear=linear_merge is not None))
        self._build_outputs(s['embed_dims'], norm_cfg, out_norm)
        for i, info in enumerate(self.feature_info):
            info['reduction'] = self.stem_stride * 2**i
        self._freeze_stages()

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
                                     converter=functools.partial(_maybe_convert_official, model=self))
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
        outs = []
        for i, stage in enumerate(self.stages):
            x = stage(x)  # (B, H, W, C)
            if i in self.out_indices:
                outs.append(self._output(i, x))
        return tuple(outs)


# ---------------------------------------------------------------------- official checkpoints
def _axes_to_ours(value: torch.Tensor, both_sides: bool) -> torch.Tensor:
    """Official GQPE coordinates ``(dx, -dy)`` -> ours ``(dy, dx)``: ``D v`` (rows) and, for a
    free (non-symmetric) ``Sigma``, ``D Sigma D^T`` (rows and columns), ``D = [[0, -1], [1, 0]]``."""
    value = torch.stack([-value[:, 1], value[:, 0]], dim=1)
    if both_sides:
        value = torch.stack([-value[..., 1], value[..., 0]], dim=-1)
    return value


def convert_official_posmlp(state: Dict[str, torch.Tensor], symmetric: bool = True,
                            absolute_bias: bool = True) -> Dict[str, torch.Tensor]:
    """Official ``Zhicaiwww/PosMLP`` keys -> ours (backbone keys; ``head.*`` kept as is).

    * ``patch_embed.projs.i``/``norms.i`` -> ``patch_embed.i.conv``/``.bn`` (``.ln`` for the
      LayerNorm stem, recognised by its missing running statistics); the linear stem
      (``stem=PatchEmbed``) ``patch_embed.proj`` -> ``patch_embed.projection``;
      ``levels.i.pool`` -> ``stages.i.downsample``; ``levels.i.encoder.j`` -> ``stages.i.blocks.j``;
      ``proj_c_e``/``proj_c_s`` -> ``fc1``/``fc2``; final ``norm`` -> ``norm{last}``;
      ``absolute_pos_embed`` (1, 3136, C), read by the official code as ``reshape(1, -1, 56, 56)``,
      -> (1, C, 56, 56) in the same memory order.
    * GQPE: the official offsets are ``(dx, dy) = (x_n - x_m, y_m - y_n)``; ours are
      ``(dy', dx') = (y_n - y_m, x_n - x_m)``. With ``D = [[0, -1], [1, 0]]`` (swap axes, flip y)
      the centres map to ``D c`` and ``Gamma`` to ``D Gamma``, so ``Sigma -> D Sigma D^T``: exact.
      ``symmetric=False`` (official option: ``Sigma`` is the parameter itself) maps it to
      ``D Sigma D^T`` directly.
    * ``token_proj_n_bias`` (1, N, 1) -> ``token_bias`` (N,), except with ``absolute_bias=False``
      (official QPE option: the bias exists but is never added), where it is dropped;
      ``token_proj_n_weight`` (1, N, N) -> ``token_weight`` for LRPE-M (``quadratic=False,
      pos_only=False``); next to a QPE (``quadratic=True, pos_only=False``) the official forward
      never reads it, and it is dropped. The SGU gate unit's ``norm_list.0`` / ``proj_list.0``
      -> ``gate.norm`` / ``gate.mixing.weight`` + ``gate.token_bias``. The constant buffers
      (``rel_indices``, ``window_relative_position_index``) are dropped (we rebuild them).
    * Any other key raises.
    """
    out = {}
    last = max((int(k.split('.')[1]) for k in state if k.startswith('levels.')), default=3)
    ln_stem = 'patch_embed.norms.0.weight' in state and 'patch_embed.norms.0.running_mean' not in state
    qpe_units = {k.rsplit('.pos.', 1)[0] for k in state if k.endswith('.pos.attention_centers')}
    for key, value in state.items():
        if key.endswith(('rel_indices', 'window_relative_position_index')):
            continue
        new = None
        if key.startswith('patch_embed.projs.'):
            i, rest = key[len('patch_embed.projs.'):].split('.', 1)
            new = f'patch_embed.{i}.conv.{rest}'
        elif key.startswith('patch_embed.norms.'):
            i, rest = key[len('patch_embed.norms.'):].split('.', 1)
            new = f'patch_embed.{i}.{"ln" if ln_stem else "bn"}.{rest}'
        elif key in ('patch_embed.proj.weight', 'patch_embed.proj.bias'):
            new = key.replace('.proj.', '.projection.')
        elif key in ('patch_embed.norm.weight', 'patch_embed.norm.bias'):
            new = key
        elif key == 'absolute_pos_embed':
            new, value = key, value.reshape(1, -1, 56, 56)
        elif key.startswith('levels.'):
            new = key.replace('levels.', 'stages.', 1).replace('.pool.', '.downsample.') \
                .replace('.encoder.', '.blocks.').replace('.proj_c_e.', '.fc1.').replace('.proj_c_s.', '.fc2.')
            unit = key.split('.gate_unit.', 1)[0] + '.gate_unit' if '.gate_unit.' in key else None
            leaf = key.rsplit('.', 1)[1]
            if unit is None:
                pass
            elif '.gate_unit.pos.' in key:
                head = new.split('.gate_unit.', 1)[0] + '.gate.'
                if leaf == 'token_proj_n_bias':
                    if unit in qpe_units and not absolute_bias:
                        continue  # official absolute_bias=False: created, never added
                    new, value = head + 'token_bias', value.reshape(-1)
                elif leaf == 'window_relative_position_bias_table':
                    new = head + 'mixing.relative_position_table'
                elif leaf == 'attention_centers':
                    new, value = head + 'mixing.centers', _axes_to_ours(value, False)
                elif leaf == 'attention_spreads':
                    new = head + 'mixing.spreads'
                    if value.dim() == 3:
                        value = _axes_to_ours(value, not symmetric)
                else:
                    new = None
            elif key == unit + '.token_proj_n_weight':
                if unit in qpe_units:
                    continue  # quadratic=True, pos_only=False: the official forward never reads it
                new = new.split('.gate_unit.', 1)[0] + '.gate.mixing.token_weight'
                value = value.reshape(value.shape[-2], value.shape[-1])
            elif key.startswith(unit + '.proj_list.0.') or key.startswith(unit + '.norm_list.0.'):
                head = new.split('.gate_unit.', 1)[0] + '.gate.'
                if '.norm_list.0.' in key:
                    new = head + 'norm.' + leaf
                else:
                    new = head + ('mixing.weight' if leaf == 'weight' else 'token_bias')
            else:
                new = None
        elif key.startswith('norm.'):
            new = f'norm{last}.' + key[len('norm.'):]
        elif key.startswith('head.'):
            new = key
        if new is None:
            raise KeyError(f'unexpected key {key!r} in an official PosMLP checkpoint (not a key of the official '
                           'PosMLP model with PoSGU/SGU gates): is it a PosMLP (models/posmlp.py) state dict?')
        out[new] = value
    return out


def model_convert_kwargs(model: nn.Module) -> dict:
    """The :func:`convert_official_posmlp` options implied by one of our models."""
    units = [m for m in model.modules() if isinstance(m, PositionalGatingUnit)]
    symmetric = {getattr(u.mixing, 'symmetric', True) for u in units} or {True}
    bias = {u.token_bias is not None for u in units if hasattr(u.mixing, 'centers')} or {True}
    if len(symmetric) > 1 or len(bias) > 1:
        raise ValueError('an official PosMLP checkpoint sets symmetric/absolute_bias for the whole model; '
                         'this model mixes values: build it from official_arch_to_ours')
    return dict(symmetric=symmetric.pop(), absolute_bias=bias.pop())


def _maybe_convert_official(state: Dict[str, torch.Tensor],
                            model: Optional[nn.Module] = None) -> Dict[str, torch.Tensor]:
    """Accept official checkpoints directly in ``init_cfg`` (converted on the fly, with the
    options of ``model``)."""
    if any(k.startswith('levels.') for k in state):
        state = convert_official_posmlp(state, **(model_convert_kwargs(model) if model is not None else {}))
    head = [k for k in state if k.startswith('head.')]
    if head:
        print_log(f'PosMLP: the classifier keys {head} of the checkpoint are not backbone weights; left unused',
                  logger='current')
    return {k: v for k, v in state.items() if not k.startswith('head.')}


#: official ``PosMLP`` constructor defaults (``models/posmlp.py``, its blocks' ``**kwargs`` included)
OFFICIAL_DEFAULTS = dict(
    img_size=(224, 224), in_chans=3, in_chan=3, patch_size=4, num_levels=3, embed_dims=(96, 192, 384, 768),
    win_size=(14, 14, 14, 7), gamma=(8, 16, 32, 64), depths=(2, 2, 18, 2), mlp_ratio=(4, 4, 4, 2),
    num_classes=1000, gate_unit='PoSGU', gate_layer='PosMLPLayer', pool_layer='ConvPatchMerging',
    stem='ConvPatchEmbed', drop_rate=0., drop_path_rate=0.1, norm_layer='partial(nn.LayerNorm, eps=1e-6)',
    act_layer='nn.GELU', global_pool='avg', stem_norm='BN', downsample_norm='LN', ape=False, pretrained=None,
    chunks=2, shift=False, num_blocks=1, quadratic=True, generalized=True, pos_only=True, use_softmax=True,
    att_std=1e-2, absolute_bias=True, symmetric=True, depth_conv=True)


def _official_eps(norm_layer) -> float:
    spec = str(norm_layer).replace(' ', '')
    for prefix in ('nn.', 'torch.nn.'):
        spec = spec.replace('partial(' + prefix, 'partial(').replace(prefix + 'LayerNorm', 'LayerNorm')
    if spec == 'LayerNorm':
        return 1e-5
    if spec.startswith('partial(LayerNorm,eps=') and spec.endswith(')'):
        return float(spec[len('partial(LayerNorm,eps='):-1])
    raise ValueError(f"official norm_layer={norm_layer!r} is not supported: only nn.LayerNorm (any eps) is")


def official_arch_to_ours(arch: dict) -> dict:
    """Constructor kwargs of the official ``PosMLP`` (test vectors' ``arch_json``; non-JSON
    arguments as strings, e.g. ``"gate_unit": "SGU"``) -> ours.

    Every official option is either mapped or refused with a ``ValueError`` naming it; unknown
    keys are refused. Options with no effect on a trained model's function are accepted:
    ``img_size``/``patch_size``/``in_chans`` (the official ConvPE ignores them; ``stem=PatchEmbed``
    reads ``in_chans`` and asserts ``img_size``, which ours does not need), ``num_classes``
    (the head), ``att_std``/``pretrained`` (initialisation), ``drop_rate``/``drop_path_rate``
    (mapped; training only).
    """
    unknown = sorted(set(arch) - set(OFFICIAL_DEFAULTS))
    if unknown:
        raise ValueError(f'unknown official PosMLP options {unknown}; known: {sorted(OFFICIAL_DEFAULTS)}')
    # The official ``stem=PatchEmbed`` is a 16x16 linear embedding (PosMLP's own ``patch_size`` is not
    # passed on) with ``nn.LayerNorm`` (eps 1e-5), taking ``in_chans`` channels and ignoring ``stem_norm``;
    # ``pool_layer=PatchMerging`` does not run (below).
    a = {**OFFICIAL_DEFAULTS, **arch}
    n = int(a['num_levels'])
    lists = {k: list(a[k]) for k in ('embed_dims', 'win_size', 'gamma', 'depths', 'mlp_ratio')}
    if any(len(v) != n for v in lists.values()):
        raise ValueError(f'official num_levels={n} but embed_dims/win_size/gamma/depths/mlp_ratio have lengths '
                         f'{[len(v) for v in lists.values()]} (the official model asserts they match)')
    if str(a['pool_layer']).split('.')[-1] == 'PatchMerging':
        raise ValueError("official pool_layer='PatchMerging' does not run (its LayerNorm and 1x1 reduction are built "
                         'for in_chan channels but get the 4*in_chan concatenation): use ConvPatchMerging; our '
                         "downsample_cfg=dict(type='linear') is the working Swin form it was meant to be")
    for name, ok in (('gate_layer', ('PosMLPLayer', )), ('pool_layer', ('ConvPatchMerging', )),
                     ('stem', ('ConvPatchEmbed', 'PatchEmbed')), ('act_layer', ('nn.GELU', )),
                     ('global_pool', ('avg', ))):
        if str(a[name]).split('.')[-1] not in [o.split('.')[-1] for o in ok]:
            raise ValueError(f'official {name}={a[name]!r} is not supported: only {" or ".join(map(repr, ok))} '
                             'has an equivalent here')
    linear_stem = str(a['stem']).split('.')[-1] == 'PatchEmbed'
    for name in ('stem_norm', 'downsample_norm'):
        if name == 'stem_norm' and linear_stem:
            continue  # not read by the official linear stem
        if a[name] not in ('BN', 'LN'):
            raise ValueError(f"official {name}={a[name]!r} is not supported: use 'BN' or 'LN'")
    if a['pretrained'] not in (None, ''):
        raise ValueError('official pretrained=<path> loads weights at construction: convert that file instead')
    eps = _official_eps(a['norm_layer'])
    norm_cfg = dict(type='LN', eps=eps)
    chunks, gate_unit = int(a['chunks']), str(a['gate_unit'])
    quadratic, pos_only = bool(a['quadratic']), bool(a['pos_only'])
    gate_cfg = {}
    if gate_unit == 'SGU':
        if chunks != 2:
            raise ValueError(f'official SGU with chunks={chunks} is not supported: only chunks=2 (gMLP SGU) '
                             'has an equivalent here')
        if sum(lists['depths']) > 26:
            raise ValueError('official SGU drops the token-FC bias of blocks after the 26th: depths summing to '
                             f'{sum(lists["depths"])} are not supported')
        gate = 'sgu'
        if eps != 1e-6:
            gate_cfg['norm_cfg'] = norm_cfg
    elif gate_unit == 'PoSGU':
        if chunks not in (1, 2):
            raise ValueError(f'official PoSGU with chunks={chunks} does not build (its FC2 expects '
                             'hidden/chunks channels but gets hidden/2): use chunks 1 or 2')
        if chunks == 1:
            gate_cfg['split'] = False
        if quadratic:
            gate = 'ggqpe' if a['generalized'] else 'gqpe'
            if not a['absolute_bias']:
                gate_cfg['token_bias'] = False
            if not a['use_softmax']:
                gate_cfg['softmax'] = False
            if a['generalized'] and not a['symmetric']:
                gate_cfg['symmetric'] = False
        else:
            gate = 'glrpe' if pos_only else 'glrpe-m'
    else:
        raise ValueError(f"official gate_unit={gate_unit!r} is not supported: use 'PoSGU' or 'SGU'")
    if a['shift'] and a['num_blocks'] != 1:
        raise ValueError('official shift=True with num_blocks != 1 does not run (PosMLPLayer.forward_shift calls a '
                         'missing self.window_partition); with num_blocks=1 it shifts nothing and maps to shift=False')
    ours = dict(arch=dict(embed_dims=lists['embed_dims'], depths=lists['depths'], groups=lists['gamma'],
                          mlp_ratios=lists['mlp_ratio'], window_sizes=lists['win_size']),
                in_channels=int(a['in_chans'] if linear_stem else a['in_chan']), gate_type=gate, shift=False,
                drop_rate=float(a['drop_rate']), drop_path_rate=float(a['drop_path_rate']), norm_cfg=norm_cfg)
    if linear_stem:
        ours['patch_embed_cfg'] = dict(type='linear', patch_size=16, norm_cfg=dict(type='LN', eps=1e-5))
    else:
        ours['stem_norm_cfg'] = dict(type=a['stem_norm'], eps=1e-6)
    ours.update(downsample_norm_cfg=dict(type=a['downsample_norm'], eps=1e-6),
                downsample_depthwise=bool(a['depth_conv']))
    if gate_cfg:
        ours['gate_cfg'] = gate_cfg
    if a['ape']:
        if lists['embed_dims'][0] != 96:
            raise ValueError('official ape=True builds a (1, 3136, 96) embedding: it only runs with embed_dims[0]=96')
        ours['ape_size'] = (56, 56)
    return ours


def official_convert_kwargs(arch: dict) -> dict:
    """The :func:`convert_official_posmlp` options of an official constructor-kwargs dict."""
    a = {**OFFICIAL_DEFAULTS, **arch}
    quadratic_gen = a['gate_unit'] == 'PoSGU' and a['quadratic']
    return dict(symmetric=bool(a['symmetric']) or not (quadratic_gen and a['generalized']),
                absolute_bias=bool(a['absolute_bias']) or not quadratic_gen)
