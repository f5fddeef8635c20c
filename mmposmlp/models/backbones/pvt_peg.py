"""PVT v1 + PEG (= the official Twins-PCPVT / ``CPVTV2``), CPVT paper Sec. 4.6 and Table 13.

PVT v1 (Wang et al., ICCV 2021, https://arxiv.org/abs/2102.12122) with its absolute position
embeddings removed and a PEG (:class:`mmposmlp.PEG`) after the first block of every stage
("position 0 of each stage", CPVT https://arxiv.org/abs/2102.10882 Sec. 4.6), classified with
GAP. Released official weights: Twins ``pcpvt_{small,base,large}_v0``
(https://github.com/Meituan-AutoML/Twins), convert them with
``tools/model_converters/pcpvt2mmposmlp.py``.

The other rows of CPVT Table 13 are options of the same backbone: PVT v1's per-stage learnable
position tables (``pos_embed_type='learnable'``), its class token on the last stage
(``with_cls_token``, ``out_type='cls_token'``) and no PEG (``peg_after_block=None``). With all
three it is PVT v1 itself (official ``PyramidVisionTransformer``, github.com/whai362/PVT, and
mmdet's ``PyramidVisionTransformer``: both checkpoint layouts convert).
"""
import functools
import math
from typing import List, Optional, Sequence

import torch
import torch.nn as nn
import torch.utils.checkpoint as cp
from mmcv.cnn import build_activation_layer, build_norm_layer
from mmcv.cnn.bricks import DropPath
from mmengine.model import BaseModule, ModuleList
from mmengine.model.weight_init import constant_init, normal_init, trunc_normal_, trunc_normal_init
from torch.nn.modules.batchnorm import _BatchNorm

from mmposmlp.models.checkpoints import load_pretrained_init_cfg, pretrained_init_cfg
from mmposmlp.models.converters.pvt_peg import checkpoint_filter_fn
from mmposmlp.models.layers.peg import PEG
from mmposmlp.models.layers.position_encoding import AbsolutePositionEmbedding
from mmposmlp.registry import MODELS
from .base import FrozenStagesMixin


POS_EMBED_TYPES = (None, 'learnable')
OUT_TYPES = ('featmap', 'cls_token')


@MODELS.register_module()
class PVTMlp(BaseModule):
    """Token MLP ``fc2(drop(act(fc1(x))))`` of PVT/ViT (the default ``ffn_cfg``).

    Contract shared with drop-in channel MLPs such as ``mmposmlp.IMLP``:
    ``__init__(embed_dims, feedforward_channels, ffn_drop, **cfg)`` and
    ``forward(x, hw_shape) -> x`` on tokens ``(B, N, C)``, ``N = H * W`` (in :class:`CPVT` with
    a cls token, ``N = 1 + H * W`` with the extra token first).
    """

    def __init__(self, embed_dims: int, feedforward_channels: int, ffn_drop: float = 0.,
                 act_cfg: dict = dict(type='GELU'), init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        self.fc1 = nn.Linear(embed_dims, feedforward_channels)
        self.act = build_activation_layer(act_cfg)
        self.fc2 = nn.Linear(feedforward_channels, embed_dims)
        self.drop = nn.Dropout(ffn_drop)

    def forward(self, x, hw_shape=None):
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))


def build_ffn(ffn_cfg: Optional[dict], embed_dims: int, feedforward_channels: int,
              ffn_drop: float) -> nn.Module:
    """Build the channel MLP from ``ffn_cfg`` (default :class:`PVTMlp`), passing
    ``embed_dims``, ``feedforward_channels`` and ``ffn_drop``."""
    cfg = dict(type=PVTMlp) if ffn_cfg is None else dict(ffn_cfg)
    cfg.setdefault('embed_dims', embed_dims)
    cfg.setdefault('feedforward_channels', feedforward_channels)
    cfg.setdefault('ffn_drop', ffn_drop)
    if isinstance(cfg['type'], type):
        typ = cfg.pop('type')
        return typ(**cfg)
    return MODELS.build(cfg)


