"""mmposmlp's classification models in mmpretrain's model hub (``list_models``, ``get_model``,
``ImageClassificationInferencer``), read from our ``model-index.yml`` the way mmpretrain registers its own.

Registered right after ``mmpretrain.apis.model`` is imported (:mod:`mmposmlp.utils.import_hooks`, installed
with the package), or by ``import mmposmlp`` when mmpretrain is imported already: ``import mmposmlp`` stays free
of mmpretrain. mmpretrain's public ``ModelHub.register_model_index`` takes a whole index (ours also holds
detection, segmentation and video models) and refuses names it has, so the hub's table is filled here the way
that function fills it, with our classification models only.
"""
import os.path as osp

CLASSIFICATION_TASKS = ('Image Classification', )
_REGISTERED = set()  # ids of the ModelHub classes filled already


def mim_root() -> str:
    """The folder holding ``configs/``, ``tools/`` and ``model-index.yml``: ``mmposmlp/.mim``, copied
    there in a wheel, symlinks to the clone's top level in a checkout."""
    return osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), '.mim')


def classification_models(index_path=None) -> list:
    """modelindex ``Model`` entries of our model index whose results include an image-classification task."""
    from modelindex.load_model_index import load
    index = load(index_path or osp.join(mim_root(), 'model-index.yml'))
    index.build_models_with_collections()
    return [m for m in index.models if any(r.task in CLASSIFICATION_TASKS for r in (m.results or []))]


def register_classification_models(apis_model) -> None:
    """Add our classification models to ``apis_model.ModelHub`` (the module ``mmpretrain.apis.model``);
    config paths become absolute under :func:`mim_root`. Names already in the hub are left alone. Runs while
    mmpretrain is being imported: a failure here warns (one sentence) instead of breaking that import."""
    hub = apis_model.ModelHub
    if id(hub) in _REGISTERED:
        return
    _REGISTERED.add(id(hub))
    root = mim_root()
    try:
        models = classification_models()
    except Exception as e:  # noqa: BLE001
        import warnings
        warnings.warn(f'mmposmlp models are not in mmpretrain\'s model hub: reading {root}/model-index.yml '
                      f'failed ({type(e).__name__}: {e}); reinstall mmposmlp.')
        return
    for meta in models:
        name = meta.name.lower()
        if name in hub._models_dict:
            continue
        meta.config = hub._expand_config_path(meta, root)
        hub._models_dict[name] = meta
