"""Lite Vision Transformer (LVT; Yang et al., "Lite Vision Transformer with Enhanced Self-Attention",
CVPR 2022, https://arxiv.org/abs/2112.10809), the "Portable ViT" host of the IMLP paper (Table 1:
LVT-R1..R4 and + IMLP*).

Four stages of channels-last tokens, each an overlapping patch embedding (7x7/4, then 3x3/2, conv +
LayerNorm) and transformer blocks ``x + attn(LN(x)); x + FFN(LN(x))``:

* stage 1: **Convolutional Self-Attention** (CSA): inside every 3x3 window (stride 2)
  the 9 outputs are a softmax-weighted sum of the 9 tap-wise projected inputs (weights predicted from
  the average-pooled window), folded back to the map;
* stages 2-4: **Recursive Atrous Self-Attention** (RASA): the query passes a depthwise
  3x3 conv shared over the atrous rates ``(1, 3, 5)`` (summed after SiLU); keys/values come from a
  spatial-reduction conv; the attention is applied ``R`` times, each time to the sum of its last input
  and output, ``z_1 = x``, ``y_r = SiLU(SA(z_r))``, ``z_{r+1} = z_r + y_r`` (``R = rasa_recursions``; IMLP
  Table 1's LVT-R1..R4);
* FFN: ``fc2(GELU(dwconv3x3(fc1(x))))`` (stages 2-4; stage 1 has no depthwise conv), or any FFN given
  by ``ffn_cfg`` (e.g. ``dict(type='mmposmlp.IMLP', kernel_size=5)``, IMLP Table 1's ``+ IMLP*``).

``mmposmlp.models.heads.LVTClassAttentionHead`` is the official classifier on top (two class-attention
blocks, a class token, LayerNorm, the class-token head plus ``0.5 x`` the max over the tokens' auxiliary head).
``converters.lvt.convert_official_lvt`` maps the official checkpoints (``lvt_cls``, ``with_cls_head=False``).
"""
import copy
import math
from typing import List, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from mmcv.cnn import build_activation_layer, build_norm_layer
from mmcv.cnn.bricks import DropPath
from mmengine.logging import print_log
from mmengine.model import BaseModule
from mmengine.model.weight_init import trunc_normal_

from mmposmlp.registry import MODELS
from .base import FrozenStagesMixin
from ..checkpoints import init_cfg_suspended, load_checkpoint_file, load_state_dict_checked, pretrained_init_cfg
from ..converters.lvt import checkpoint_filter_fn

LN = dict(type='LN', eps=1e-5)
SA_LAYERS = ('csa', 'rasa', 'sa')


def build_ffn(ffn_cfg: Optional[dict], embed_dims: int, mlp_ratio: float, depthwise: bool,
              drop: float = 0.) -> nn.Module:
    """The block FFN: :class:`LVTMlp` when ``ffn_cfg`` is None, else ``ffn_cfg`` (an mmposmlp FFN such as
    ``mmposmlp.IMLP``) given ``embed_dims`` and the host's hidden width ``feedforward_channels``."""
    hidden = int(embed_dims * mlp_ratio)
    if ffn_cfg is None:
        return LVTMlp(embed_dims, hidden, depthwise=depthwise, drop=drop)
    cfg = dict(ffn_cfg)
    t = cfg.pop('type', None)
    if not isinstance(t, str):
        raise ValueError(f"ffn_cfg needs a 'type' naming an mmposmlp FFN (e.g. 'mmposmlp.IMLP'), got {ffn_cfg!r}")
    name = t if t.startswith('mmposmlp.') else 'mmposmlp.' + t
    cls = MODELS.get(name)
    if cls is None:
        raise ValueError(f'ffn_cfg type {t!r} is not registered in mmposmlp; use e.g. mmposmlp.IMLP')
    cfg.setdefault('ffn_drop', drop)
    return cls(embed_dims=embed_dims, feedforward_channels=hidden, **cfg)