class SpatialReductionAttention(BaseModule):
    """PVT v1 SRA (Eq. 2-3 of the PVT paper): keys/values from an ``sr x sr`` strided conv
    (floor for non-divisible sizes) + LayerNorm (official eps 1e-5)."""

    def __init__(self, embed_dims, num_heads, qkv_bias=True, qk_scale=None, attn_drop=0.,
                 proj_drop=0., sr_ratio=1, sr_norm_cfg=dict(type='LN', eps=1e-5)):
        super().__init__()
        if embed_dims % num_heads:
            raise ValueError(f'embed_dims {embed_dims} must be divisible by num_heads {num_heads}')
        self.num_heads = num_heads
        self.scale = qk_scale or (embed_dims // num_heads) ** -0.5
        self.q = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.kv = nn.Linear(embed_dims, embed_dims * 2, bias=qkv_bias)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)
        self.sr_ratio = sr_ratio
        if sr_ratio > 1:
            self.sr = nn.Conv2d(embed_dims, embed_dims, sr_ratio, sr_ratio)
            self.norm = build_norm_layer(sr_norm_cfg, embed_dims)[1]

    def forward(self, x, hw_shape):
        B, N, C = x.shape
        h = self.num_heads
        q = self.q(x).reshape(B, N, h, C // h).permute(0, 2, 1, 3)
        if self.sr_ratio > 1:
            x_ = x.transpose(1, 2).reshape(B, C, *hw_shape)
            x_ = self.norm(self.sr(x_).flatten(2).transpose(1, 2))
        else:
            x_ = x
        kv = self.kv(x_).reshape(B, -1, 2, h, C // h).permute(2, 0, 3, 1, 4)
        k, v = kv[0], kv[1]
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = self.attn_drop(attn.softmax(dim=-1))
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj_drop(self.proj(x))


class PVTBlock(BaseModule):
    """Pre-norm PVT v1 block: ``x + DropPath(SRA(LN(x)))``, ``x + DropPath(FFN(LN(x)))``."""

    def __init__(self, embed_dims, num_heads, mlp_ratio, sr_ratio, qkv_bias=True, drop_rate=0.,
                 attn_drop_rate=0., drop_path_rate=0., norm_cfg=dict(type='LN', eps=1e-6),
                 sr_norm_cfg=dict(type='LN', eps=1e-5), ffn_cfg=None, with_cp=False, qk_scale=None):
        super().__init__()
        self.with_cp = with_cp
        self.norm1 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.attn = SpatialReductionAttention(embed_dims, num_heads, qkv_bias, qk_scale, attn_drop_rate,
                                              drop_rate, sr_ratio, sr_norm_cfg)
        self.drop_path = DropPath(drop_path_rate) if drop_path_rate > 0 else nn.Identity()
        self.norm2 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.ffn = build_ffn(ffn_cfg, embed_dims, int(embed_dims * mlp_ratio), drop_rate)

    def forward(self, x, hw_shape):
        def _inner(x):
            x = x + self.drop_path(self.attn(self.norm1(x), hw_shape))
            return x + self.drop_path(self.ffn(self.norm2(x), hw_shape))

        if self.with_cp and x.requires_grad:
            return cp.checkpoint(_inner, x, use_reentrant=False)
        return _inner(x)


class PatchEmbedFloor(BaseModule):
    """Strided conv patch embedding (no padding: floor sizes, as the official) + LN."""

    def __init__(self, in_channels, embed_dims, patch_size, norm_cfg=dict(type='LN', eps=1e-5)):
        super().__init__()
        self.patch_size = patch_size
        self.projection = nn.Conv2d(in_channels, embed_dims, patch_size, patch_size)
        self.norm = build_norm_layer(norm_cfg, embed_dims)[1]

    def forward(self, x):
        x = self.projection(x)
        hw = (x.shape[2], x.shape[3])
        return self.norm(x.flatten(2).transpose(1, 2)), hw


@MODELS.register_module()
class PVTPEG(FrozenStagesMixin, BaseModule):
    """PVT v1 with PEG instead of absolute position embeddings (CPVT Table 13; = Twins PCPVT).

    Architectures (PVT v1 Table 1 settings; CPVT Table 13; Twins ``pcpvt_*_v0``)::

        arch    | depths        | embed_dims        | heads    | mlp_ratios | sr_ratios | params (cls)
        tiny    | 2, 2, 2, 2    | 64,128,320,512    | 1,2,5,8  | 8,8,4,4    | 8,4,2,1   | 12.85M
        small   | 3, 4, 6, 3    |  "                |  "       |  "         |  "        | 24.11M (= PCPVT-S)
        medium  | 3, 4, 18, 3   |  "                |  "       |  "         |  "        | 43.83M (= PCPVT-B)
        large   | 3, 8, 27, 3   |  "                |  "       |  "         |  "        | 60.99M (= PCPVT-L)

    As PVT v1 (``pos_embed_type='learnable'``, ``with_cls_token=True``, ``out_type='cls_token'``,
    ``peg_after_block=None``), tiny / small / medium have the official PVT-tiny / small / medium's
    13.23M / 24.49M / 44.21M parameters (with the 1000-class head).

    Args:
        arch (str | dict): one of ``arch_zoo`` ('tiny'/'t', 'small'/'s', 'medium'/'m'/'base'/'b',
            'large'/'l') or a dict with keys depths, embed_dims, num_heads, mlp_ratios, sr_ratios.
        in_channels (int): input channels. Default 3.
        patch_sizes (Sequence[int]): patch-embed kernel = stride per stage. Default (4, 2, 2, 2).
        peg_cfg (dict): extra kwargs of :class:`PEG` (kernel_size, num_layers, conv_type...).
        peg_after_block (int, optional): index of the block of each stage after which the PEG
            runs (official: 0, "position 0"); None builds no PEG (PVT v1, "PVT-tiny+GAP").
        pos_embed_type (str, optional): None (default, no position table) or ``'learnable'``:
            PVT v1's learnable table per stage (``pos_embeds.i``, trunc-normal .02), added after
            the patch embedding, of the stage's grid at ``pretrain_img_size`` and resized
            bilinearly (``align_corners=False``, as PVT v1 and mmdet) to other grids.
        pretrain_img_size (int, optional): input size whose grids the position tables hold
            (PVT v1 ``img_size``). Default None = 224; only with ``pos_embed_type``.
        with_cls_token (bool): PVT v1's class token (``cls_token``), prepended to the last
            stage's tokens after its patch embedding (it gets its own slot in that stage's
            position table) and passed through its PEG unchanged. Default False.
        out_type (str): ``'featmap'`` (default: NCHW maps of the patch tokens) or
            ``'cls_token'``: the last stage returns the (normed) class token ``(B, C)``, PVT v1's
            classifier input; needs ``with_cls_token=True`` and ``out_indices=(last stage,)``.
        out_indices (Sequence[int]): stages whose NCHW outputs are returned. Default (0, 1, 2, 3).
        norm_after_stage (bool | Sequence[bool]): a LayerNorm (``norm{i}``, eps 1e-6) on the
            output of stage i. For classification use ``[False, False, False, True]`` (the
            official final ``norm``) with ``out_indices=(3,)`` and a GlobalAveragePooling neck:
            the mean over H x W of the NCHW output equals the official token mean.
        qkv_bias (bool): Default True.
        qk_scale (float, optional): attention logit scale; None = ``head_dim ** -0.5``
            (official ``qk_scale``).
        drop_rate, attn_drop_rate, drop_path_rate (float): dropout / stochastic depth
            (linearly increasing over all blocks, as official).
        norm_cfg (dict): block norms and stage-output norms. Default LN eps 1e-6.
        embed_norm_cfg (dict): patch-embed norms (official ``nn.LayerNorm`` default eps 1e-5).
        sr_norm_cfg (dict, optional): spatial-reduction norms; None = ``embed_norm_cfg``
            (official eps 1e-5; mmpretrain's PCPVT uses its ``norm_cfg``, eps 1e-6).
        ffn_cfg (dict, optional): channel MLP config (default :class:`PVTMlp`); it is built
            with ``embed_dims``, ``feedforward_channels=mlp_ratio*C`` and ``ffn_drop=drop_rate``
            and called as ``ffn(x, (H, W))`` on (B, H*W, C) tokens.
        frozen_stages (int): -1 none; 0 the first patch embed (the stem); ``k`` stages
            0..k-1 (patch embed, position table, blocks, PEG, norm; the class token with the
            last stage) in eval mode without gradients (shared convention, ``FrozenStagesMixin``).
        norm_eval (bool): keep BatchNorm layers (e.g. in a PEG variant) in eval mode.
        with_cp (bool): gradient checkpointing per block.
        init_cfg (dict, optional): ``dict(type='Pretrained', checkpoint=..., prefix=...)``
            loads through ``converters.pvt_peg.convert_pcpvt`` (accepts official Twins, timm, mmpretrain,
            official / mmdet PVT v1 and mmposmlp layouts) and raises if a backbone key is missing.
            A PVT v1 classifier loaded without class token (``ignore_keys=['cls_token']``) also
            loses the class-token slot of its last position table (logged).
    """
    arch_zoo = {
        **dict.fromkeys(['t', 'tiny'], dict(depths=[2, 2, 2, 2])),
        **dict.fromkeys(['s', 'small'], dict(depths=[3, 4, 6, 3])),
        **dict.fromkeys(['m', 'medium', 'b', 'base'], dict(depths=[3, 4, 18, 3])),
        **dict.fromkeys(['l', 'large'], dict(depths=[3, 8, 27, 3])),
    }
    _common = dict(embed_dims=[64, 128, 320, 512], num_heads=[1, 2, 5, 8], mlp_ratios=[8, 8, 4, 4],
                   sr_ratios=[8, 4, 2, 1])
    essential_keys = ('depths', 'embed_dims', 'num_heads', 'mlp_ratios', 'sr_ratios')

    def __init__(self,
                 arch='small',
                 in_channels: int = 3,
                 patch_sizes: Sequence[int] = (4, 2, 2, 2),
                 peg_cfg: Optional[dict] = None,
                 peg_after_block: Optional[int] = 0,
                 pos_embed_type: Optional[str] = None,
                 pretrain_img_size: Optional[int] = None,
                 with_cls_token: bool = False,
                 out_type: str = 'featmap',
                 out_indices: Sequence[int] = (0, 1, 2, 3),
                 norm_after_stage=False,
                 qkv_bias: bool = True,
                 qk_scale: Optional[float] = None,
                 drop_rate: float = 0.,
                 attn_drop_rate: float = 0.,
                 drop_path_rate: float = 0.,
                 norm_cfg: dict = dict(type='LN', eps=1e-6),
                 embed_norm_cfg: dict = dict(type='LN', eps=1e-5),
                 sr_norm_cfg: Optional[dict] = None,
                 ffn_cfg: Optional[dict] = None,
                 frozen_stages: int = -1,
                 norm_eval: bool = False,
                 with_cp: bool = False,
                 init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        pretrained_init_cfg(self)  # refuse a misspelt Pretrained init_cfg when built, not when loading
        self._set_arch(arch, patch_sizes)
        self.in_channels = in_channels
        self._set_out_indices(out_indices, self.num_stages)
        if isinstance(norm_after_stage, bool):
            norm_after_stage = [norm_after_stage] * self.num_stages
        if len(norm_after_stage) != self.num_stages:
            raise ValueError(f'norm_after_stage needs {self.num_stages} entries, got {norm_after_stage}')
        self.norm_after_stage = list(norm_after_stage)
        self.peg_after_block = self._checked_peg(peg_after_block, peg_cfg)
        self.pos_embed_type = pos_embed_type
        self.pretrain_img_size = self._checked_pos_embed(pos_embed_type, pretrain_img_size)
        self.with_cls_token, self.out_type = self._checked_out_type(with_cls_token, out_type)
        self._set_frozen_stages(frozen_stages, self.num_stages, norm_eval)
        self.with_cp = with_cp
        self.min_input_size = max(s * r for s, r in zip(self._reductions(), self.sr_ratios))
        block_cfg = dict(qkv_bias=qkv_bias, drop_rate=drop_rate, attn_drop_rate=attn_drop_rate, norm_cfg=norm_cfg,
                         sr_norm_cfg=embed_norm_cfg if sr_norm_cfg is None else sr_norm_cfg, ffn_cfg=ffn_cfg,
                         with_cp=with_cp, qk_scale=qk_scale)
        self._build_stages(drop_path_rate, block_cfg, embed_norm_cfg, norm_cfg, dict(peg_cfg or {}))
        if self.with_cls_token:
            self.cls_token = nn.Parameter(torch.zeros(1, 1, self.embed_dims[-1]))
        self.pos_drop = nn.Dropout(drop_rate)
        self._set_feature_info(self.embed_dims, self._reductions())
        self._freeze_stages()

    def _set_arch(self, arch, patch_sizes: Sequence[int]) -> None:
        """The per-stage settings of ``arch`` (a name or a dict of :attr:`essential_keys`) and ``patch_sizes``."""
        if isinstance(arch, str):
            if arch.lower() not in self.arch_zoo:
                raise ValueError(f'unknown PVTPEG arch {arch!r}; choose one of '
                                 f'{sorted(set(self.arch_zoo))} or pass a dict with {self.essential_keys}')
            arch = {**self._common, **self.arch_zoo[arch.lower()]}
        missing = set(self.essential_keys) - set(arch)
        if missing:
            raise ValueError(f'custom PVTPEG arch is missing {sorted(missing)}; needs {self.essential_keys}')
        self.num_stages = len(arch['depths'])
        for k in self.essential_keys:
            if len(arch[k]) != self.num_stages:
                raise ValueError(f'arch[{k!r}] has {len(arch[k])} entries, expected {self.num_stages}')
        if len(patch_sizes) != self.num_stages:
            raise ValueError(f'patch_sizes needs {self.num_stages} entries, got {patch_sizes}')
        self.depths, self.embed_dims, self.num_heads, self.mlp_ratios, self.sr_ratios = (
            list(arch[k]) for k in self.essential_keys)
        self.patch_sizes = list(patch_sizes)

    def _checked_peg(self, peg_after_block: Optional[int], peg_cfg: Optional[dict]) -> Optional[int]:
        if peg_after_block is None:
            if peg_cfg is not None:
                raise ValueError(f'peg_cfg={peg_cfg} shapes a PEG but peg_after_block=None builds none: drop peg_cfg '
                                 'or set peg_after_block (0 = the official position)')
        elif not 0 <= peg_after_block < min(self.depths):
            raise ValueError(f'peg_after_block={peg_after_block} must index a block of every stage '
                             f'(depths {self.depths}) or be None (no PEG)')
        return peg_after_block

    def _checked_pos_embed(self, pos_embed_type: Optional[str], pretrain_img_size: Optional[int]) -> int:
        """The input size the position tables are built for (224 unless given)."""
        if pos_embed_type not in POS_EMBED_TYPES:
            raise ValueError(f'unknown PVTPEG pos_embed_type {pos_embed_type!r}; choose one of {POS_EMBED_TYPES} '
                             "(None: no table, 'learnable': PVT v1's per-stage tables)")
        if pos_embed_type is None and pretrain_img_size is not None:
            raise ValueError(f'pretrain_img_size={pretrain_img_size} sizes position tables but pos_embed_type=None '
                             "builds none: drop it or set pos_embed_type='learnable'")
        size = 224 if pretrain_img_size is None else int(pretrain_img_size)
        if pos_embed_type is not None and size % math.prod(self.patch_sizes):
            raise ValueError(f'pretrain_img_size={size} must be divisible by the total patch stride '
                             f'{math.prod(self.patch_sizes)} (the position tables hold the stage grids at that size)')
        return size

    def _checked_out_type(self, with_cls_token: bool, out_type: str):
        if out_type not in OUT_TYPES:
            raise ValueError(f'unknown PVTPEG out_type {out_type!r}; choose one of {OUT_TYPES}')
        if out_type == 'cls_token' and not with_cls_token:
            raise ValueError("out_type='cls_token' returns the class token: set with_cls_token=True "
                             "(or use out_type='featmap')")
        if out_type == 'cls_token' and self.out_indices != (self.num_stages - 1, ):
            raise ValueError(f"out_type='cls_token' returns the class token, which only the last stage has: set "
                             f'out_indices=({self.num_stages - 1},), got {tuple(self.out_indices)}')
        return bool(with_cls_token), out_type

    def _reductions(self) -> List[int]:
        """Total stride of every stage (the product of the patch sizes so far)."""
        return [math.prod(self.patch_sizes[:i + 1]) for i in range(self.num_stages)]

    def _build_stages(self, drop_path_rate: float, block_cfg: dict, embed_norm_cfg: dict, norm_cfg: dict,
                      peg_cfg: dict) -> None:
        """Per stage: patch embedding, blocks, PEG, position table and output norm."""
        dpr = torch.linspace(0, drop_path_rate, sum(self.depths)).tolist()
        self.patch_embeds = ModuleList()
        self.stages = ModuleList()
        self.pegs = ModuleList() if self.peg_after_block is not None else None
        self.pos_embeds = ModuleList() if self.pos_embed_type is not None else None
        cur, prev = 0, self.in_channels
        for i, (C, stride) in enumerate(zip(self.embed_dims, self._reductions())):
            self.patch_embeds.append(PatchEmbedFloor(prev, C, self.patch_sizes[i], embed_norm_cfg))
            self.stages.append(ModuleList([
                PVTBlock(C, self.num_heads[i], self.mlp_ratios[i], self.sr_ratios[i], drop_path_rate=dpr[cur + j],
                         **block_cfg) for j in range(self.depths[i])]))
            if self.pegs is not None:
                self.pegs.append(PEG(C, **peg_cfg))
            if self.pos_embeds is not None:
                grid = self.pretrain_img_size // stride
                self.pos_embeds.append(AbsolutePositionEmbedding(
                    C, (grid, grid), 'learnable', num_extra_tokens=int(self._has_cls(i)),
                    interpolate_mode='bilinear'))
            if self.norm_after_stage[i]:
                self.add_module(f'norm{i}', build_norm_layer(norm_cfg, C)[1])
            cur += self.depths[i]
            prev = C

    # ------------------------------------------------------------------ init / loading
    def init_weights(self):
        pretrained = pretrained_init_cfg(self)
        if pretrained is not None:
            load_pretrained_init_cfg(self, pretrained, converter=functools.partial(
                checkpoint_filter_fn, model=self, ignore_keys=tuple(pretrained.get('ignore_keys', ()))))
            return
        super().init_weights()
        if self.init_cfg is None:
            # official Twins/PVT init: Linear trunc-normal .02, LN 1/0, conv N(0, sqrt(2/fan_out))
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    trunc_normal_init(m, std=.02, bias=0.)
                elif isinstance(m, (nn.LayerNorm, nn.GroupNorm, _BatchNorm)):
                    constant_init(m, 1., 0.)
                elif isinstance(m, nn.Conv2d):
                    fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels // m.groups
                    normal_init(m, 0, math.sqrt(2.0 / fan_out), bias=0.)
            # PVT v1: position tables and class token trunc-normal .02
            for pe in self.pos_embeds or ():
                trunc_normal_(pe.pos_embed, std=.02)
            if self.with_cls_token:
                trunc_normal_(self.cls_token, std=.02)

    # ------------------------------------------------------------------ train helpers
    def _frozen_modules(self):
        mods = [self.patch_embeds[0]]  # the stem (frozen_stages=0)
        for i in range(min(self.frozen_stages, self.num_stages)):
            mods += [self.patch_embeds[i], self.stages[i]]
            if self.pegs is not None:
                mods.append(self.pegs[i])
            if self.pos_embeds is not None:
                mods.append(self.pos_embeds[i])
            if self.norm_after_stage[i]:
                mods.append(getattr(self, f'norm{i}'))
        return mods

    def _frozen_parameters(self):
        if self.with_cls_token and self.frozen_stages >= self.num_stages:
            return (self.cls_token, )
        return ()

    def _has_cls(self, i: int) -> bool:
        """Whether stage ``i`` carries the class token (PVT v1: the last stage only)."""
        return self.with_cls_token and i == self.num_stages - 1

    # ------------------------------------------------------------------ forward
    def forward(self, x):
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f'PVTPEG expects (B, {self.in_channels}, H, W) images, got {tuple(x.shape)}')
        if min(x.shape[2:]) < self.min_input_size:
            raise ValueError(f'input {tuple(x.shape[2:])} is too small for PVTPEG: every side must be '
                             f'>= {self.min_input_size} (total patch stride x spatial-reduction ratio)')
        outs = {}
        B = x.shape[0]
        for i in range(self.num_stages):
            x, hw = self.patch_embeds[i](x)
            extra = int(self._has_cls(i))
            if extra:
                x = torch.cat([self.cls_token.expand(B, -1, -1), x], dim=1)
            if self.pos_embeds is not None:
                x = self.pos_embeds[i](x, hw)
            x = self.pos_drop(x)
            for j, blk in enumerate(self.stages[i]):
                x = blk(x, hw)
                if j == self.peg_after_block:
                    x = self.pegs[i](x, hw, num_extra_tokens=extra)
            if self.norm_after_stage[i]:
                x = getattr(self, f'norm{i}')(x)
            if i in self.out_indices and self.out_type == 'cls_token':
                outs[i] = x[:, 0]
                continue
            x = x[:, extra:].transpose(1, 2).reshape(B, self.embed_dims[i], *hw)
            if i in self.out_indices:
                outs[i] = x
        return self._ordered_outputs(outs)
