"""Knowledge distillation from a frozen teacher: DeiT's distillation token and module-output KD.

* :class:`~mmposmlp.models.heads.deit_distillation.DeiTDistillationHead` (mmpretrain ``DeiTClsHead`` + the
  training loss, in ``models/heads/``): DeiT (Touvron et al.,
  "Training data-efficient image transformers & distillation through attention", ICML 2021,
  https://arxiv.org/abs/2012.12877), Sec. 5: the class head learns the labels, the distillation head the
  teacher, ``loss = (1 - alpha) * L_cls(Z_cls, y) + alpha * L_dist``, with hard distillation
  ``L_dist = CE(Z_dist, argmax Z_t)`` or soft ``tau^2 KL(softmax(Z_t / tau) || softmax(Z_dist / tau))``
  (DeiT's ``DistillationLoss``: alpha 0.5, tau 1). At test time the prediction averages the two heads'
  logits, as DeiT's ``VisionTransformerDistilled`` and mmpretrain's ``DeiTClsHead`` do. CPVT Table 4's
  rows marked "trained with hard distillation using RegNetY-160 as the teacher".
* ``feature_distill`` of :class:`DistillationClassifier`: the mean-squared error between the outputs of
  student modules and the matching teacher modules on the same images (IMLP Sec. 4.3 / Table 2
  "w/ channel + KD": the output of each AMLP module learns the original model's MLP output).

The teacher is a whole classifier built from a config (``TimmClassifier`` for a timm model such as
``regnety_160``, or an ``ImageClassifier``). Its weights come only from its own
``init_cfg=dict(type='Pretrained', checkpoint=...)``, read as data by the project's checked loader
(:func:`mmposmlp.models.checkpoints.load_pretrained_init_cfg`: every key must fit, a pickle that needs a
class is refused unless the file is trusted for the command, e.g. ``tools/train.py --trust-checkpoint``).

What the teacher is *not* part of (chosen so that a 6M student does not carry an 84M teacher around):
the student's ``state_dict`` (so neither saved checkpoints nor resumed ones hold it), ``parameters()`` (so
no optimizer, EMA, gradient clipping or DDP sees it), ``train()``/``eval()`` switches (it is always in eval
mode) and ``deepcopy`` (an EMA copy of the student shares the one teacher). It is loaded by
:meth:`DistillationClassifier.init_weights`, which mmengine's runner calls before training (also before a
resume), and moved to the inputs' device on first use. Evaluation and inference never run it.
"""
import copy
import fnmatch
from typing import Dict, List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from mmposmlp.models.backbones.lazy_upstream import LazyUpstreamClasses, module_getattr
from mmposmlp.models.checkpoints import load_pretrained_init_cfg, pretrained_init_cfg

__all__ = ['Teacher', 'FEATURE_DISTILL_KEYS']

#: the keys of ``feature_distill`` and what each means
FEATURE_DISTILL_KEYS = {
    'student': 'fnmatch pattern of the student module names whose outputs are distilled, e.g. '
               "'backbone.layers.*.ffn.fc2'",
    'teacher': "fnmatch pattern of the teacher module names giving the targets, e.g. 'model.blocks.*.mlp'",
    'loss_weight': 'weight of the mean (over the module pairs) of the mean-squared errors (default 1.0)',
}


class Teacher:
    """A frozen teacher held outside the student's module tree (see the module docstring).

    ``deepcopy`` returns the same holder: an EMA copy of the student shares the one teacher.
    """

    def __init__(self, module: nn.Module, init_cfg: Optional[dict]):
        self.module = module.eval().requires_grad_(False)
        self.init_cfg = init_cfg
        self.loaded = False

    def __deepcopy__(self, memo):
        return self

    def load(self):
        """Read the teacher's weights (checked: every key must fit, nothing else is read)."""
        cfg = dict(pretrained_init_cfg(self))
        cfg.setdefault('prefix', '')  # a whole classifier: keep every key, including its head
        load_pretrained_init_cfg(self.module, cfg)
        self.module.eval().requires_grad_(False)
        self.loaded = True

    @torch.no_grad()
    def logits(self, inputs: torch.Tensor) -> torch.Tensor:
        if not self.loaded:
            raise RuntimeError(f"the teacher's weights ({self.init_cfg.get('checkpoint')}) were never loaded: call "
                               "the model's init_weights() before training (mmengine's Runner does).")
        first = next(iter(self.module.parameters()), None)
        if first is not None and first.device != inputs.device:
            self.module.to(inputs.device)
        self.module.eval()
        return self.module(inputs, mode='tensor')


