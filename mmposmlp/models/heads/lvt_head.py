"""The official LVT ImageNet classifier head (``lvt_cls``, after VOLO; Yang et al., CVPR 2022,
https://arxiv.org/abs/2112.10809): class-attention blocks over a class token and the last stage's
tokens, with its own loss (token labelling after MixToken)."""
from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmcv.cnn import build_norm_layer
from mmengine.model import BaseModule
from mmengine.model.weight_init import trunc_normal_

from mmposmlp.registry import MODELS
from ..backbones.lvt import LN, build_ffn, init_lvt_weights

__all__ = ['ClassAttention', 'ClassBlock', 'LVTClassAttentionHead']


class ClassAttention(nn.Module):
    """The class token attends to all tokens (CaiT/VOLO class attention): q from token 0, k/v from all."""

    def __init__(self, embed_dims: int, num_heads: int, qkv_bias: bool = False, qk_scale=None):
        super().__init__()
        self.num_heads = num_heads
        self.scale = qk_scale or (embed_dims // num_heads) ** -0.5
        self.kv = nn.Linear(embed_dims, 2 * embed_dims, bias=qkv_bias)
        self.q = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.proj = nn.Linear(embed_dims, embed_dims)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, C = x.shape
        h, d = self.num_heads, C // self.num_heads
        k, v = self.kv(x).reshape(B, N, 2, h, d).permute(2, 0, 3, 1, 4)
        q = self.q(x[:, :1]).reshape(B, h, 1, d)
        attn = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(B, 1, C))


