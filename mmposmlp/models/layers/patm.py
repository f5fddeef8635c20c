"""Phase-Aware Token Mixing (PATM) of Wave-MLP.

Tang et al., "An Image Patch is a Wave: Phase-Aware Vision MLP", CVPR 2022
(https://arxiv.org/abs/2111.12294), Sec. 3.2-3.3, Fig. 2.

Every token is a wave ``z_j = |z_j| * exp(i * theta_j)`` (Eq. 3). The amplitude ``|z_j|`` is a
channel-FC of the input and the phase ``theta_j`` is estimated from the input by a small module
(channel-FC or depthwise conv, Table 6). Unrolling the complex product with Euler's formula
(Eq. 4-5) gives real features ``|z| cos(theta)`` and ``|z| sin(theta)`` that a token-FC mixes
inside a local window (Table 7: window 3/5/7). Two such branches (official names ``h`` and ``w``)
and a plain channel-FC branch ``c`` are summed with a softmax re-weighting (Sec. 3.3).

Table 7's "All" (``window_size='all'``): "the token-FC connects all the tokens in a layer", with
parameters "corrected to the size of input image". We build it as the windowed token-FC whose window
covers the whole row (``h``) / column (``w``) at the size it is built for: a ``1 x (2W-1)`` /
``(2H-1) x 1`` kernel with ``W-1`` / ``H-1`` zero padding, so every output token reads every token of
its row / column, with one weight per channel and offset as in the windowed layers. On Wave-MLP-T* at
224² this gives 15.52M parameters and 2.40 GFLOPs (fvcore, which also counts the products with the
padding; 2.27G without them, computed) against the paper's 16M / 2.3G. The other reading, one weight
per channel and *pair* of tokens (Eq. 2 without weight sharing), would hold 18.82M (computed: C·L²
weights per branch and block). The layer refuses any other feature-map size (the paper: "infeasible
in dense prediction tasks").

The layout follows the official implementation bit for bit (checked against the official test
vectors, see ``tests/test_wavemlp.py``):

* the token-FC inputs are ``cat([x*cos(theta), x*sin(theta)], dim=1)`` (all cos channels, then
  all sin channels), and the grouped token-FC (groups=C) makes output channel ``g`` read concat
  channels ``2g`` and ``2g+1``;
* the official ``h`` branch uses a ``1 x K`` kernel (it mixes tokens along the *width* axis) and
  the ``w`` branch a ``K x 1`` kernel (along the height axis); we keep the official names;
* the re-weighting MLP outputs ``3C`` channels read as ``(C, 3)``: branch ``j`` of channel ``c``
  is output channel ``3c + j``; the softmax runs over the 3 branches;
* the phase branch is ``conv -> norm -> ReLU`` whose norm is BatchNorm in every official model,
  including the GroupNorm ones (S/M/B).
"""
from typing import Optional, Sequence, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmcv.cnn import build_activation_layer, build_norm_layer
from mmengine.model import BaseModule

from mmposmlp.registry import MODELS
from .grouped_conv import GroupedConv2d

#: 'fc' / 'depthwise': dynamic phase (Table 6 "Channel-FC" / "Depth-wise"); 'identity': theta = x
#: (Table 6 "Identity"); 'static': one learned phase per channel (Table 5 "Static phase");
#: 'none': theta = 0 (Tables 5/6 "No phase" / "Baseline")
PHASE_MODES = ('fc', 'depthwise', 'identity', 'static', 'none')


