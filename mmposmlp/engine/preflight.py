"""Pre-flight checks of the pretrained weights a training run reads: each problem ends the run in one sentence
naming the config key and the fix, before any time is spent on building or training.

* ``init_cfg`` ``Pretrained`` checkpoints and ``load_from`` must exist (where they come from and the commands
  that make them: :mod:`mmposmlp.utils.pretrained`).
* A model-level ``pretrained=...`` left from an upstream config (mmseg's ``pretrained='open-mmlab://resnet50_v1c'``,
  mmdet's ``pretrained='torchvision://...'``) is handed by the library to the backbone: with our backbone it names
  another network's weights, so it is refused as such, with its fix ``model.pretrained=None``.
"""
import os.path as osp

from mmposmlp.engine.errors import UserError, is_local_path


def _pretrained_refs(obj, where):
    """Yield (checkpoint, key) of every ``init_cfg`` of type Pretrained below ``obj``."""
    if isinstance(obj, dict):
        if str(obj.get('type', '')).rpartition('.')[2] == 'Pretrained' and 'checkpoint' in obj:
            yield obj['checkpoint'], f'{where}.checkpoint'
        for k, v in obj.items():
            yield from _pretrained_refs(v, f'{where}.{k}')
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _pretrained_refs(v, f'{where}[{i}]')


def missing_pretrained_paths(cfg):
    """[(path, cfg key)] of pretrained checkpoints (``init_cfg`` Pretrained, ``load_from``) a training run would
    read that do not exist locally."""
    refs = list(_pretrained_refs(cfg.get('model'), 'model'))
    if cfg.get('load_from') and not cfg.get('resume'):
        refs.append((cfg.load_from, 'load_from'))
    return [(p, k) for p, k in refs if is_local_path(p) and not osp.exists(p)]


def type_name(obj) -> str:
    """A config ``type`` as written: ``'mmposmlp.PosMLP'``, or ``'mmposmlp.PosMLP'`` for the class itself
    (pure-Python configs)."""
    if isinstance(obj, type):
        module = obj.__module__.split('.')[0]
        return f'{module}.{obj.__name__}' if module == 'mmposmlp' else obj.__name__
    return str(obj or '')


def model_level_pretrained(cfg):
    """``(value, backbone type)`` of a model-level ``pretrained`` that the library would hand to one of our
    backbones, else None."""
    model = cfg.get('model')
    if not isinstance(model, dict) or not model.get('pretrained'):
        return None
    backbone = model.get('backbone')
    backbone_type = type_name(backbone.get('type')) if isinstance(backbone, dict) else ''
    return (model['pretrained'], backbone_type) if backbone_type.startswith('mmposmlp.') else None


def check_model_level_pretrained(cfg) -> None:
    """Refuse a model-level ``pretrained`` meant for the upstream backbone our backbone replaced."""
    found = model_level_pretrained(cfg)
    if found:
        value, backbone = found
        raise UserError(
            f"model.pretrained={value!r} is left from the upstream config: the library hands it to the backbone, "
            f'now {backbone}, for which it names another network\'s weights; set model.pretrained=None '
            '(--cfg-options model.pretrained=None) and give our backbone its weights with '
            "model.backbone.init_cfg=dict(type='Pretrained', checkpoint=...).")


def check_pretrained(cfg) -> None:
    """Stop before training when a pretrained checkpoint is wrong or missing: which key, and how to fix it."""
    from mmposmlp.utils.pretrained import missing_pretrained_message
    check_model_level_pretrained(cfg)
    missing = missing_pretrained_paths(cfg)
    if missing:
        path, key = missing[0]
        raise UserError(missing_pretrained_message(path, key))