def _matching(module: nn.Module, pattern: str) -> List[str]:
    """Names of ``module``'s submodules matching ``pattern``, in model order."""
    return [n for n, _ in module.named_modules() if n and fnmatch.fnmatchcase(n, pattern)]


class _Capture:
    """Forward hooks keeping the output of each of the given modules (in the modules' order), removed on exit."""

    def __init__(self, modules: List[nn.Module], side: str):
        self.modules = modules
        self.side = side
        self.seen: Dict[int, List[torch.Tensor]] = {id(m): [] for m in modules}

    def __enter__(self):
        self.handles = [m.register_forward_hook(lambda mod, _i, out: self.seen[id(mod)].append(out))
                        for m in self.modules]
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()

    @property
    def outputs(self) -> List[torch.Tensor]:
        calls = [len(self.seen[id(m)]) for m in self.modules]
        if any(c != 1 for c in calls):
            raise RuntimeError(f'feature_distill: each {self.side} module must run once per forward, but they ran '
                               f'{calls} times; choose modules that are called once.')
        return [self.seen[id(m)][0] for m in self.modules]


def _feature_pairs(model: nn.Module, cfg: Optional[dict]) -> Optional[dict]:
    """``feature_distill`` as module names of the student ``model`` and of its teacher, paired in order."""
    if cfg is None:
        return None
    unknown = [k for k in cfg if k not in FEATURE_DISTILL_KEYS]
    if unknown or 'student' not in cfg or 'teacher' not in cfg:
        raise ValueError(f'DistillationClassifier: feature_distill takes {list(FEATURE_DISTILL_KEYS)} '
                         f'(student and teacher required), got {sorted(cfg)}.')
    # names, not modules: an EMA deepcopy then resolves its own student modules and the shared teacher's
    student = _matching(model, cfg['student'])
    teacher = _matching(model.teacher.module, cfg['teacher'])
    if not student or len(student) != len(teacher):
        raise ValueError(f"DistillationClassifier: feature_distill pairs modules in order, but student "
                         f"pattern {cfg['student']!r} matches {len(student)} module(s) and teacher pattern "
                         f"{cfg['teacher']!r} matches {len(teacher)}; make both match the same number.")
    return dict(student=student, teacher=teacher, loss_weight=float(cfg.get('loss_weight', 1.0)))


def _feature_mse(student: List[torch.Tensor], teacher: List[torch.Tensor]) -> torch.Tensor:
    """The mean over the pairs of the student's and the teacher's outputs' mean-squared error."""
    errors = []
    for s, t in zip(student, teacher):
        if s.shape != t.shape:
            raise ValueError(f'DistillationClassifier: feature_distill pairs a student output of shape '
                             f'{tuple(s.shape)} with a teacher output of shape {tuple(t.shape)}; pair '
                             'modules whose outputs have the same shape.')
        errors.append(F.mse_loss(s, t))
    return sum(errors) / len(errors)