class LVTMlp(nn.Module):
    """LVT's FFN on channels-last maps: ``fc2(drop(GELU(dw(fc1(x)))))``; ``dw`` is a 3x3 depthwise conv
    (stages 2-4) or absent (stage 1)."""

    def __init__(self, embed_dims: int, hidden: int, depthwise: bool, drop: float = 0.):
        super().__init__()
        self.fc1 = nn.Linear(embed_dims, hidden)
        self.dwconv = nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden) if depthwise else None
        self.act = nn.GELU()
        self.drop = nn.Dropout(drop)
        self.fc2 = nn.Linear(hidden, embed_dims)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.fc1(x)
        if self.dwconv is not None:
            x = self.dwconv(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
        return self.drop(self.fc2(self.drop(self.act(x))))


class AtrousQueryConv(nn.Module):
    """RASA's multi-scale query: ``sum_d act(DWConv3x3_d(q))`` with one depthwise kernel shared
    by every atrous rate ``d`` (padding ``d``)."""

    def __init__(self, channels: int, rates: Sequence[int], bias: bool, act_cfg: dict):
        super().__init__()
        self.rates = tuple(int(r) for r in rates)
        self.weight = nn.Parameter(torch.empty(channels, 1, 3, 3))
        self.bias = nn.Parameter(torch.zeros(channels)) if bias else None
        self.act = build_activation_layer(act_cfg)
        nn.init.kaiming_uniform_(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = 0
        for d in self.rates:
            out = out + self.act(F.conv2d(x, self.weight, self.bias, padding=d, dilation=d,
                                          groups=x.shape[1]))
        return out

    def extra_repr(self) -> str:
        return f'{self.weight.shape[0]}, rates={self.rates}'


class RecursiveAtrousSelfAttention(nn.Module):
    """RASA on channels-last maps (B, H, W, C); with ``atrous_rates=None`` and
    ``recursions=1`` it is plain spatial-reduction self-attention (``'sa'``).

    One attention step: ``q = atrous(W_q x)``, ``k, v = W_kv LN(SR(x))`` (``SR`` a ``sr_ratio`` strided
    conv, absent at 1), ``proj(softmax(q k^T / sqrt(d)) v)``. With ``R > 1`` recursions each step sees the
    sum of the previous step's input and output: ``z_1 = x``, ``y_r = SiLU(SA(z_r))``, ``z_{r+1} = z_r + y_r``,
    output ``y_R`` (``R = 1``: ``SA(x)``, no SiLU).
    """

    def __init__(self, embed_dims: int, num_heads: int, sr_ratio: int = 1, recursions: int = 1,
                 atrous_rates: Optional[Sequence[int]] = None, atrous_act_cfg: dict = dict(type='SiLU'),
                 qkv_bias: bool = False, qk_scale: Optional[float] = None, attn_drop: float = 0.,
                 norm_cfg: dict = LN):
        super().__init__()
        if embed_dims % num_heads:
            raise ValueError(f'LVT attention: embed_dims {embed_dims} is not divisible by num_heads {num_heads}')
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.scale = qk_scale or (embed_dims // num_heads) ** -0.5
        self.recursions = recursions
        self.q = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.kv = nn.Linear(embed_dims, 2 * embed_dims, bias=qkv_bias)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.sr_ratio = sr_ratio
        if sr_ratio > 1:
            self.sr = nn.Conv2d(embed_dims, embed_dims, sr_ratio, stride=sr_ratio)
            self.sr_norm = build_norm_layer(norm_cfg, embed_dims)[1]
        self.atrous = (AtrousQueryConv(embed_dims, atrous_rates, qkv_bias, atrous_act_cfg)
                       if atrous_rates is not None else None)

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        """One self-attention step on (B, H, W, C)."""
        B, H, W, C = x.shape
        h, d = self.num_heads, C // self.num_heads
        q = self.q(x)
        if self.atrous is not None:
            q = self.atrous(q.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
        q = q.reshape(B, H * W, h, d).transpose(1, 2)
        if self.sr_ratio > 1:
            x = self.sr_norm(self.sr(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1))
        k, v = self.kv(x).reshape(B, -1, 2, h, d).permute(2, 0, 3, 1, 4)
        attn = self.attn_drop(((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1))
        return self.proj((attn @ v).transpose(1, 2).reshape(B, H, W, C))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.recursions == 1:
            return self.attend(x)
        prev, x = x, F.silu(self.attend(x))
        for _ in range(self.recursions - 1):
            prev, x = x + prev, None
            x = F.silu(self.attend(prev))
        return x


class ConvolutionalSelfAttention(nn.Module):
    """CSA on channels-last maps (B, H, W, C).

    For every ``k x k`` window at stride ``s`` (``k = 3``, ``s = 2``, padding 1): the ``k^2`` taps are
    projected tap-wise (``tap_proj[t]``, a C x C matrix per tap), mixed by a per-head ``k^2 x k^2``
    softmax map predicted by a linear layer from the ``s x s`` average-pooled input, and folded back
    (overlapping windows add up); then an output projection.
    """

    def __init__(self, embed_dims: int, num_heads: int, kernel_size: int = 3, stride: int = 2,
                 qk_scale: Optional[float] = None, attn_drop: float = 0.):
        super().__init__()
        if embed_dims % num_heads:
            raise ValueError(f'LVT CSA: embed_dims {embed_dims} is not divisible by num_heads {num_heads}')
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = kernel_size // 2
        self.scale = qk_scale or (embed_dims // num_heads) ** -0.5
        k2 = kernel_size * kernel_size
        self.attn = nn.Linear(embed_dims, k2 * k2 * num_heads)
        self.attn_drop = nn.Dropout(attn_drop)
        self.tap_proj = nn.Parameter(torch.empty(k2, embed_dims, embed_dims))
        self.proj = nn.Linear(embed_dims, embed_dims)
        nn.init.normal_(self.tap_proj, 0, math.sqrt(2.0 / embed_dims))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, H, W, C = x.shape
        k, s, nh = self.kernel_size, self.stride, self.num_heads
        k2 = k * k
        xc = x.permute(0, 3, 1, 2)
        pooled = F.avg_pool2d(xc, s, s, ceil_mode=True)
        h, w = pooled.shape[2:]
        attn = self.attn(pooled.permute(0, 2, 3, 1)).reshape(B, h * w, nh, k2, k2).transpose(1, 2)
        attn = self.attn_drop((attn * self.scale).softmax(dim=-1))  # (B, nh, L, k2 out, k2 in)
        taps = F.unfold(xc, k, padding=self.padding, stride=s).reshape(B, C, k2, h * w)
        v = torch.einsum('bctl,toc->blto', taps, self.tap_proj)  # (B, L, k2, C)
        v = v.reshape(B, h * w, k2, nh, C // nh).permute(0, 3, 1, 2, 4)  # (B, nh, L, k2, d)
        out = (attn @ v).permute(0, 1, 4, 3, 2).reshape(B, C * k2, h * w)
        out = F.fold(out, (H, W), k, padding=self.padding, stride=s)
        return self.proj(out.permute(0, 2, 3, 1))


class LVTBlock(BaseModule):
    """``x + DropPath(attn(LN(x)))``, ``x + DropPath(FFN(LN(x)))`` on channels-last maps."""

    def __init__(self, embed_dims: int, num_heads: int, mlp_ratio: float, sa_layer: str, sr_ratio: int,
                 depthwise_mlp: bool, recursions: int, atrous_rates, atrous_act_cfg: dict, qkv_bias: bool,
                 qk_scale, attn_drop: float, drop_path: float, drop: float, norm_cfg: dict,
                 ffn_cfg: Optional[dict], with_cp: bool = False):
        super().__init__()
        self.with_cp = with_cp
        self.norm1 = build_norm_layer(norm_cfg, embed_dims)[1]
        if sa_layer == 'csa':
            self.attn = ConvolutionalSelfAttention(embed_dims, num_heads, qk_scale=qk_scale, attn_drop=attn_drop)
        else:
            rasa = sa_layer == 'rasa'
            self.attn = RecursiveAtrousSelfAttention(
                embed_dims, num_heads, sr_ratio=sr_ratio, recursions=recursions if rasa else 1,
                atrous_rates=atrous_rates if rasa else None, atrous_act_cfg=atrous_act_cfg, qkv_bias=qkv_bias,
                qk_scale=qk_scale, attn_drop=attn_drop, norm_cfg=norm_cfg)
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.norm2 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.ffn_is_lvt = ffn_cfg is None
        self.mlp = build_ffn(ffn_cfg, embed_dims, mlp_ratio, depthwise_mlp, drop)

    def _ffn(self, x: torch.Tensor) -> torch.Tensor:
        if self.ffn_is_lvt:
            return self.mlp(x)
        B, H, W, C = x.shape
        return self.mlp(x.reshape(B, H * W, C), hw_shape=(H, W)).reshape(B, H, W, C)

    def _inner_forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop_path(self.attn(self.norm1(x)))
        return x + self.drop_path(self._ffn(self.norm2(x)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.with_cp and x.requires_grad:
            return cp.checkpoint(self._inner_forward, x, use_reentrant=False)
        return self._inner_forward(x)


class OverlapPatchEmbed(nn.Module):
    """``LN(conv_{k,s}(x))`` with padding ``k // 2``: NCHW input (stage 1) or channels-last; channels-last out."""

    def __init__(self, in_channels: int, embed_dims: int, kernel_size: int, stride: int, norm_cfg: dict):
        super().__init__()
        self.proj = nn.Conv2d(in_channels, embed_dims, kernel_size, stride, padding=kernel_size // 2)
        self.norm = build_norm_layer(norm_cfg, embed_dims)[1]

    def forward(self, x: torch.Tensor, channels_last: bool) -> torch.Tensor:
        if channels_last:
            x = x.permute(0, 3, 1, 2)
        return self.norm(self.proj(x).permute(0, 2, 3, 1))


def _check_options(rasa_recursions, atrous_rates, ffn_cfg, mix_token, mix_token_beta) -> None:
    """Refuse, in one sentence each, option values :class:`LVT` cannot build."""
    if isinstance(rasa_recursions, bool) or not isinstance(rasa_recursions, int) or rasa_recursions < 1:
        raise ValueError(f'LVT: rasa_recursions is the number R of RASA recursions, an int >= 1 '
                         f'(IMLP Table 1: LVT-R1..R4), got {rasa_recursions!r}')
    if atrous_rates is not None:
        if (isinstance(atrous_rates, (int, str)) or len(atrous_rates) == 0
                or any(isinstance(r, bool) or not isinstance(r, int) or r < 1 for r in atrous_rates)):
            raise ValueError(f'LVT: atrous_rates must be a non-empty sequence of positive ints such as '
                             f'(1, 3, 5), or None for a plain query, got {atrous_rates!r}')
    if ffn_cfg is not None and not isinstance(ffn_cfg, dict):
        raise ValueError(f"LVT: ffn_cfg must be None (LVT's FFN) or a dict such as "
                         f"dict(type='mmposmlp.IMLP', kernel_size=5), got {ffn_cfg!r}")
    if not isinstance(mix_token, bool):
        raise ValueError(f'LVT: mix_token must be True or False, got {mix_token!r}')
    if not mix_token_beta > 0:
        raise ValueError(f'LVT: mix_token_beta must be positive (Beta(beta, beta)), got {mix_token_beta!r}')


class TokenMixedFeatures(tuple):
    """The backbone outputs of a MixToken training step, carrying the mixed box ``mix_box = (r1, c1, r2, c2)``
    (rows ``r1:r2``, columns ``c1:c2`` of the last stage's ``mix_grid``) for the head's loss."""

    def __new__(cls, outs, mix_box: Tuple[int, int, int, int], mix_grid: Tuple[int, int]):
        obj = super().__new__(cls, outs)
        obj.mix_box = tuple(int(v) for v in mix_box)
        obj.mix_grid = tuple(int(v) for v in mix_grid)
        return obj


class LVTStage(nn.Module):

    def __init__(self, patch_embed: OverlapPatchEmbed, blocks: List[LVTBlock]):
        super().__init__()
        self.patch_embed = patch_embed
        self.blocks = nn.Sequential(*blocks)

    def forward(self, x: torch.Tensor, channels_last: bool) -> torch.Tensor:
        return self.blocks(self.patch_embed(x, channels_last))


@MODELS.register_module()
class LVT(FrozenStagesMixin, BaseModule):
    """Lite Vision Transformer (`LVT <https://arxiv.org/abs/2112.10809>`_, CVPR 2022).

    =====  ========  ==============  =========  ==========  =========  ==============  ======================
    arch   depths    embed_dims      num_heads  mlp_ratios  sr_ratios  sa_layers       reported*
    =====  ========  ==============  =========  ==========  =========  ==============  ======================
    lvt    2/2/2/2   64/64/160/256   2/2/5/8    4/8/4/4     8/4/2/1    csa, rasa x 3   3.4M backbone, 0.9G
    =====  ========  ==============  =========  ==========  =========  ==============  ======================

    (* the official README, R = 2; ours: 3,429,092 backbone parameters. With
    :class:`~mmposmlp.models.heads.LVTClassAttentionHead`, the released ``lvt_cls``: 5,521,844. IMLP Table 1
    lists LVT-R1..R4 as 5.52M, 0.76/0.84/0.92/1.00G.)

    Args:
        arch (str | dict): ``'lvt'`` or a dict with ``depths``, ``embed_dims``, ``num_heads``,
            ``mlp_ratios``, ``depthwise_mlp`` (per stage: FFN with a 3x3 depthwise conv), ``sr_ratios``,
            ``sa_layers`` (per stage: ``'csa'``, ``'rasa'`` or ``'sa'``).
        in_channels (int): input channels. Defaults to 3.
        rasa_recursions (int): R, the number of RASA recursions (>= 1). Defaults to 2 (the official
            ``configs/lvt_imagenet.py``).
        atrous_rates (Sequence[int] | None): RASA's query dilations; None: a plain linear query.
            Defaults to (1, 3, 5).
        atrous_act_cfg (dict): activation after each atrous conv. Defaults to SiLU.
        qkv_bias (bool): biases of q / kv (and of the atrous conv). Defaults to False.
        qk_scale (float, optional): attention scale; None: ``head_dim ** -0.5``.
        drop_rate (float): dropout inside the FFN. Defaults to 0.
        attn_drop_rate (float): attention-map dropout. Defaults to 0.
        drop_path_rate (float): stochastic depth, ``rate * i / (num_blocks - 1)`` for block ``i``.
        ffn_cfg (dict, optional): the FFN of every block; None: LVT's own. E.g.
            ``dict(type='mmposmlp.IMLP', kernel_size=5)`` (IMLP Table 1 ``+ IMLP*``).
        norm_cfg (dict): every LayerNorm. Defaults to LN (eps 1e-5, ``nn.LayerNorm``).
        out_indices (int | Sequence[int]): stages whose outputs are returned (B, C, H, W).
            Defaults to (3,).
        out_norm (bool): a LayerNorm ``norm{i}`` after every stage, whose normed map is both returned and
            passed on to the next stage (the official dense-prediction ``downstream_norms``, built with
            ``with_cls_head=False``). Defaults to False (the classifier's norm lives in the head).
        mix_token (bool): MixToken while training (Jiang et al., token labelling; the official LVT
            training forward): after the stage-1 patch embedding a box of the last stage's grid (area
            ``1 - lam``, ``lam ~ Beta(mix_token_beta, mix_token_beta)``, scaled up to stage 1) takes the tokens
            of the batch flipped; the outputs then carry the box (:class:`TokenMixedFeatures`) for
            :class:`~mmposmlp.models.heads.LVTClassAttentionHead`'s loss. Defaults to False.
        mix_token_beta (float): the Beta distribution's parameter. Defaults to 1.0 (official).
        frozen_stages (int): -1 freezes nothing, ``k`` stages ``0..k-1`` (with their output norms).
        norm_eval (bool): keep BatchNorms (IMLP's DW block) in eval mode while training.
        with_cp (bool): gradient checkpointing per block.
        init_cfg (dict, optional): ``dict(type='Pretrained', checkpoint=...)`` loads our weights or an
            official LVT checkpoint (converted by ``converters.lvt.convert_official_lvt``). With ``ffn_cfg`` set, a
            checkpoint of the plain host (LVT's own FFNs) initialises everything but the FFNs: its FFN keys
            are left unused and the new FFNs keep their initialisation, both logged and listed in
            ``ffn_load_report``; any other missing or unused key still raises.
    """

    arch_zoo = {
        'lvt': dict(depths=[2, 2, 2, 2], embed_dims=[64, 64, 160, 256], num_heads=[2, 2, 5, 8],
                    mlp_ratios=[4, 8, 4, 4], depthwise_mlp=[False, True, True, True], sr_ratios=[8, 4, 2, 1],
                    sa_layers=['csa', 'rasa', 'rasa', 'rasa']),
    }
    ARCH_KEYS = ('depths', 'embed_dims', 'num_heads', 'mlp_ratios', 'depthwise_mlp', 'sr_ratios', 'sa_layers')

    def __init__(self,
                 arch: Union[str, dict] = 'lvt',
                 in_channels: int = 3,
                 rasa_recursions: int = 2,
                 atrous_rates: Optional[Sequence[int]] = (1, 3, 5),
                 atrous_act_cfg: dict = dict(type='SiLU'),
                 qkv_bias: bool = False,
                 qk_scale: Optional[float] = None,
                 drop_rate: float = 0.,
                 attn_drop_rate: float = 0.,
                 drop_path_rate: float = 0.,
                 ffn_cfg: Optional[dict] = None,
                 norm_cfg: dict = LN,
                 out_indices: Union[int, Sequence[int]] = (3, ),
                 out_norm: bool = False,
                 mix_token: bool = False,
                 mix_token_beta: float = 1.0,
                 frozen_stages: int = -1,
                 norm_eval: bool = False,
                 with_cp: bool = False,
                 init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        pretrained_init_cfg(self)
        arch = self.arch_settings = self._parse_arch(arch)
        _check_options(rasa_recursions, atrous_rates, ffn_cfg, mix_token, mix_token_beta)
        self.embed_dims = arch['embed_dims']
        self.num_stages = len(self.embed_dims)
        self.rasa_recursions = rasa_recursions
        self.atrous_rates = None if atrous_rates is None else tuple(atrous_rates)
        self._set_out_indices(out_indices, self.num_stages)
        self._set_frozen_stages(frozen_stages, self.num_stages, norm_eval)
        self.out_norm = out_norm
        self.mix_token = mix_token
        self.ffn_cfg = copy.deepcopy(ffn_cfg)
        self.ffn_load_report = None
        self.mix_token_beta = float(mix_token_beta)
        block_cfg = dict(recursions=rasa_recursions, atrous_rates=self.atrous_rates, atrous_act_cfg=atrous_act_cfg,
                         qkv_bias=qkv_bias, qk_scale=qk_scale, attn_drop=attn_drop_rate, drop=drop_rate,
                         norm_cfg=norm_cfg, ffn_cfg=ffn_cfg, with_cp=with_cp)
        self.stages = nn.ModuleList(self._make_stages(in_channels, drop_path_rate, block_cfg))
        if out_norm:
            for i in range(self.num_stages):
                self.add_module(f'norm{i}', build_norm_layer(norm_cfg, self.embed_dims[i])[1])
        self._set_feature_info(self.embed_dims, [2**(i + 2) for i in range(self.num_stages)])
        self._freeze_stages()

    def _make_stages(self, in_channels: int, drop_path_rate: float, block_cfg: dict) -> List[LVTStage]:
        """Per stage: the overlapping patch embedding (7x7/4, then 3x3/2) and the blocks."""
        arch = self.arch_settings
        total = sum(arch['depths'])
        stages, idx = [], 0
        for i in range(self.num_stages):
            first = i == 0
            embed = OverlapPatchEmbed(in_channels if first else self.embed_dims[i - 1], self.embed_dims[i],
                                      7 if first else 3, 4 if first else 2, block_cfg['norm_cfg'])
            blocks = []
            for _ in range(arch['depths'][i]):
                blocks.append(LVTBlock(
                    self.embed_dims[i], arch['num_heads'][i], arch['mlp_ratios'][i], arch['sa_layers'][i],
                    arch['sr_ratios'][i], arch['depthwise_mlp'][i],
                    drop_path=drop_path_rate * idx / (total - 1) if total > 1 else 0., **block_cfg))
                idx += 1
            stages.append(LVTStage(embed, blocks))
        return stages

    def _parse_arch(self, arch) -> dict:
        if isinstance(arch, str):
            if arch.lower() not in self.arch_zoo:
                raise ValueError(f'LVT: unknown arch {arch!r}; choose one of {sorted(self.arch_zoo)} or pass a '
                                 f'dict with the keys {list(self.ARCH_KEYS)}')
            return copy.deepcopy(self.arch_zoo[arch.lower()])
        if not isinstance(arch, dict):
            raise TypeError(f'LVT: arch must be a str or dict, got {type(arch).__name__}')
        missing = [k for k in self.ARCH_KEYS if k not in arch]
        unknown = [k for k in arch if k not in self.ARCH_KEYS]
        if missing or unknown:
            raise ValueError(f'LVT: a custom arch dict needs exactly the keys {list(self.ARCH_KEYS)}; missing '
                             f'{missing}, unknown {unknown}')
        arch = {k: list(v) for k, v in arch.items()}
        n = len(arch['depths'])
        if any(len(v) != n for v in arch.values()):
            raise ValueError(f'LVT: every arch entry needs one value per stage ({n}), got '
                             f'{ {k: len(v) for k, v in arch.items()} }')
        bad = [s for s in arch['sa_layers'] if s not in SA_LAYERS]
        if bad:
            raise ValueError(f'LVT: sa_layers {bad[0]!r} is not one of {list(SA_LAYERS)}')
        return arch

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        outs, mix = {}, None
        for i, stage in enumerate(self.stages):
            if i == 0 and self.mix_token and self.training:
                x = stage.patch_embed(x, channels_last=False)
                x, mix = self._mix_tokens(x)
                x = stage.blocks(x)
            else:
                x = stage(x, channels_last=i > 0)
            if self.out_norm:
                x = getattr(self, f'norm{i}')(x)
            if i in self.out_indices:
                outs[i] = x.permute(0, 3, 1, 2).contiguous()
        outs = self._ordered_outputs(outs)
        if mix is not None:
            box, grid = mix
            if tuple(x.shape[1:3]) != grid:
                raise ValueError(f'LVT MixToken: the last stage has a {x.shape[1]}x{x.shape[2]} grid but stage 1 '
                                 f'maps to {grid[0]}x{grid[1]}; train at input sizes divisible by '
                                 f'{4 * self.mix_token_scale} or set mix_token=False')
            return TokenMixedFeatures(outs, box, grid)
        return tuple(outs)

    @property
    def mix_token_scale(self) -> int:
        """Stage-1 tokens per last-stage token along each side (8 for four stages)."""
        return 2 ** (self.num_stages - 1)

    def _draw_mix_box(self, rows: int, cols: int) -> Tuple[int, int, int, int]:
        """A box ``(r1, c1, r2, c2)`` of a ``rows x cols`` grid as the official ``rand_bbox``: sides
        ``int(side * sqrt(1 - lam))`` around a uniformly drawn centre, clipped (torch's RNG)."""
        lam = torch.distributions.Beta(self.mix_token_beta, self.mix_token_beta).sample().item()
        cut = math.sqrt(1. - lam)
        cut_r, cut_c = int(rows * cut), int(cols * cut)
        cr, cc = int(torch.randint(rows, ())), int(torch.randint(cols, ()))
        return (min(max(cr - cut_r // 2, 0), rows), min(max(cc - cut_c // 2, 0), cols),
                min(max(cr + cut_r // 2, 0), rows), min(max(cc + cut_c // 2, 0), cols))

    def _mix_tokens(self, x: torch.Tensor):
        """MixToken on the stage-1 tokens (B, H, W, C): the box takes the batch-flipped tokens."""
        s = self.mix_token_scale
        grid = (x.shape[1] // s, x.shape[2] // s)
        r1, c1, r2, c2 = box = self._draw_mix_box(*grid)
        mixed = x.clone()
        mixed[:, s * r1:s * r2, s * c1:s * c2] = x.flip(0)[:, s * r1:s * r2, s * c1:s * c2]
        return mixed, (box, grid)

    def _frozen_modules(self):
        modules = list(self.stages[:self.frozen_stages])
        if self.out_norm:
            modules += [getattr(self, f'norm{i}') for i in range(self.frozen_stages)]
        return modules

    def init_weights(self):
        pretrained = pretrained_init_cfg(self)
        if pretrained is not None:
            if self.ffn_cfg is not None:  # the random init first: new FFNs keep it where the file has none
                with init_cfg_suspended(self):
                    super().init_weights()
                    init_lvt_weights(self)
            state = load_checkpoint_file(pretrained['checkpoint'], prefer_ema=pretrained.get('prefer_ema', True),
                                         map_location=pretrained.get('map_location', 'cpu'))
            state = checkpoint_filter_fn(state, pretrained.get('prefix'))
            missing, unexpected = ['norm?.*'] if self.out_norm else [], list(pretrained.get('ignore_keys', ()))
            if self.ffn_cfg is not None:
                own = {k: v.shape for k, v in self.state_dict().items() if '.mlp.' in k}
                theirs = {k: v.shape for k, v in state.items() if '.mlp.' in k}
                if theirs and theirs != own:  # the FFNs of another kind (the plain host's): all of them new
                    state = {k: v for k, v in state.items() if k not in theirs}
                    missing += list(own)
                    self.ffn_load_report = dict(dropped_host_ffn_keys=sorted(theirs), new_ffn_keys=sorted(own))
                    print_log(f'LVT: {pretrained["checkpoint"]} holds other FFNs than ffn_cfg builds: their '
                              f'{len(theirs)} keys are left unused and the {len(own)} keys of the new FFNs keep '
                              'their initialisation', logger='current')
            load_state_dict_checked(self, state, allowed_missing=missing, allowed_unexpected=tuple(unexpected),
                                    source=pretrained['checkpoint'])
            self._is_init = True
            return
        super().init_weights()
        if self.init_cfg is None:
            init_lvt_weights(self)


def init_lvt_weights(module: nn.Module) -> None:
    """The official initialisation: Linear trunc-normal(0.02) / zero bias, LayerNorm 1 / 0, the patch
    embedding and spatial-reduction convs N(0, 2 / fan_out) with zero bias; LVT's FFN convs and the
    atrous / tap-wise weights keep their constructors' initialisation."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            trunc_normal_(m.weight, std=.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, (OverlapPatchEmbed, RecursiveAtrousSelfAttention)):
            for conv in (getattr(m, 'proj', None), getattr(m, 'sr', None)):
                if isinstance(conv, nn.Conv2d):
                    fan_out = conv.kernel_size[0] * conv.kernel_size[1] * conv.out_channels // conv.groups
                    nn.init.normal_(conv.weight, 0, math.sqrt(2.0 / fan_out))
                    nn.init.zeros_(conv.bias)
