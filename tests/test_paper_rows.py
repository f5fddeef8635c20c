"""The papers' row inventories (configs/<family>/paper_rows.yml): every table, every row, and its config."""
import os

import pytest

from toolcfg import load_tool

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tool():
    return load_tool('.dev_scripts', 'paper_rows.py')


def test_every_table_row_of_every_paper_has_its_config():
    problems = _tool().check()
    assert not problems, '\n'.join(problems)


def test_docs_paper_rows_is_generated_from_the_inventories():
    tool = _tool()
    with open(os.path.join(ROOT, 'docs', 'paper_rows.md')) as f:
        assert f.read() == tool.render(), 'docs/paper_rows.md is stale: run python .dev_scripts/paper_rows.py'


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)


GOOD = """\
paper: Toy paper
tables_in_paper: 2
tables:
  - table: 1
    caption: results
    rows:
      - row: Ours-T
        kind: own
        configs: [configs/fam/paper_tables/ours-t.py]
      - row: ResNet-50 RetinaNet
        kind: comparison
        configs: ['mmdet::retinanet/retinanet_r50_fpn_1x_coco.py']
      - row: SomeNet
        kind: comparison
        none: no implementation in OpenMMLab
  - table: 2
    caption: lost
    illegible: the stored text has only the caption
"""


@pytest.fixture
def toy_root(tmp_path):
    _write(str(tmp_path / 'configs' / 'fam' / 'paper_tables' / 'ours-t.py'), 'model = dict()\n')
    return tmp_path


def test_a_complete_toy_inventory_passes(toy_root):
    _write(str(toy_root / 'configs' / 'fam' / 'paper_rows.yml'), GOOD)
    assert _tool().check(str(toy_root)) == []


@pytest.mark.parametrize('old, new, expected', [
    ('configs: [configs/fam/paper_tables/ours-t.py]', 'none: not built', 'needs a config'),
    ('configs: [configs/fam/paper_tables/ours-t.py]', "configs: ['mmdet::retinanet/retinanet_r50_fpn_1x_coco.py']",
     'needs one of our configs'),
    ('configs: [configs/fam/paper_tables/ours-t.py]', 'configs: [configs/fam/paper_tables/ours-x.py]',
     "is not a config file under configs/"),
    ("'mmdet::retinanet/retinanet_r50_fpn_1x_coco.py'", "'mmdet::retinanet/no_such_config.py'",
     'is not a config shipped with mmdet'),
    ("'mmdet::retinanet", "'timm::retinanet", "unknown package 'timm'"),
    ('tables_in_paper: 2', 'tables_in_paper: 3', 'tables must be listed as 1..3'),
    ('        none: no implementation in OpenMMLab\n', '', 'neither configs nor a `none` reason'),
    ('        kind: own\n', '        kind: ours\n', "kind 'ours' is not one of"),
    ('    illegible: the stored text has only the caption\n', '', 'has no rows'),
    ('      - row: SomeNet', '      - row: Ours-T', "row 'Ours-T' is listed twice"),
    ('        kind: own\n', '        kind: own\n        flops: 5\n', "unknown keys ['flops']"),
], ids=['own-without-config', 'own-only-upstream', 'missing-file', 'missing-upstream', 'unknown-package',
        'table-count', 'comparison-without-reason', 'unknown-kind', 'empty-table', 'duplicate-row',
        'unknown-key'])
def test_inventory_problems_are_named(toy_root, old, new, expected):
    assert old in GOOD
    _write(str(toy_root / 'configs' / 'fam' / 'paper_rows.yml'), GOOD.replace(old, new, 1))
    problems = _tool().check(str(toy_root))
    assert any(expected in p for p in problems), problems


def test_a_paper_table_config_of_no_row_and_a_family_without_inventory_are_named(toy_root):
    _write(str(toy_root / 'configs' / 'fam' / 'paper_rows.yml'), GOOD)
    _write(str(toy_root / 'configs' / 'fam' / 'ablations' / 'orphan.py'), 'model = dict()\n')
    os.makedirs(str(toy_root / 'configs' / 'other'))
    problems = _tool().check(str(toy_root))
    assert any('configs/fam/ablations/orphan.py is the config of no row' in p for p in problems), problems
    assert any('configs/other/paper_rows.yml is missing' in p for p in problems), problems


def test_a_text_row_may_say_why_it_has_no_config(toy_root):
    """Experiments the text reports without a table may be unconfigurable (the paper leaves them open); a table's
    own row may not."""
    text = GOOD + 'text:\n  - row: a text-only ablation\n    kind: baseline\n    none: its settings are not stated\n'
    _write(str(toy_root / 'configs' / 'fam' / 'paper_rows.yml'), text)
    tool = _tool()
    assert tool.check(str(toy_root)) == []
    assert '| a text-only ablation | baseline | none: its settings are not stated |' in tool.render(str(toy_root))