def _make_classifier() -> type:
    from mmpretrain.models.classifiers import ImageClassifier
    from mmpretrain.registry import MODELS as PRETRAIN_MODELS

    class DistillationClassifier(ImageClassifier):
        """mmpretrain's ``ImageClassifier`` trained against a frozen teacher (see the module docstring).

        Args:
            teacher (dict): config of the teacher classifier, e.g.
                ``dict(type='TimmClassifier', model_name='regnety_160', init_cfg=dict(type='Pretrained',
                checkpoint='checkpoints/regnety_160-a5fe301d.pth'))``. Its ``init_cfg`` must be a
                ``Pretrained`` one (a randomly initialised teacher is refused); it takes the keys every
                mmposmlp ``Pretrained`` init_cfg takes (``prefix`` default ``''``: the whole classifier).
            feature_distill (dict, optional): module-output distillation, keys :data:`FEATURE_DISTILL_KEYS`;
                the two patterns must match the same number of modules, paired in model order.
            backbone, neck, head, pretrained, train_cfg, data_preprocessor, init_cfg: as ``ImageClassifier``.
                With a :class:`DeiTDistillationHead` the teacher's logits train the distillation head.

        Losses: the head's (``loss_cls`` and ``loss_distill`` of :class:`DeiTDistillationHead`, else ``loss``) and
        ``loss_feature_distill``; mmengine logs their sum as ``loss``.
        """

        def __init__(self, backbone: dict, teacher: dict, neck: Optional[dict] = None, head: Optional[dict] = None,
                     feature_distill: Optional[dict] = None, pretrained: Optional[str] = None,
                     train_cfg: Optional[dict] = None, data_preprocessor: Optional[dict] = None,
                     init_cfg: Optional[dict] = None):
            super().__init__(backbone, neck=neck, head=head, pretrained=pretrained, train_cfg=train_cfg,
                             data_preprocessor=data_preprocessor, init_cfg=init_cfg)
            if not isinstance(teacher, dict) or 'type' not in teacher:
                raise ValueError(f'DistillationClassifier: teacher must be a model config dict with a type, got '
                                 f'{teacher!r}.')
            teacher = copy.deepcopy(dict(teacher))
            teacher_init = teacher.pop('init_cfg', None)
            holder = Teacher(PRETRAIN_MODELS.build(teacher), teacher_init)
            if pretrained_init_cfg(holder) is None:
                raise ValueError("DistillationClassifier: the teacher has no weights to load; give it "
                                 "init_cfg=dict(type='Pretrained', checkpoint='<teacher weights>') (a randomly "
                                 'initialised teacher would distil noise).')
            self.teacher = holder  # a plain object: outside the module tree on purpose (module docstring)
            self.distills_logits = bool(getattr(self.head, 'distills_logits', False))
            self.feature_distill = _feature_pairs(self, feature_distill)
            if not self.distills_logits and not self.feature_distill:
                raise ValueError(f"DistillationClassifier: nothing is distilled: use head type "
                                 f"'mmposmlp.DeiTDistillationHead' (got {type(self.head).__name__}) and/or "
                                 'feature_distill=dict(student=..., teacher=...).')

        def init_weights(self):
            """The student's initialisation (``ImageClassifier``), then the teacher's weights (checked)."""
            super().init_weights()
            if not self.teacher.loaded:
                self.teacher.load()

        def loss(self, inputs: torch.Tensor, data_samples) -> dict:
            pairs = self.feature_distill
            student = [self.get_submodule(n) for n in pairs['student']] if pairs else []
            teacher = [self.teacher.module.get_submodule(n) for n in pairs['teacher']] if pairs else []
            with _Capture(student, 'student') as student_out:
                feats = self.extract_feat(inputs)
            with _Capture(teacher, 'teacher') as teacher_out:
                teacher_logits = self.teacher.logits(inputs)
            if self.distills_logits:
                losses = self.head.loss(feats, data_samples, teacher_logits=teacher_logits)
            else:
                losses = self.head.loss(feats, data_samples)
            if pairs:
                losses['loss_feature_distill'] = pairs['loss_weight'] * _feature_mse(student_out.outputs,
                                                                                     teacher_out.outputs)
            return losses

    return DistillationClassifier


_CLASSES = LazyUpstreamClasses(__name__, {'DistillationClassifier': _make_classifier},
                               requires={'DistillationClassifier': 'mmpretrain'}, kind='distillation classifier')
_CLASSES.register_builders()
__getattr__ = module_getattr(__name__, _CLASSES)
