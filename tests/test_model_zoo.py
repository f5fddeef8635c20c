"""Model-zoo conventions: model-index.yml -> metafiles -> configs, and a README per family."""
import glob
import os

import pytest
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
    assert sorted({m.split('/')[1] for m in metafiles}) == families
    for meta_path in metafiles:
        family_dir = os.path.dirname(meta_path)
        family_readme = os.path.join(ROOT, 'configs', meta_path.split('/')[1], 'README.md')
        assert os.path.isfile(family_readme), family_readme
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


def _paper_table_configs():
    pattern = os.path.join(ROOT, 'configs', '*', 'paper_tables', '*.py')
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(pattern))


def test_paper_table_configs_listed_in_family_readme():
    """Every config of a paper-table row (configs/<family>/paper_tables/) is linked from its family README,
    in a table row that names the paper table (``T<n>``)."""
    configs = _paper_table_configs()
    assert configs
    for cfg in configs:
        family = cfg.split(os.sep)[1]
        with open(os.path.join(ROOT, 'configs', family, 'README.md')) as f:
            rows = [line for line in f if f'(paper_tables/{os.path.basename(cfg)})' in line]
        assert any(line.startswith('| T') for line in rows), f'{cfg} has no table row in configs/{family}/README.md'


# reference rows of the papers' tables that are upstream models (thin wrappers of upstream configs) -> backbone
UPSTREAM_BACKBONE_ROWS = {
    # CPVT Table 13's ResNet-18 rows: mmpretrain's / mmseg's / mmdet's ResNet-18 configs
    'configs/cpvt/paper_tables/resnet18_8xb32-90e_in1k.py': 'ResNet',
    'configs/cpvt/paper_tables/fpn_r18_8xb4-40k_ade20k-512x512.py': 'ResNetV1c',
    'configs/cpvt/paper_tables/retinanet_r18_fpn_8xb2-1x_coco.py': 'ResNet',
    'configs/cpvt/paper_tables/retinanet_r18_fpn_8xb2-ms-3x_coco.py': 'ResNet',
    # Wave-MLP Tables 3, 4 and 9 comparison rows: mmdet's ResNet-18 / Swin-S detectors, mmseg's Swin
    'configs/wavemlp/paper_tables/mask-rcnn_r18_fpn_1x_coco.py': 'ResNet',
    'configs/wavemlp/paper_tables/mask-rcnn_r18_fpn_ms-3x_coco.py': 'ResNet',
    'configs/wavemlp/paper_tables/retinanet_swin-s-p4-w7_fpn_1x_coco.py': 'SwinTransformer',
    'configs/wavemlp/paper_tables/mask-rcnn_swin-s-p4-w7_fpn_1x_coco.py': 'SwinTransformer',
    'configs/wavemlp/paper_tables/fpn_swin-t_4xb8-40k_ade20k-512x512.py': 'SwinTransformer',
    'configs/wavemlp/paper_tables/fpn_swin-s_4xb8-40k_ade20k-512x512.py': 'SwinTransformer',
}


@pytest.mark.slow
def test_paper_table_configs_parse():
    """Every paper-table config loads with its bases and builds on an mmposmlp backbone option that exists
    (or is one of the listed upstream reference rows)."""
    from mmengine.config import Config
    configs = _paper_table_configs()
    assert set(UPSTREAM_BACKBONE_ROWS) <= set(configs)
    for cfg in configs:
        c = Config.fromfile(os.path.join(ROOT, cfg))
        expected = UPSTREAM_BACKBONE_ROWS.get(cfg.replace(os.sep, '/'))
        if expected is not None:
            assert c.model.backbone.type == expected, cfg
        else:
            assert str(c.model.backbone.type).startswith('mmposmlp.'), cfg


@pytest.mark.slow
def test_paper_table_classifier_params_match_readme():
    """The params printed in the README rows are what the configs build (classification rows)."""
    import re

    from mmengine.config import Config

    from mmposmlp.testing import build_model_from_cfg
    for cfg in _paper_table_configs():
        if 'in1k' not in cfg:
            continue
        family = cfg.split(os.sep)[1]
        with open(os.path.join(ROOT, 'configs', family, 'README.md')) as f:
            link = f'(paper_tables/{os.path.basename(cfg)})'
            row = next(line for line in f if link in line and line.startswith('| T'))
        model, _ = build_model_from_cfg(Config.fromfile(os.path.join(ROOT, cfg)))
        params = sum(p.numel() for p in model.parameters()) / 1e6
        printed = [float(x) for x in re.findall(r'(\d+\.\d\d)M', row)]
        assert any(abs(params - p) < 0.006 for p in printed), (cfg, params, printed)
