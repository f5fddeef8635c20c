"""mmposmlp's classification models in mmpretrain's model hub (``list_models``, ``get_model``,
``ImageClassificationInferencer``), registered through mmpretrain's public ``ModelHub.register_model_index``.

Registered right after ``mmpretrain.apis.model`` is imported (:mod:`mmposmlp.utils.import_hooks`, installed
with the package), or by ``import mmposmlp`` when mmpretrain is imported already: ``import mmposmlp`` stays free
of mmpretrain. ``register_model_index`` reads a whole index file, and ours also holds detection, segmentation and
video models; so the classification entries of our metafiles are written to a temporary index first, and that
one is registered (names the hub has already are left out, since the hub refuses a name twice).
"""
import os.path as osp
import tempfile

CLASSIFICATION_TASKS = ('Image Classification', )
_REGISTERED = set()  # ids of the ModelHub classes filled already


def mim_root() -> str:
    """The folder holding ``configs/``, ``tools/`` and ``model-index.yml``: ``mmposmlp/.mim``, copied
    there in a wheel, symlinks to the clone's top level in a checkout."""
    return osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), '.mim')


def _is_classification(model: dict) -> bool:
    return any(r.get('Task') in CLASSIFICATION_TASKS for r in model.get('Results') or [])


def classification_index(index_path=None, skip=lambda name: False) -> dict:
    """A model index (``Collections`` and ``Models``) of the models of our ``model-index.yml`` whose results
    include an image-classification task; a name for which ``skip(name)`` is true, or seen before, is left out."""
    import yaml
    index_path = index_path or osp.join(mim_root(), 'model-index.yml')
    with open(index_path) as f:
        imports = yaml.safe_load(f).get('Import') or []
    collections, models, seen = [], [], set()
    for metafile in imports:
        with open(osp.join(osp.dirname(index_path), metafile)) as f:
            meta = yaml.safe_load(f) or {}
        collections += meta.get('Collections') or []
        for model in meta.get('Models') or []:
            name = model['Name'].lower()
            if _is_classification(model) and name not in seen and not skip(name):
                seen.add(name)
                models.append(model)
    return dict(Collections=collections, Models=models)


def register_classification_models(apis_model) -> None:
    """Add our classification models to ``apis_model.ModelHub`` (the module ``mmpretrain.apis.model``) with
    its public ``register_model_index``; config paths become absolute under :func:`mim_root`. Runs while
    mmpretrain is being imported: a failure here warns (one sentence) instead of breaking that import."""
    hub = apis_model.ModelHub
    if id(hub) in _REGISTERED:
        return
    _REGISTERED.add(id(hub))
    root = mim_root()
    try:
        import yaml
        index = classification_index(skip=hub.has)
        with tempfile.TemporaryDirectory(prefix='mmposmlp-hub-') as tmp:
            path = osp.join(tmp, 'model-index.yml')
            with open(path, 'w') as f:
                yaml.safe_dump(index, f, sort_keys=False)
            hub.register_model_index(path, config_prefix=root)
    except Exception as e:  # noqa: BLE001
        import warnings
        warnings.warn(f'mmposmlp models are not in mmpretrain\'s model hub: registering the classification models '
                      f'of {root}/model-index.yml failed ({type(e).__name__}: {e}); reinstall mmposmlp.')