@MODELS.register_module()
class WaveMLPFFN(BaseModule):
    """Channel MLP of Wave-MLP: two 1x1 convs (channel-FCs, Eq. 1) with GELU, on NCHW maps.

    This is the official ``Mlp`` (keys ``fc1``/``fc2``). It follows the FFN contract of the
    Wave-MLP backbone's ``ffn_cfg``: ``(embed_dims, feedforward_channels, ...)`` and
    ``forward(x, hw_shape=None)`` with NCHW in and out.

    Args:
        embed_dims (int): input channels.
        feedforward_channels (int): hidden channels.
        out_channels (int, optional): output channels; defaults to ``embed_dims``.
        act_cfg (dict): activation. Defaults to GELU.
        drop (float): dropout after the activation and after ``fc2``.
    """

    def __init__(self,
                 embed_dims: int,
                 feedforward_channels: int,
                 out_channels: Optional[int] = None,
                 act_cfg: dict = dict(type='GELU'),
                 drop: float = 0.,
                 init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        out_channels = out_channels or embed_dims
        self.fc1 = nn.Conv2d(embed_dims, feedforward_channels, 1)
        self.act = build_activation_layer(act_cfg)
        self.fc2 = nn.Conv2d(feedforward_channels, out_channels, 1)
        self.drop = nn.Dropout(drop)

    def forward(self, x: torch.Tensor, hw_shape=None) -> torch.Tensor:
        if x.dim() != 4:
            raise ValueError(f'WaveMLPFFN expects an NCHW tensor, got shape {tuple(x.shape)}')
        x = self.drop(self.act(self.fc1(x)))
        return self.drop(self.fc2(x))


class PhaseEstimation(nn.Module):
    """Phase estimation module Theta (Sec. 3.2, Table 6): ``conv -> norm -> ReLU``.

    ``mode='fc'``: channel-FC (1x1 conv with bias), used by Wave-MLP-T/S/M/B.
    ``mode='depthwise'``: 3x3 depthwise conv without bias, used by Wave-MLP-T*.
    Ablations (Tables 5-6): ``'identity'`` (theta = x), ``'static'`` (a learned phase per
    channel, the same for every token and input), ``'none'`` (theta = 0: the cos branch carries the
    amplitude, the sin branch is zero).
    """

    def __init__(self, channels: int, mode: str = 'fc', norm_cfg: dict = dict(type='BN')):
        super().__init__()
        if mode not in PHASE_MODES:
            raise ValueError(f'unknown phase estimation mode {mode!r}; choose one of {PHASE_MODES}')
        self.mode = mode
        if mode == 'static':
            self.phase = nn.Parameter(torch.zeros(1, channels, 1, 1))
        if mode not in ('fc', 'depthwise'):
            return
        if mode == 'fc':
            self.conv = nn.Conv2d(channels, channels, 1, bias=True)
        else:
            self.conv = GroupedConv2d(channels, channels, 3, padding=1, groups=channels, bias=False)
        self.norm = build_norm_layer(norm_cfg, channels)[1]
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mode == 'identity':
            return x
        if self.mode == 'static':
            return self.phase.expand_as(x)
        if self.mode == 'none':
            return torch.zeros_like(x)
        return self.act(self.norm(self.conv(x)))


def check_window(window_size, token_grid) -> Optional[tuple]:
    """Check PATM's ``window_size`` / ``token_grid`` pair; returns ``token_grid`` as ``(H, W)`` for
    ``'all'``, else None. Each wrong combination is refused in one sentence."""
    if isinstance(window_size, str):
        if window_size != 'all':
            raise ValueError(f"window_size must be a positive odd int (paper Table 7: 3, 5, 7) or 'all', got "
                             f'{window_size!r}')
        if (not isinstance(token_grid, (tuple, list)) or len(token_grid) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in token_grid)):
            raise ValueError(f"window_size='all' needs token_grid=(H, W), the feature-map size the token-FC "
                             f'connects (Wave-MLP Table 7 "All" depends on the input size), got {token_grid!r}')
        return tuple(token_grid)
    if isinstance(window_size, bool) or not isinstance(window_size, int) or window_size < 1 or window_size % 2 == 0:
        raise ValueError(f"window_size must be a positive odd int (paper Table 7: 3, 5, 7) or 'all', got "
                         f'{window_size!r}')
    if token_grid is not None:
        raise ValueError(f"token_grid={token_grid!r} is only used with window_size='all' (a {window_size}-token "
                         'window works at any input size): remove it')
    return None