class ClassBlock(nn.Module):
    """``c + CA(LN(x))``, ``c + FFN(LN(c))`` for the class token ``c = x[:, :1]``; the others pass."""

    def __init__(self, embed_dims: int, num_heads: int, mlp_ratio: float, norm_cfg: dict,
                 ffn_cfg: Optional[dict]):
        super().__init__()
        self.norm1 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.attn = ClassAttention(embed_dims, num_heads)
        self.norm2 = build_norm_layer(norm_cfg, embed_dims)[1]
        self.ffn_is_mlp = ffn_cfg is None
        if ffn_cfg is None:
            hidden = int(embed_dims * mlp_ratio)
            self.mlp = nn.Sequential()
            self.mlp.add_module('fc1', nn.Linear(embed_dims, hidden))
            self.mlp.add_module('act', nn.GELU())
            self.mlp.add_module('fc2', nn.Linear(hidden, embed_dims))
        else:
            self.mlp = build_ffn(ffn_cfg, embed_dims, mlp_ratio, False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cls = x[:, :1] + self.attn(self.norm1(x))
        y = self.norm2(cls)
        # a lone class token is a 1x1 grid for an FFN with spatial mixing (IMLP: its DW conv's centre tap)
        cls = cls + (self.mlp(y) if self.ffn_is_mlp else self.mlp(y, hw_shape=(1, 1)))
        return torch.cat([cls, x[:, 1:]], dim=1)


@MODELS.register_module()
class LVTClassAttentionHead(BaseModule):
    """The official LVT ImageNet classifier (``lvt_cls``, after VOLO): ``num_blocks`` class-attention
    blocks over the class token and the last stage's tokens, a LayerNorm, then
    ``logits = fc(t_cls) + aux_weight * max_tokens aux_fc(t_i)`` (VOLO's token-labelling inference).

    Training loss: ``cls_weight * CE(fc(t_cls))`` plus ``dense_weight * mean_i CE(aux_fc(t_i))`` with the image
    label as every token's label; after MixToken (backbone ``mix_token=True``: the features carry the box) the
    token logits are flipped back inside the box and the class token learns ``lam * y + (1 - lam) * y_flipped``
    (the official ``TokenLabelCrossEntropy`` for image-level targets; the official recipe's dense token labels
    come from an external NFNet-F6 annotation, which we do not have).

    Args:
        num_classes (int): classes.
        in_channels (int): channels of the last stage.
        num_heads (int): heads of the class attention. Defaults to 8 (the last stage's).
        mlp_ratio (float): FFN ratio of the class blocks. Defaults to 4.
        num_blocks (int): class-attention blocks. Defaults to 2.
        aux_weight (float): weight of the auxiliary max in the logits. Defaults to 0.5.
        ffn_cfg (dict, optional): FFN of the class blocks (as :class:`LVT`'s ``ffn_cfg``).
        norm_cfg (dict): LayerNorms. Defaults to LN eps 1e-5.
        loss (dict): per-token classification loss. Defaults to CE with label smoothing 0.1.
        cls_weight (float), dense_weight (float): loss weights. Defaults to 1.0 and 0.5 (official).
        cal_acc (bool): top-k accuracy in the losses. Defaults to False.
    """

    def __init__(self, num_classes: int, in_channels: int, num_heads: int = 8, mlp_ratio: float = 4.,
                 num_blocks: int = 2, aux_weight: float = 0.5, ffn_cfg: Optional[dict] = None,
                 norm_cfg: dict = LN,
                 loss: dict = dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'),
                 cls_weight: float = 1.0, dense_weight: float = 0.5, init_cfg: Optional[dict] = None):
        super().__init__(init_cfg=init_cfg)
        if num_classes <= 0:
            raise ValueError(f'LVTClassAttentionHead: num_classes must be positive, got {num_classes}')
        self.num_classes = num_classes
        self.in_channels = in_channels
        self.aux_weight = aux_weight
        self.cls_weight = cls_weight
        self.dense_weight = dense_weight
        self.loss_cfg = loss
        self._loss_module = None
        self.blocks = nn.ModuleList([ClassBlock(in_channels, num_heads, mlp_ratio, norm_cfg, ffn_cfg)
                                     for _ in range(num_blocks)])
        self.cls_token = nn.Parameter(torch.zeros(1, 1, in_channels))
        self.norm = build_norm_layer(norm_cfg, in_channels)[1]
        self.fc = nn.Linear(in_channels, num_classes)
        self.aux_fc = nn.Linear(in_channels, num_classes)

    @property
    def loss_module(self):
        if self._loss_module is None:
            from mmpretrain.registry import MODELS as PRETRAIN_MODELS
            self._loss_module = PRETRAIN_MODELS.build(self.loss_cfg)
        return self._loss_module

    def init_weights(self):
        super().init_weights()
        if self.init_cfg is None:
            trunc_normal_(self.cls_token, std=.02)
            init_lvt_weights(self)

    def pre_logits(self, feats) -> torch.Tensor:
        x = feats[-1] if isinstance(feats, (tuple, list)) else feats
        x = x.flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        for block in self.blocks:
            x = block(x)
        return self.norm(x)

    def forward_train(self, feats) -> Tuple[torch.Tensor, torch.Tensor]:
        """(class-token logits (B, K), token logits (B, N, K))."""
        x = self.pre_logits(feats)
        return self.fc(x[:, 0]), self.aux_fc(x[:, 1:])

    def forward(self, feats) -> torch.Tensor:
        cls_logits, aux = self.forward_train(feats)
        return cls_logits + self.aux_weight * aux.max(1)[0]

    def loss(self, feats, data_samples, **kwargs) -> dict:
        cls_logits, aux = self.forward_train(feats)
        target = torch.stack([s.gt_label.reshape(-1)[0] for s in data_samples]).to(cls_logits.device)
        B, N, K = aux.shape
        box = getattr(feats, 'mix_box', None)
        if box is not None:
            return self._mix_token_loss(cls_logits, aux, target, box, feats.mix_grid)
        losses = dict(loss_cls=self.cls_weight * self.loss_module(cls_logits, target, avg_factor=B, **kwargs))
        if self.dense_weight:
            losses['loss_dense'] = self.dense_weight * self.loss_module(
                aux.reshape(B * N, K), target.repeat_interleave(N), avg_factor=B * N, **kwargs)
        return losses

    def _mix_token_loss(self, cls_logits, aux, target, box, grid) -> dict:
        """The official ``TokenLabelCrossEntropy`` with image-level targets after MixToken: the token logits
        are flipped back inside the box and learn their own image's (smoothed) label; the class token learns
        ``lam * y + (1 - lam) * y_flipped`` with ``lam = 1 - box area / tokens``."""
        kind = str(self.loss_cfg.get('type', '')).rpartition('.')[2]
        if kind not in ('LabelSmoothLoss', 'CrossEntropyLoss') or (
                kind == 'LabelSmoothLoss' and self.loss_cfg.get('mode', 'original') != 'original'):
            raise ValueError(f"LVTClassAttentionHead: MixToken needs loss=dict(type='LabelSmoothLoss', "
                             f"mode='original', ...) or CrossEntropyLoss, got {self.loss_cfg!r}")
        B, N, K = aux.shape
        if grid[0] * grid[1] != N:
            raise ValueError(f'LVTClassAttentionHead: MixToken box on a {grid[0]}x{grid[1]} grid but the last '
                             f'stage has {N} tokens')
        eps = float(self.loss_cfg.get('label_smooth_val', 0.)) if kind == 'LabelSmoothLoss' else 0.
        soft = F.one_hot(target, K).to(cls_logits.dtype) * (1. - eps) + eps / K
        r1, c1, r2, c2 = box
        aux = aux.reshape(B, grid[0], grid[1], K).clone()
        aux[:, r1:r2, c1:c2] = aux.flip(0)[:, r1:r2, c1:c2]
        lam = 1. - (r2 - r1) * (c2 - c1) / N
        cls_target = lam * soft + (1. - lam) * soft.flip(0) if lam < 1 else soft
        losses = dict(loss_cls=self.cls_weight * (-cls_target * F.log_softmax(cls_logits, -1)).sum(-1).mean())
        if self.dense_weight:
            dense = -soft.repeat_interleave(N, 0) * F.log_softmax(aux.reshape(B * N, K), -1)
            losses['loss_dense'] = self.dense_weight * dense.sum(-1).mean()
        return losses

    def predict(self, feats, data_samples=None):
        from mmpretrain.structures import DataSample
        logits = self(feats)
        scores = F.softmax(logits, dim=1)
        labels = scores.argmax(dim=1, keepdim=True).detach()
        out = []
        for i in range(logits.shape[0]):
            sample = DataSample() if data_samples is None or data_samples[i] is None else data_samples[i]
            sample.set_pred_score(scores[i]).set_pred_label(labels[i])
            out.append(sample)
        return out
