"""IMLP: AGeLU and the improved feed-forward module for vision transformers.

Paper: "Improving MLP Module in Vision Transformer" (ICLR 2024 submission; published as
"Enhancing Vision Transformer: Amplifying Non-Linearity in Feedforward Network Module",
ICML 2024). No public code exists; this is a from-paper implementation, its design pinned
down by the paper's tables:

* Eq. 3/4: arbitrary activation ``beta * act(alpha * x + gamma) + theta`` with learnable
  per-channel ``alpha, beta, gamma, theta`` (:class:`AdaptiveActivation`, :class:`AGeLU`,
  :class:`ASoftPlus` of Table 8).
* Eq. 5 (AMLP, "channel-wise enhancement"): ``concat(AGeLU(X W^d), AGeLU'(X W^d)) W^e`` with
  ``W^d: C -> r*C`` (r = 2) and ``W^e: 2*r*C -> C``.
* Sec. 4.3 / Fig. 4 ("spatial-wise enhancement"): a DW block (n x n depthwise conv + BN +
  GELU) after the concatenated AGeLUs. Table 5's parameter steps for DeiT-Ti (4.92, 5.00,
  5.15, 5.37 M for n = 1, 3, 5, 7) are 12 blocks x (n^2 steps) x ~770 channels, i.e. the
  depthwise conv runs on the 2*r*C = 4C concatenated channels (not on the r*C FC output).
* Sec. 5.1: r = 2, n = 3 by default; Table 1 rows marked "*" use n = 5.
"""
from typing import Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
from mmcv.cnn import build_activation_layer, build_norm_layer
from mmcv.cnn.bricks.drop import build_dropout
from mmengine.model import BaseModule
from mmengine.model.weight_init import trunc_normal_

from mmposmlp.registry import MODELS
from .grouped_conv import GroupedConv2d

_BUILTIN_ACTS = {
    'GELU': nn.GELU, 'ReLU': nn.ReLU, 'SoftPlus': nn.Softplus, 'Softplus': nn.Softplus,
    'SiLU': nn.SiLU, 'Tanh': nn.Tanh, 'Sigmoid': nn.Sigmoid, 'Identity': nn.Identity,
}


def _build_base_act(act_cfg: Union[dict, nn.Module, None]) -> nn.Module:
    if act_cfg is None:
        return nn.Identity()
    if isinstance(act_cfg, nn.Module):
        return act_cfg
    cfg = dict(act_cfg)
    name = cfg.get('type')
    if isinstance(name, str) and name in _BUILTIN_ACTS:
        cfg.pop('type')
        return _BUILTIN_ACTS[name](**cfg)
    return build_activation_layer(cfg)


