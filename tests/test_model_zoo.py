"""Model-zoo conventions: model-index.yml -> metafiles -> configs, and a README per family."""
import glob
import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(path):
    with open(os.path.join(ROOT, path)) as f:
        return yaml.safe_load(f)


def test_model_index_metafiles_and_configs():
    index = load('model-index.yml')
    metafiles = index['Import']
    families = sorted(d for d in os.listdir(os.path.join(ROOT, 'configs'))
                      if os.path.isdir(os.path.join(ROOT, 'configs', d)) and not d.startswith('_'))
    assert sorted(os.path.basename(os.path.dirname(m)) for m in metafiles) == families
    for meta_path in metafiles:
        family_dir = os.path.dirname(meta_path)
        assert os.path.isfile(os.path.join(ROOT, family_dir, 'README.md')), family_dir
        meta = load(meta_path)
        assert meta.get('Collections') and meta.get('Models'), meta_path
        listed = set()
        for model in meta['Models']:
            assert os.path.isfile(os.path.join(ROOT, model['Config'])), model['Config']
            assert model['In Collection'] in {c['Name'] for c in meta['Collections']}
            listed.add(os.path.normpath(model['Config']))
        shipped = {os.path.normpath(os.path.relpath(p, ROOT))
                   for p in glob.glob(os.path.join(ROOT, family_dir, '*.py'))}
        missing = sorted(shipped - listed)
        assert not missing, f'configs not listed in {meta_path}: {missing}'