@MODELS.register_module()
class PATM(BaseModule):
    """Phase-aware token mixing (Wave-MLP Fig. 2 / Eq. 4-6), NCHW in and out.

    Args:
        embed_dims (int): channels C.
        phase_mode (str): phase estimation, ``'fc'`` (channel-FC) or ``'depthwise'`` (T*).
        window_size (int | str): token-FC window K (odd; the paper uses 7, Table 7 ablates 3/5/7), or
            ``'all'`` (Table 7 "All": the whole row / column of a ``token_grid`` feature map).
        token_grid (Sequence[int], optional): ``(H, W)`` of the feature maps, required by and only
            accepted with ``window_size='all'``.
        phase_norm_cfg (dict): norm inside the phase estimation (BatchNorm officially).
        proj_drop (float): dropout after the output projection.
        qkv_bias (bool): bias of the amplitude/channel FCs (False in every official model).

    ``self.last_phases`` holds ``(theta_h, theta_w)`` of the last forward when
    ``self.keep_phases`` is True (used by ``tools/analysis/wavemlp_phase_maps.py``).
    """

    def __init__(self,
                 embed_dims: int,
                 phase_mode: str = 'fc',
                 window_size: Union[int, str] = 7,
                 phase_norm_cfg: dict = dict(type='BN'),
                 proj_drop: float = 0.,
                 qkv_bias: bool = False,
                 token_grid: Optional[Sequence[int]] = None,
                 init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        self.token_grid = check_window(window_size, token_grid)
        C = embed_dims
        self.embed_dims = C
        self.window_size = window_size
        # amplitude (channel-FC) of the two wave branches and the plain channel branch
        self.amplitude_h = nn.Conv2d(C, C, 1, bias=qkv_bias)
        self.amplitude_w = nn.Conv2d(C, C, 1, bias=qkv_bias)
        self.channel_fc = nn.Conv2d(C, C, 1, bias=qkv_bias)
        # token-FC in a K-window, on the 2C [cos | sin] channels, output channel g <- (2g, 2g+1);
        # 'all': K = 2L - 1 with L - 1 padding reaches every token of a row / column of length L
        if self.token_grid is None:
            k_h = k_w = window_size
        else:
            k_w, k_h = 2 * self.token_grid[1] - 1, 2 * self.token_grid[0] - 1
        self.token_fc_h = GroupedConv2d(2 * C, C, (1, k_w), padding=(0, k_w // 2), groups=C, bias=False)
        self.token_fc_w = GroupedConv2d(2 * C, C, (k_h, 1), padding=(k_h // 2, 0), groups=C, bias=False)
        self.phase_h = PhaseEstimation(C, phase_mode, phase_norm_cfg)
        self.phase_w = PhaseEstimation(C, phase_mode, phase_norm_cfg)
        self.reweight = WaveMLPFFN(C, C // 4, out_channels=3 * C)
        self.proj = nn.Conv2d(C, C, 1, bias=True)
        self.proj_drop = nn.Dropout(proj_drop)
        self.keep_phases = False
        self.last_phases = None

    @staticmethod
    def wave(amplitude: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        """Eq. 5 unrolled: ``[|z| cos(theta) | |z| sin(theta)]`` along channels."""
        return torch.cat([amplitude * torch.cos(theta), amplitude * torch.sin(theta)], dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, C, H, W = x.shape
        if self.token_grid is not None and (H, W) != self.token_grid:
            raise ValueError(f"PATM with window_size='all' (Wave-MLP Table 7 \"All\") connects the tokens of "
                             f'{self.token_grid[0]}x{self.token_grid[1]} feature maps and got {H}x{W}: build the '
                             'model for this input size (WaveMLP img_size=...) or use window_size=3, 5 or 7.')
        theta_h = self.phase_h(x)
        theta_w = self.phase_w(x)
        if self.keep_phases:
            self.last_phases = (theta_h.detach(), theta_w.detach())
        h = self.token_fc_h(self.wave(self.amplitude_h(x), theta_h))
        w = self.token_fc_w(self.wave(self.amplitude_w(x), theta_w))
        c = self.channel_fc(x)
        # re-weighting: (B, 3C, 1, 1) read as (B, C, 3) -> softmax over the branches
        a = self.reweight(F.adaptive_avg_pool2d(h + w + c, 1))
        a = a.reshape(B, C, 3).permute(2, 0, 1).softmax(dim=0)[..., None, None]
        out = h * a[0] + w * a[1] + c * a[2]
        return self.proj_drop(self.proj(out))