@MODELS.register_module()
class AdaptiveActivation(nn.Module):
    """Arbitrary non-linear function ``beta * act(alpha * x + gamma) + theta`` (Eq. 3).

    ``alpha, beta, gamma, theta`` are learnable per-channel vectors of length
    ``num_channels``; the channel axis of the input is ``channel_dim`` (``-1`` for
    channels-last tokens, ``1`` for NCHW maps). With ``alpha = beta = 1`` and
    ``gamma = theta = 0`` (the default initialisation) it is exactly ``act``.

    Args:
        num_channels (int): number of channels.
        act_cfg (dict): the base activation, e.g. ``dict(type='GELU')`` (AGeLU),
            ``dict(type='SoftPlus')`` (ASoftPlus, Table 8), ``dict(type='ReLU')`` (AReLU).
        channel_dim (int): axis of the channels. Default: -1.
        init (tuple): initial ``(alpha, beta, gamma, theta)``. Default: ``(1, 1, 0, 0)``.
    """

    def __init__(self, num_channels: int, act_cfg: dict = dict(type='GELU'),
                 channel_dim: int = -1, init: Sequence[float] = (1., 1., 0., 0.)):
        super().__init__()
        if int(num_channels) <= 0:
            raise ValueError(f'{type(self).__name__}: num_channels must be positive, got {num_channels}')
        if len(init) != 4:
            raise ValueError(f'{type(self).__name__}: init must be (alpha, beta, gamma, theta), got {init}')
        self.num_channels = int(num_channels)
        self.channel_dim = channel_dim
        self.act = _build_base_act(act_cfg)
        a, b, g, t = (float(v) for v in init)
        self.alpha = nn.Parameter(torch.full((self.num_channels,), a))
        self.beta = nn.Parameter(torch.full((self.num_channels,), b))
        self.gamma = nn.Parameter(torch.full((self.num_channels,), g))
        self.theta = nn.Parameter(torch.full((self.num_channels,), t))

    def _shape(self, p: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        dim = self.channel_dim % x.dim()
        if x.shape[dim] != self.num_channels:
            raise ValueError(f'{type(self).__name__}: expected {self.num_channels} channels on axis '
                             f'{self.channel_dim}, got input of shape {tuple(x.shape)}')
        shape = [1] * x.dim()
        shape[dim] = self.num_channels
        return p.view(shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b, g, t = (self._shape(p, x) for p in (self.alpha, self.beta, self.gamma, self.theta))
        return b * self.act(a * x + g) + t

    def extra_repr(self) -> str:
        return f'{self.num_channels}, act={type(self.act).__name__}, channel_dim={self.channel_dim}'


@MODELS.register_module()
class AGeLU(AdaptiveActivation):
    """Arbitrary GeLU, Eq. 4: ``beta * GELU(alpha * x + gamma) + theta`` (per channel)."""

    def __init__(self, num_channels: int, channel_dim: int = -1,
                 init: Sequence[float] = (1., 1., 0., 0.), approximate: str = 'none'):
        super().__init__(num_channels, act_cfg=nn.GELU(approximate=approximate),
                         channel_dim=channel_dim, init=init)


@MODELS.register_module()
class ASoftPlus(AdaptiveActivation):
    """Arbitrary SoftPlus (Table 8): ``beta * softplus(alpha * x + gamma) + theta``."""

    def __init__(self, num_channels: int, channel_dim: int = -1,
                 init: Sequence[float] = (1., 1., 0., 0.)):
        super().__init__(num_channels, act_cfg=nn.Softplus(), channel_dim=channel_dim, init=init)


def _build_channel_act(act_cfg: dict, num_channels: int) -> nn.Module:
    """An activation over ``num_channels`` channels-last channels.

    Adaptive types (``AGeLU``, ``ASoftPlus``, ``AdaptiveActivation``, with or without the
    ``mmposmlp.`` prefix) get ``num_channels``; anything else is a plain activation.
    """
    cfg = dict(act_cfg)
    name = cfg.get('type')
    short = name.split('.', 1)[1] if isinstance(name, str) and name.startswith('mmposmlp.') else name
    adaptive = {'AGeLU': AGeLU, 'ASoftPlus': ASoftPlus, 'AdaptiveActivation': AdaptiveActivation}
    if short in adaptive:
        # built directly, not through MODELS.build: a downstream default scope (mmdet, ...)
        # would look 'AGeLU' up in its own registry.
        cfg.pop('type')
        cfg.setdefault('num_channels', num_channels)
        cfg.setdefault('channel_dim', -1)
        return adaptive[short](**cfg)
    return _build_base_act(cfg)


def _check_shape_options(embed_dims, num_branches: int, kernel_size: int, extra_tokens: str) -> None:
    """Refuse, in one sentence each, IMLP options that cannot be built."""
    if int(embed_dims) <= 0:
        raise ValueError(f'IMLP: embed_dims must be positive, got {embed_dims}')
    if num_branches < 1:
        raise ValueError(f'IMLP: num_branches must be >= 1, got {num_branches}')
    if kernel_size < 1 or kernel_size % 2 == 0:
        raise ValueError(f'IMLP: kernel_size must be a positive odd number (same padding), got {kernel_size}')
    if extra_tokens not in ('isolated', 'skip'):
        raise ValueError(f"IMLP: extra_tokens must be 'isolated' or 'skip', got {extra_tokens!r}")


def _hidden_width(embed_dims: int, feedforward_channels: Optional[int], expansion_ratio, num_branches: int) -> int:
    """``fc1``'s width: ``round(r * C)``, or with ``expansion_ratio=None`` the host's ``C' / k`` (Eq. 5)."""
    if expansion_ratio is None:
        if feedforward_channels is None:
            raise ValueError('IMLP: expansion_ratio=None takes the width from feedforward_channels '
                             '(Eq. 5: C\'/2); pass feedforward_channels or a numeric expansion_ratio.')
        hidden = int(feedforward_channels) // num_branches
    else:
        hidden = int(round(float(expansion_ratio) * embed_dims))
    if hidden <= 0:
        raise ValueError(f'IMLP: hidden width {hidden} <= 0 (expansion_ratio={expansion_ratio}, '
                         f'feedforward_channels={feedforward_channels})')
    return hidden


def _build_branch_acts(act_cfg: dict, act_inits, num_branches: int, hidden: int) -> nn.ModuleList:
    """The ``k`` branch activations (Eq. 5), each with its own ``act_inits`` entry when given."""
    if act_inits is not None and len(act_inits) != num_branches:
        raise ValueError(f'IMLP: act_inits needs {num_branches} entries, got {len(act_inits)}')
    acts = []
    for i in range(num_branches):
        cfg = dict(act_cfg)
        if act_inits is not None:
            cfg['init'] = tuple(act_inits[i])
        acts.append(_build_channel_act(cfg, hidden))
    return nn.ModuleList(acts)


@MODELS.register_module()
class IMLP(BaseModule):
    """Improved MLP (Fig. 4b): a drop-in replacement of a vision transformer's FFN.

    ``fc1 (C -> h) -> concat(act_1, ..., act_k) (k*h) -> [DW block] -> fc2 (k*h -> C)``,
    with ``h = r*C``, ``k = 2`` AGeLUs (channel-wise enhancement, Eq. 5) and the DW block
    ``n x n depthwise conv (k*h channels) + BN + GELU`` (spatial-wise enhancement, Sec. 4.3).

    Width mapping (the drop-in contract): ``feedforward_channels`` is the host's ORIGINAL
    hidden width ``C' = mlp_ratio * C`` (what mmcv's ``FFN`` takes). IMLP uses its own
    expansion ``r``: ``fc1`` has ``round(r * embed_dims)`` outputs and ``fc2`` has
    ``num_branches * round(r * embed_dims)`` inputs, whatever ``feedforward_channels`` is.
    Only with ``expansion_ratio=None`` does the host width count: ``fc1`` then has
    ``feedforward_channels // num_branches`` outputs (Eq. 5's ``W^d in R^{C x C'/2}``), which
    for the usual ``mlp_ratio = 4`` hosts is the same ``2C`` as ``r = 2``.

    Ablation variants (Tables 2 and 3; DeiT-Ti numbers there) preset
    ``(expansion_ratio, num_branches, act_cfg, spatial)``; explicit arguments override them:

    ===============  ===  ===  ======  =======  =========================================
    variant          r    k    act     spatial  paper
    ===============  ===  ===  ======  =======  =========================================
    ``imlp``         2    2    AGeLU   yes      IMLP (Table 1; Table 2 "channel & spatial")
    ``channel``      2    2    AGeLU   no       AMLP, Eq. 5 (Table 2 "w/ channel")
    ``spatial``      4    1    GELU    yes      Table 2 "w/ spatial"
    ``gelu_concat``  2    2    GELU    yes      Table 3 "GeLU+concat"
    ``agelu``        4    1    AGeLU   no       Table 3 "AGeLU" (plain AGeLU MLP)
    ``mlp``          4    1    GELU    no       the original MLP (Eq. 1), for reference
    ===============  ===  ===  ======  =======  =========================================

    Input layouts (``forward(x, hw_shape=None, identity=None)``):

    * ``hw_shape=None``: ``x`` is an NCHW map (B, C, H, W); returns NCHW. (A (B, N, C)
      tensor without ``hw_shape`` is accepted only when ``spatial=False``.)
    * ``hw_shape=(H, W)``: ``x`` is tokens (B, N, C) with ``N = num_extra + H * W``; the
      leading ``num_extra`` tokens (cls/distillation tokens; ``num_extra_tokens`` if given,
      else ``N - H * W``) get no spatial mixing (see ``extra_tokens``), the grid tokens are
      row-major ``H x W``. Returns (B, N, C).

    Args:
        embed_dims (int): channels C of the input/output.
        feedforward_channels (int, optional): the host FFN's hidden width (see above).
        expansion_ratio (float, optional): r of ``fc1``. Default: variant preset (2).
        num_branches (int, optional): number of concatenated activations k (2 = Eq. 5).
        act_cfg (dict, optional): activation of each branch, ``dict(type='mmposmlp.AGeLU')``,
            ``dict(type='mmposmlp.ASoftPlus')`` or a plain one (``dict(type='GELU')``).
        act_inits (sequence, optional): per-branch ``(alpha, beta, gamma, theta)`` init of
            adaptive activations. Default: every branch starts as the base activation.
        spatial (bool, optional): use the DW block.
        kernel_size (int): n of the depthwise conv (Table 5). Default: 3.
        dw_bias (bool): bias of the depthwise conv. Default: True.
        dw_norm_cfg (dict): norm of the DW block. Default: ``dict(type='BN')``.
        dw_act_cfg (dict): activation of the DW block. Default: ``dict(type='GELU')``.
        dw_residual (bool): add the DW block's input to its output (not in the paper).
            Default: False.
        num_extra_tokens (int, optional): leading non-grid tokens; ``None`` infers
            ``N - H * W``.
        extra_tokens (str): how the DW block treats the extra tokens, which have no grid
            position. ``'isolated'`` (default): each is a lone pixel, so the conv reduces to its
            centre tap (no spatial mixing) and BN + GELU apply as on the grid; every DW
            parameter then also serves the cls token (with a cls-token head the last block's
            DW block would otherwise get no gradient, which DDP rejects). ``'skip'``: they
            bypass the DW block (identity).
        ffn_drop (float): dropout after the hidden activations and after ``fc2``.
        dropout_layer (dict, optional): applied to the output before the identity is added
            (e.g. ``dict(type='DropPath', drop_prob=0.1)``), as in mmcv's ``FFN``.
        add_identity (bool): return ``identity + out`` (mmcv ``FFN`` behaviour; hosts that
            add the residual themselves keep the default False).
        variant (str): one of :attr:`VARIANTS`. Default: ``'imlp'``.
    """

    VARIANTS = {
        'imlp': dict(expansion_ratio=2., num_branches=2, act_cfg=dict(type='AGeLU'), spatial=True),
        'channel': dict(expansion_ratio=2., num_branches=2, act_cfg=dict(type='AGeLU'), spatial=False),
        'spatial': dict(expansion_ratio=4., num_branches=1, act_cfg=dict(type='GELU'), spatial=True),
        'gelu_concat': dict(expansion_ratio=2., num_branches=2, act_cfg=dict(type='GELU'), spatial=True),
        'agelu': dict(expansion_ratio=4., num_branches=1, act_cfg=dict(type='AGeLU'), spatial=False),
        'mlp': dict(expansion_ratio=4., num_branches=1, act_cfg=dict(type='GELU'), spatial=False),
    }
    _UNSET = object()

    def __init__(self,
                 embed_dims: int,
                 feedforward_channels: Optional[int] = None,
                 expansion_ratio=_UNSET,
                 num_branches: Optional[int] = None,
                 act_cfg: Optional[dict] = None,
                 act_inits: Optional[Sequence[Sequence[float]]] = None,
                 spatial: Optional[bool] = None,
                 kernel_size: int = 3,
                 dw_bias: bool = True,
                 dw_norm_cfg: dict = dict(type='BN'),
                 dw_act_cfg: dict = dict(type='GELU'),
                 dw_residual: bool = False,
                 num_extra_tokens: Optional[int] = None,
                 extra_tokens: str = 'isolated',
                 ffn_drop: float = 0.,
                 dropout_layer: Optional[dict] = None,
                 add_identity: bool = False,
                 bias: bool = True,
                 variant: str = 'imlp',
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        if variant not in self.VARIANTS:
            raise ValueError(f'IMLP: unknown variant {variant!r}; valid: {sorted(self.VARIANTS)}')
        preset = self.VARIANTS[variant]
        if expansion_ratio is self._UNSET:
            expansion_ratio = preset['expansion_ratio']
        num_branches = preset['num_branches'] if num_branches is None else int(num_branches)
        act_cfg = dict(preset['act_cfg'] if act_cfg is None else act_cfg)
        spatial = preset['spatial'] if spatial is None else bool(spatial)
        _check_shape_options(embed_dims, num_branches, kernel_size, extra_tokens)
        self.embed_dims = int(embed_dims)
        self.feedforward_channels = feedforward_channels
        hidden = _hidden_width(self.embed_dims, feedforward_channels, expansion_ratio, num_branches)
        self.variant = variant
        self.expansion_ratio = expansion_ratio
        self.hidden_channels = hidden
        self.num_branches = num_branches
        self.out_hidden_channels = hidden * num_branches
        self.spatial = spatial
        self.kernel_size = int(kernel_size)
        self.dw_residual = dw_residual
        self.num_extra_tokens = num_extra_tokens
        self.extra_tokens = extra_tokens
        self.add_identity = add_identity

        self.fc1 = nn.Linear(self.embed_dims, hidden, bias=bias)
        self.acts = _build_branch_acts(act_cfg, act_inits, num_branches, hidden)
        if spatial:
            c = self.out_hidden_channels
            self.dw_conv = GroupedConv2d(c, c, self.kernel_size, padding=self.kernel_size // 2,
                                         groups=c, bias=dw_bias)
            self.dw_norm = build_norm_layer(dw_norm_cfg, c)[1]
            self.dw_act = _build_base_act(dw_act_cfg)
        self.drop = nn.Dropout(ffn_drop)
        self.fc2 = nn.Linear(self.out_hidden_channels, self.embed_dims, bias=bias)
        self.dropout_layer = build_dropout(dropout_layer) if dropout_layer else nn.Identity()

    def init_weights(self):
        super().init_weights()
        if self.init_cfg is None:
            self.reset_fc_parameters()

    def reset_fc_parameters(self):
        """fc1/fc2: truncated normal (std 0.02), zero bias (the ViT FFN convention)."""
        for fc in (self.fc1, self.fc2):
            trunc_normal_(fc.weight, std=.02)
            if fc.bias is not None:
                nn.init.zeros_(fc.bias)

    # -- pieces -------------------------------------------------------------------------
    def channel_enhance(self, t: torch.Tensor) -> torch.Tensor:
        """fc1 + concatenated activations on channels-last input (..., C) -> (..., k*h)."""
        h = self.fc1(t)
        if self.num_branches == 1:
            return self.acts[0](h)
        if self._stackable_acts():
            # the k adaptive activations of Eq. 5 as one broadcast over a branch axis: the same
            # element-wise operations as k separate calls and a concat, without the concat
            a, b, g, th = (torch.stack([getattr(act, n) for act in self.acts])
                           for n in ('alpha', 'beta', 'gamma', 'theta'))
            if torch.is_grad_enabled() or torch.jit.is_tracing():
                z = self.acts[0].act(h.unsqueeze(-2) * a + g)
                return (b * z + th).flatten(-2)
            z = self.acts[0].act(torch.addcmul(g, h.unsqueeze(-2), a))
            return torch.addcmul(th, z, b).flatten(-2)
        return torch.cat([act(h) for act in self.acts], dim=-1)

    def _stackable_acts(self) -> bool:
        first = self.acts[0]
        return (isinstance(first, AdaptiveActivation) and first.channel_dim in (-1, )
                and all(type(a) is type(first) and type(a.act) is type(first.act)
                        and repr(a.act) == repr(first.act) and a.channel_dim == first.channel_dim
                        for a in self.acts))

    def spatial_enhance(self, grid: torch.Tensor) -> torch.Tensor:
        """DW block on an NCHW map (B, k*h, H, W)."""
        out = self.dw_act(self.dw_norm(self.dw_conv(grid)))
        return grid + out if self.dw_residual else out

    def _tokens_spatial(self, h: torch.Tensor, hw_shape: Tuple[int, int]) -> torch.Tensor:
        B, N, Ch = h.shape
        H, W = hw_shape
        n_extra = self._num_extra(N, H, W)
        if not (torch.is_grad_enabled() and h.requires_grad) and not torch.jit.is_tracing():
            affine = self._affine_dw_norm()  # traced (FLOP counting, ONNX): the defining ops below
            if affine is not None:
                return self._tokens_spatial_inference(h, H, W, n_extra, *affine)
        grid = h[:, n_extra:].transpose(1, 2).reshape(B, Ch, H, W)
        if n_extra == 0 or self.extra_tokens == 'skip':
            grid = self.spatial_enhance(grid).flatten(2).transpose(1, 2)
            return grid if n_extra == 0 else torch.cat([h[:, :n_extra], grid], dim=1)
        # 'isolated': BN (shared statistics) + act as the grid
        z = torch.cat([self._lone_pixel_conv(h[:, :n_extra]).transpose(1, 2), self.dw_conv(grid).flatten(2)], dim=2)
        # as a (B, C, 1, L) map: torch 2.13's CPU BatchNorm backward returns wrong gradients
        # for (B, C, L, 1) inputs whose incoming gradient is transposed (see the gradcheck test)
        z = self.dw_act(self.dw_norm(z.unsqueeze(2))).squeeze(2).transpose(1, 2)
        return h + z if self.dw_residual else z

    def _lone_pixel_conv(self, extra: torch.Tensor) -> torch.Tensor:
        """The DW conv of extra tokens (B, n, C) as lone pixels (zero padding all around): its centre tap."""
        k = self.kernel_size // 2
        out = extra * self.dw_conv.weight[:, 0, k, k]
        return out if self.dw_conv.bias is None else out + self.dw_conv.bias

    def _affine_dw_norm(self):
        """The DW block's norm as a per-channel ``(scale, shift)`` when it is one (an eval-mode
        BatchNorm with running statistics), else None."""
        norm = self.dw_norm
        if (self.training or not isinstance(norm, nn.modules.batchnorm._BatchNorm)
                or not norm.track_running_stats or norm.running_mean is None):
            return None
        scale = torch.rsqrt(norm.running_var + norm.eps)
        if norm.weight is not None:
            scale = scale * norm.weight
        shift = -norm.running_mean * scale
        if norm.bias is not None:
            shift = shift + norm.bias
        return scale, shift

    def _tokens_spatial_inference(self, h: torch.Tensor, H: int, W: int, n_extra: int,
                                  scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        """:meth:`_tokens_spatial` without autograd and with the norm as a per-channel affine
        ``(scale, shift)`` (:meth:`_affine_dw_norm`): the tokens stay channels-last (the DW conv runs
        on a channels-last NCHW view, the norm is applied per token), so the transposes to and from
        NCHW are not made. Same result up to float rounding (tested in float64)."""
        B, N, Ch = h.shape
        grid = h[:, n_extra:].reshape(B, H, W, Ch).permute(0, 3, 1, 2)
        conv = self.dw_conv(grid.contiguous(memory_format=torch.channels_last))
        z = torch.empty_like(h)
        z[:, n_extra:] = conv.permute(0, 2, 3, 1).reshape(B, H * W, Ch)
        skip = n_extra and self.extra_tokens == 'skip'
        if skip:
            z[:, :n_extra] = 0
        elif n_extra:  # 'isolated'
            z[:, :n_extra] = self._lone_pixel_conv(h[:, :n_extra])
        z = self.dw_act(torch.addcmul(shift, z, scale))
        if self.dw_residual:
            z = h + z
        if skip:
            z[:, :n_extra] = h[:, :n_extra]
        return z

    def _num_extra(self, N: int, H: int, W: int) -> int:
        n_extra = N - H * W
        if n_extra < 0 or (self.num_extra_tokens is not None and n_extra != self.num_extra_tokens):
            expect = '' if self.num_extra_tokens is None else f' + {self.num_extra_tokens} extra'
            raise ValueError(f'IMLP: {N} tokens do not fit hw_shape=({H}, {W}){expect}: pass the token '
                             'grid of this layer as hw_shape (N = num_extra_tokens + H * W).')
        return n_extra

    def forward(self, x: torch.Tensor, hw_shape: Optional[Sequence[int]] = None,
                identity: Optional[torch.Tensor] = None) -> torch.Tensor:
        if hw_shape is None and x.dim() == 4:
            if x.shape[1] != self.embed_dims:
                raise ValueError(f'IMLP: expected an NCHW map with {self.embed_dims} channels, '
                                 f'got {tuple(x.shape)}')
            h = self.drop(self.channel_enhance(x.permute(0, 2, 3, 1)))
            if self.spatial:
                h = self.spatial_enhance(h.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
            out = self.drop(self.fc2(h)).permute(0, 3, 1, 2)
        elif x.dim() == 3:
            if x.shape[-1] != self.embed_dims:
                raise ValueError(f'IMLP: expected tokens (B, N, {self.embed_dims}), got {tuple(x.shape)}')
            if hw_shape is None and self.spatial:
                raise ValueError('IMLP: token input (B, N, C) needs hw_shape=(H, W) for the spatial '
                                 'enhancement; pass the token grid, or an NCHW map without hw_shape.')
            h = self.drop(self.channel_enhance(x))
            if self.spatial:
                h = self._tokens_spatial(h, tuple(hw_shape))
            out = self.drop(self.fc2(h))
        else:
            raise ValueError(f'IMLP: expected NCHW (B, C, H, W) with hw_shape=None or tokens (B, N, C) '
                             f'with hw_shape=(H, W); got shape {tuple(x.shape)} and hw_shape={hw_shape}')
        if not self.add_identity:
            return self.dropout_layer(out)
        if identity is None:
            identity = x
        return identity + self.dropout_layer(out)

    def extra_repr(self) -> str:
        return (f'variant={self.variant}, embed_dims={self.embed_dims}, hidden={self.hidden_channels}'
                f'x{self.num_branches}, spatial={self.spatial}, kernel_size={self.kernel_size}')


@MODELS.register_module()
class ActivationSum(BaseModule):
    """Table 4's straw man: replace the MLP by a sum of ``num_functions`` element-wise
    non-linear functions, ``y = f_1(x) + ... + f_K(x)`` (K = 4C in the paper).

    With an adaptive ``act_cfg`` (AGeLU) every function has its own per-channel
    ``alpha, beta, gamma, theta`` (Corollary 1: distinct scales and biases per element);
    with a plain one (GELU) the sum is ``K * GELU(x)``. Same call contract as :class:`IMLP`
    (``ffn_drop``: dropout on the sum; element-wise, so extra tokens such as the cls token need no
    special treatment and ``num_extra_tokens`` only records how many the host has).
    """

    def __init__(self, embed_dims: int, feedforward_channels: Optional[int] = None,
                 num_functions: Optional[int] = None, act_cfg: dict = dict(type='AGeLU'),
                 chunk: int = 64, add_identity: bool = False, dropout_layer: Optional[dict] = None,
                 ffn_drop: float = 0., num_extra_tokens: Optional[int] = None,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        self.embed_dims = int(embed_dims)
        self.num_extra_tokens = num_extra_tokens
        self.drop = nn.Dropout(ffn_drop)
        self.num_functions = int(num_functions or feedforward_channels or 4 * embed_dims)
        name = str(act_cfg.get('type', '')).replace('mmposmlp.', '')
        self.adaptive = name in ('AGeLU', 'ASoftPlus', 'AdaptiveActivation')
        base = {'AGeLU': dict(type='GELU'), 'ASoftPlus': dict(type='SoftPlus')}.get(
            name, act_cfg.get('act_cfg', dict(type='GELU')) if self.adaptive else act_cfg)
        self.act = _build_base_act(base)
        self.chunk = chunk
        self.add_identity = add_identity
        self.dropout_layer = build_dropout(dropout_layer) if dropout_layer else nn.Identity()
        if self.adaptive:
            K, C = self.num_functions, self.embed_dims
            self.alpha = nn.Parameter(torch.ones(K, C) + 0.1 * torch.randn(K, C))
            self.beta = nn.Parameter(torch.full((K, C), 1. / K))
            self.gamma = nn.Parameter(0.1 * torch.randn(K, C))
            self.theta = nn.Parameter(torch.zeros(K, C))

    def forward(self, x, hw_shape=None, identity=None):
        t = x.permute(0, 2, 3, 1) if (hw_shape is None and x.dim() == 4) else x
        if not self.adaptive:
            out = self.num_functions * self.act(t)
        else:
            out = 0
            for s in range(0, self.num_functions, self.chunk):
                sl = slice(s, s + self.chunk)
                z = self.act(t.unsqueeze(-2) * self.alpha[sl] + self.gamma[sl])
                out = out + (z * self.beta[sl] + self.theta[sl]).sum(-2)
        out = self.drop(out)
        if hw_shape is None and x.dim() == 4:
            out = out.permute(0, 3, 1, 2)
        out = self.dropout_layer(out)
        if self.add_identity:
            return (x if identity is None else identity) + out
        return out
