"""PosMLP image backbone (Wang et al., ACM MM 2022, https://arxiv.org/abs/2207.07284)."""
import copy
from typing import Dict, Optional, Sequence, Union

import torch
import torch.nn as nn
import torch.utils.checkpoint as cp
from mmcv.cnn import ConvModule, build_activation_layer, build_norm_layer
from mmcv.cnn.bricks import DropPath
from mmengine.model import BaseModule

from mmposmlp.registry import MODELS
from ..checkpoints import load_pretrained
from .base import ChannelsLastStagesMixin
from ..layers.gating import PositionalGatingUnit, init_gated_mlp_weights
from ..layers.windows import crop, make_layout, pad_to_multiple, to_tuple


class ConvPatchEmbed(nn.Sequential):
    """ConvPE (paper Sec. 4.2, Fig. 2b): conv3x3/s2 -> conv3x3/s2 -> conv1x1, each + norm,
    GELU after the first two. ``H x W x 3`` -> ``ceil(H/4) x ceil(W/4) x C``."""

    def __init__(self, in_channels: int, embed_dims: int, norm_cfg: dict, act_cfg: dict):
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
    """

    def __init__(self, in_channels: int, out_channels: int, norm_cfg: dict):
        super().__init__()
        if out_channels % in_channels:
            raise ValueError(f'ConvPM is a depthwise conv (groups=in_channels): out_channels={out_channels} '
                             f'must be a multiple of in_channels={in_channels}; fix embed_dims in the arch')
        self.conv = nn.Conv2d(in_channels, out_channels, 3, stride=2, padding=1, groups=in_channels)
        self.norm = build_norm_layer(norm_cfg, out_channels)[1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, H, W, C) -> (B, H', W', C')
        x = self.conv(x.permute(0, 3, 1, 2))
        return self.norm(x.permute(0, 2, 3, 1))


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
        self.fc2 = nn.Linear(hidden // 2, embed_dims)
        self.drop = nn.Dropout(drop_rate)
        self.drop_path = DropPath(drop_path_rate) if drop_path_rate > 0 else nn.Identity()

    def forward(self, x: torch.Tensor, layout=None) -> torch.Tensor:
        y = self.gate.forward_mlp(self.norm(x), self.fc1, self.act, self.fc2, layout)  # fc2(gate(act(fc1(.))))
        return x + self.drop_path(self.drop(y))


class PosMLPStage(nn.Module):
    """ConvPM (except stage 0) + blocks on windows. Pads to the window multiple, masks the
    padding (and the shifted-window seams), crops back. Channels-last ``(B, H, W, C)`` in and
    out (the output may be a cropped view)."""

    def __init__(self, in_channels: int, embed_dims: int, depth: int, window, shift_size,
                 downsample: bool, block_kwargs: Sequence[dict], norm_cfg: dict, with_cp: bool = False):
        super().__init__()
        self.window = window
        self.shift_size = shift_size
        self.with_cp = with_cp
        self.downsample = ConvPatchMerging(in_channels, embed_dims, norm_cfg) if downsample else None
        self.blocks = nn.ModuleList([PosMLPBlock(embed_dims=embed_dims, window=window, **kw)
                                     for kw in block_kwargs])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.downsample is not None:
            x = self.downsample(x)
        valid = tuple(x.shape[1:3])
        x = pad_to_multiple(x, self.window)
        layouts = {}
        current, windows = None, None
        for block in self.blocks:
            shift = self.shift_size if block.shift else (0, 0)
            if shift not in layouts:
                layouts[shift] = make_layout(x, valid, self.window, shift)
            layout = layouts[shift]
            if current is None:
                windows, current = layout.partition(x), layout
            elif layout is not current:
                windows, current = current.convert(windows, layout), layout
            if self.with_cp and windows.requires_grad:
                windows = cp.checkpoint(block, windows, layout, use_reentrant=False)
            else:
                windows = block(windows, layout)
        return crop(current.reverse(windows), valid)


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

    Output contract: a tuple with one NCHW tensor per ``out_indices`` entry, stage ``i`` at
    stride ``2**(i+2)`` and spatial size ``ceil(H / 2**(i+2))``; any input size works
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
                 stem_norm_cfg: dict = dict(type='BN', eps=1e-6),
                 norm_cfg: dict = dict(type='LN', eps=1e-6),
                 act_cfg: dict = dict(type='GELU'),
                 gate_cfg: Optional[dict] = None,
                 pretrained: Optional[str] = None,
                 init_cfg: Optional[Union[dict, list]] = None):
        if pretrained is not None:  # mmseg pushes a segmentor-level `pretrained` here
            init_cfg = dict(type='Pretrained', checkpoint=pretrained)
        super().__init__(init_cfg=init_cfg)
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

        self.patch_embed = ConvPatchEmbed(in_channels, s['embed_dims'][0], stem_norm_cfg, act_cfg)
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
                norm_cfg=norm_cfg, with_cp=with_cp))
        self._build_outputs(s['embed_dims'], norm_cfg, out_norm)
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
        if self.init_cfg is not None and self.init_cfg.get('type') == 'Pretrained':
            self._init_default()
            allowed = self._new_output_norm_keys()
            load_pretrained(self, self.init_cfg['checkpoint'], prefix=self.init_cfg.get('prefix'),
                            converter=_maybe_convert_official, allowed_missing=allowed)
            self._is_init = True
            return
        super().init_weights()
        if self.init_cfg is None:
            self._init_default()

    def _init_default(self):
        init_gated_mlp_weights(self)

    # ------------------------------------------------------------------ forward
    def forward(self, x: torch.Tensor):
        if x.dim() != 4:
            raise ValueError(f'PosMLP expects an NCHW image batch, got shape {tuple(x.shape)}')
        if x.shape[1] != self.patch_embed[0].conv.in_channels:
            raise ValueError(f'input has {x.shape[1]} channels but the backbone was built with '
                             f'in_channels={self.patch_embed[0].conv.in_channels}')
        # channels-last memory from the stem on: its convs and ConvPM's depthwise convs are
        # much faster that way on CPU, and the stages' channels-last views need no copies
        x = self.patch_embed(x.contiguous(memory_format=torch.channels_last)).permute(0, 2, 3, 1)
        outs = []
        for i, stage in enumerate(self.stages):
            x = stage(x)  # (B, H, W, C)
            if i in self.out_indices:
                outs.append(self._output(i, x))
        return tuple(outs)


# ---------------------------------------------------------------------- official checkpoints
def convert_official_posmlp(state: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Official ``Zhicaiwww/PosMLP`` keys -> ours (backbone keys; ``head.*`` kept as is).

    * ``patch_embed.projs.i``/``norms.i`` -> ``patch_embed.i.conv``/``.bn``;
      ``levels.i.pool`` -> ``stages.i.downsample``; ``levels.i.encoder.j`` -> ``stages.i.blocks.j``;
      ``proj_c_e``/``proj_c_s`` -> ``fc1``/``fc2``; final ``norm`` -> ``norm3``.
    * GQPE: the official offsets are ``(dx, dy) = (x_n - x_m, y_m - y_n)``; ours are
      ``(dy', dx') = (y_n - y_m, x_n - x_m)``. With ``D = [[0, -1], [1, 0]]`` (swap axes, flip y)
      the centres map to ``D c`` and ``Gamma`` to ``D Gamma``, so ``Sigma -> D Sigma D^T``: exact.
    * ``token_proj_n_bias`` (1, N, 1) -> ``token_bias`` (N,); the constant buffers
      (``rel_indices``, ``window_relative_position_index``) are dropped (we rebuild them).
    """
    out = {}
    last = max((int(k.split('.')[1]) for k in state if k.startswith('levels.')), default=3)
    for key, value in state.items():
        if key.endswith(('rel_indices', 'window_relative_position_index')):
            continue
        new = key
        if key.startswith('patch_embed.projs.'):
            new = key.replace('patch_embed.projs.', 'patch_embed.').replace('.weight', '.conv.weight') \
                .replace('.bias', '.conv.bias')
        elif key.startswith('patch_embed.norms.'):
            i, rest = key[len('patch_embed.norms.'):].split('.', 1)
            new = f'patch_embed.{i}.bn.{rest}'
        elif key.startswith('levels.'):
            new = key.replace('levels.', 'stages.', 1).replace('.pool.', '.downsample.') \
                .replace('.encoder.', '.blocks.').replace('.proj_c_e.', '.fc1.').replace('.proj_c_s.', '.fc2.') \
                .replace('.gate_unit.pos.', '.gate.mixing.')
            if new.endswith('.gate.mixing.token_proj_n_bias'):
                new = new.replace('.gate.mixing.token_proj_n_bias', '.gate.token_bias')
                value = value.reshape(-1)
            elif new.endswith('.gate.mixing.token_proj_n_weight'):
                new = new.replace('token_proj_n_weight', 'token_weight')
                value = value.reshape(value.shape[-2], value.shape[-1])
            elif new.endswith('window_relative_position_bias_table'):
                new = new.replace('window_relative_position_bias_table', 'relative_position_table')
            elif new.endswith('attention_centers'):
                new = new.replace('attention_centers', 'centers')
                value = torch.stack([-value[:, 1], value[:, 0]], dim=1)
            elif new.endswith('attention_spreads'):
                new = new.replace('attention_spreads', 'spreads')
                if value.dim() == 3:
                    value = torch.stack([-value[:, 1], value[:, 0]], dim=1)
        elif key.startswith('norm.'):
            new = f'norm{last}.' + key[len('norm.'):]
        out[new] = value
    return out


def _maybe_convert_official(state: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Accept official checkpoints directly in ``init_cfg`` (converted on the fly)."""
    if any(k.startswith('levels.') for k in state):
        state = convert_official_posmlp(state)
    return {k: v for k, v in state.items() if not k.startswith('head.')}


def official_arch_to_ours(arch: dict) -> dict:
    """Constructor kwargs of the official ``PosMLP`` (test vectors' ``arch_json``) -> ours."""
    quadratic = arch.get('quadratic', True)
    generalized = arch.get('generalized', True)
    if quadratic:
        gate = 'ggqpe' if generalized else 'gqpe'
    else:
        gate = 'glrpe' if arch.get('pos_only', True) else 'lrpe-m'
        if gate == 'lrpe-m':
            raise NotImplementedError('official pos_only=False with groups: use gate_cfg')
    return dict(arch=dict(embed_dims=list(arch['embed_dims']), depths=list(arch['depths']),
                          groups=list(arch['gamma']), mlp_ratios=list(arch['mlp_ratio']),
                          window_sizes=list(arch['win_size'])),
                gate_type=gate, drop_path_rate=0.)
