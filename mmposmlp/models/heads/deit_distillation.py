"""DeiT's distillation head (Touvron et al., "Training data-efficient image transformers & distillation
through attention", ICML 2021, https://arxiv.org/abs/2012.12877, Sec. 5): mmpretrain's ``DeiTClsHead``
with the training loss ``(1 - alpha) * L_cls(Z_cls, y) + alpha * L_dist`` against a teacher's logits, which
:class:`mmposmlp.models.classifiers.distillation.DistillationClassifier` passes to :meth:`loss`.

mmpretrain is imported only when the class is first used (built from a config or accessed as a module
attribute), so ``import mmposmlp.models`` imports no downstream library.
"""
from typing import Optional

import torch
import torch.nn.functional as F

from mmposmlp.models.backbones.lazy_upstream import LazyUpstreamClasses, module_getattr


def _make_head() -> type:
    from mmpretrain.models.heads import DeiTClsHead

    class DeiTDistillationHead(DeiTClsHead):
        """mmpretrain's ``DeiTClsHead`` (keys ``layers.head`` / ``layers.head_dist``) that trains (DeiT Sec. 5).

        The backbone gives ``(cls_token, dist_token)`` features (mmpretrain ``DistilledVisionTransformer``,
        :class:`mmposmlp.CPVT` with ``with_dist_token=True``). Used inside :class:`DistillationClassifier`,
        which passes the teacher's logits to :meth:`loss`.

        Args:
            distill_type (str): ``'hard'`` (CE against the teacher's argmax, the CPVT Table 4 rows) or
                ``'soft'`` (KL at temperature ``tau``). Default ``'hard'``.
            alpha (float): weight of the distillation loss; the label loss gets ``1 - alpha``. DeiT: 0.5.
            tau (float): temperature of soft distillation. DeiT: 1.0.
            **kwargs: the arguments of ``DeiTClsHead`` (``num_classes``, ``in_channels``, ``loss`` for the
                class head: with Mixup/CutMix it receives the mixed soft targets, as DeiT's base criterion).
        """
        distills_logits = True
        DISTILL_TYPES = ('hard', 'soft')

        def __init__(self, *args, distill_type: str = 'hard', alpha: float = 0.5, tau: float = 1.0, **kwargs):
            if distill_type not in self.DISTILL_TYPES:
                raise ValueError(f'DeiTDistillationHead: unknown distill_type {distill_type!r}; choose one of '
                                 f'{self.DISTILL_TYPES}.')
            if not 0. <= float(alpha) <= 1.:
                raise ValueError(f'DeiTDistillationHead: alpha={alpha} must lie in [0, 1] (the label loss gets '
                                 '1 - alpha).')
            if float(tau) <= 0:
                raise ValueError(f'DeiTDistillationHead: tau={tau} must be positive.')
            super().__init__(*args, **kwargs)
            self.distill_type = distill_type
            self.alpha = float(alpha)
            self.tau = float(tau)

        def forward(self, feats) -> torch.Tensor:
            """The prediction: the mean of the class and distillation heads' logits (DeiT at test time)."""
            cls_score, dist_score = self.scores(feats)
            return (cls_score + dist_score) / 2

        def scores(self, feats):
            """``(class head logits, distillation head logits)``."""
            cls_token, dist_token = self.pre_logits(feats)
            return self.layers.head(cls_token), self.layers.head_dist(dist_token)

        def distill_loss(self, dist_score: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
            if self.distill_type == 'hard':
                return F.cross_entropy(dist_score, teacher_logits.argmax(dim=1))
            t = self.tau
            return F.kl_div(F.log_softmax(dist_score / t, dim=1), F.log_softmax(teacher_logits / t, dim=1),
                            reduction='sum', log_target=True) * (t * t) / dist_score.numel()

        def loss(self, feats, data_samples, teacher_logits: Optional[torch.Tensor] = None, **kwargs) -> dict:
            if teacher_logits is None:
                raise ValueError("DeiTDistillationHead trains only inside model "
                                 "type='mmposmlp.DistillationClassifier', which passes the teacher's logits; set the "
                                 'model type and its teacher.')
            cls_score, dist_score = self.scores(feats)
            losses = self._get_loss(cls_score, data_samples, **kwargs)
            # not 'loss': mmengine's parse_losses logs the total under 'loss' and a part of that name hides it
            losses['loss_cls'] = losses.pop('loss') * (1 - self.alpha)
            losses['loss_distill'] = self.distill_loss(dist_score, teacher_logits) * self.alpha
            return losses

    return DeiTDistillationHead


_HEADS = LazyUpstreamClasses(__name__, {'DeiTDistillationHead': _make_head},
                             requires={'DeiTDistillationHead': 'mmpretrain'}, kind='distillation head')
_HEADS.register_builders()
__getattr__ = module_getattr(__name__, _HEADS)  # PEP 562: picklable as deit_distillation.DeiTDistillationHead
