"""Every row of every table in the five papers, and what configures it: ``configs/<family>/paper_rows.yml``.

Checks the inventories and writes ``docs/paper_rows.md`` from them::

    python .dev_scripts/paper_rows.py            # check, then write docs/paper_rows.md
    python .dev_scripts/paper_rows.py --check    # check only; exit 1 naming every problem

An inventory (one per family folder) lists the paper's tables 1..N in order, each with its rows::

    paper: PosMLP (Wang et al., ACM MM 2022)
    tables_in_paper: 11
    tables:
      - table: 1
        caption: Comparison of RPE module variants (ImageNet1K^0.5)
        rows:
          - row: PoSGU GLRPE (PosMLP-T)
            kind: own
            configs: [configs/posmlp/paper_tables/posmlp-t-glrpe_8xb120_in1k-half.py]
          - row: RegNetY-4G
            kind: comparison
            none: no OpenMMLab implementation of RegNetY
    text:            # experiments the text reports without a table (optional, same row form; `none` allowed)
      - row: ...

Row kinds: ``own`` (the paper's model, variant or ablation: needs at least one of our configs), ``baseline``
(a model the paper trains itself for comparison: needs a config, ours or upstream ``pkg::path``),
``comparison`` (another paper's reported figure: an upstream or our config where one exists, else ``none``
with the reason), ``spec`` (a row of an architecture / hyper-parameter table: the configs that build it).
A table whose body the stored paper text lacks has ``illegible: <reason>``, and only the rows the text names.
"""
import argparse
import glob
import os
import os.path as osp
import sys

import yaml

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
KINDS = ('own', 'baseline', 'comparison', 'spec')
ROW_KEYS = {'row', 'kind', 'configs', 'none', 'note'}
TABLE_KEYS = {'table', 'caption', 'rows', 'illegible', 'note'}
TOP_KEYS = {'paper', 'tables_in_paper', 'tables', 'text'}
UPSTREAM_PACKAGES = ('mmpretrain', 'mmdet', 'mmseg', 'mmaction')
# paper-table configs live here; each must be the config of some row
ROW_CONFIG_DIRS = ('paper_tables', 'ablations', 'baselines')


def inventory_paths(root=ROOT):
    return sorted(glob.glob(osp.join(root, 'configs', '*', 'paper_rows.yml')))


def load(path):
    with open(path) as f:
        return yaml.safe_load(f)


def _upstream_config_exists(ref):
    """``mmdet::retinanet/x.py`` -> whether that file ships in the installed package's ``.mim/configs``."""
    package, _, rel = ref.partition('::')
    if package not in UPSTREAM_PACKAGES:
        return False, (f'unknown package {package!r} in {ref!r}; use one of {", ".join(UPSTREAM_PACKAGES)}')
    try:
        from mmengine.utils import get_installed_path
        base = get_installed_path('mmaction2' if package == 'mmaction' else package)
    except Exception:  # noqa: BLE001 - the package is not installed
        return False, f'{package} is not installed, so {ref!r} cannot be checked'
    path = osp.join(base, '.mim', 'configs', rel)
    if not osp.isfile(path):
        path = osp.join(base, 'configs', rel)
    return osp.isfile(path), f'{ref!r} is not a config shipped with {package}'


def _configs(row):
    """A row's configs as a list (one may be written as a plain string)."""
    configs = row.get('configs') or []
    return [configs] if isinstance(configs, str) else configs


def _check_row(where, row, problems, referenced, root, upstream_cache, in_text=False):
    if not isinstance(row, dict):
        problems.append(f'{where}: a row must be a mapping with row/kind/configs|none, got {row!r}')
        return
    unknown = set(row) - ROW_KEYS
    if unknown:
        problems.append(f'{where}: unknown keys {sorted(unknown)}; a row takes {sorted(ROW_KEYS)}')
    label = row.get('row')
    if not label or not isinstance(label, str):
        problems.append(f'{where}: a row needs a `row` label')
    where = f'{where} {label!r}'
    kind = row.get('kind')
    if kind not in KINDS:
        problems.append(f'{where}: kind {kind!r} is not one of {KINDS}')
    configs = _configs(row)
    if configs and row.get('none'):
        problems.append(f'{where}: has both configs and `none`; keep one')
    if not configs and not row.get('none'):
        problems.append(f'{where}: has neither configs nor a `none` reason')
    if kind in ('own', 'baseline', 'spec') and not configs and not in_text:
        problems.append(f'{where}: a {kind} row needs a config (`none` is only for comparison rows and text rows)')
    ours = [c for c in configs if '::' not in c]
    if kind == 'own' and configs and not ours:
        problems.append(f'{where}: an own row needs one of our configs (configs/...), not only upstream ones')
    for cfg in configs:
        if '::' in cfg:
            if cfg not in upstream_cache:
                upstream_cache[cfg] = _upstream_config_exists(cfg)
            ok, why = upstream_cache[cfg]
            if not ok:
                problems.append(f'{where}: {why}')
        elif not (cfg.startswith('configs/') and cfg.endswith('.py') and osp.isfile(osp.join(root, cfg))):
            problems.append(f'{where}: {cfg!r} is not a config file under configs/')
        else:
            referenced.add(osp.normpath(cfg))


def check(root=ROOT):
    """All problems of all inventories, one sentence each (empty: everything holds)."""
    problems, upstream_cache = [], {}
    paths = inventory_paths(root)
    families = sorted(d for d in os.listdir(osp.join(root, 'configs'))
                      if osp.isdir(osp.join(root, 'configs', d)) and not d.startswith('_'))
    have = {osp.basename(osp.dirname(p)) for p in paths}
    for family in families:
        if family not in have:
            problems.append(f'configs/{family}/paper_rows.yml is missing; every family lists its papers\' rows')
    for path in paths:
        rel = osp.relpath(path, root)
        family_dir = osp.dirname(path)
        data = load(path)
        referenced = set()
        if not isinstance(data, dict):
            problems.append(f'{rel}: not a mapping')
            continue
        unknown = set(data) - TOP_KEYS
        if unknown:
            problems.append(f'{rel}: unknown keys {sorted(unknown)}; the file takes {sorted(TOP_KEYS)}')
        tables = data.get('tables') or []
        numbers = [t.get('table') for t in tables if isinstance(t, dict)]
        expected = list(range(1, int(data.get('tables_in_paper') or 0) + 1))
        if numbers != expected:
            problems.append(f'{rel}: tables must be listed as 1..{len(expected)} in order '
                            f'(tables_in_paper: {len(expected)}), got {numbers}')
        for table in tables:
            if not isinstance(table, dict):
                problems.append(f'{rel}: a table must be a mapping, got {table!r}')
                continue
            where = f'{rel} Table {table.get("table")}'
            unknown = set(table) - TABLE_KEYS
            if unknown:
                problems.append(f'{where}: unknown keys {sorted(unknown)}; a table takes {sorted(TABLE_KEYS)}')
            if not table.get('caption'):
                problems.append(f'{where}: needs a caption')
            rows = table.get('rows') or []
            if not rows and not table.get('illegible'):
                problems.append(f'{where}: has no rows; list them or say why with `illegible`')
            labels = [r.get('row') for r in rows if isinstance(r, dict)]
            for label in sorted({x for x in labels if labels.count(x) > 1}, key=str):
                problems.append(f'{where}: row {label!r} is listed twice')
            for row in rows:
                _check_row(where, row, problems, referenced, root, upstream_cache)
        for row in data.get('text') or []:
            _check_row(f'{rel} text', row, problems, referenced, root, upstream_cache, in_text=True)
        for sub in ROW_CONFIG_DIRS:
            for cfg in sorted(glob.glob(osp.join(family_dir, sub, '*.py'))):
                cfg_rel = osp.normpath(osp.relpath(cfg, root))
                if cfg_rel not in referenced:
                    problems.append(f'{rel}: {cfg_rel} is the config of no row; add it to its table row')
    return problems


def _link(cfg):
    if '::' in cfg:
        return f'`{cfg}`'
    return f'[{osp.splitext(osp.basename(cfg))[0]}](../{cfg})'


def render(root=ROOT):
    out = ['# Every row of the papers\' tables, and its config', '',
           '<!-- generated by .dev_scripts/paper_rows.py from configs/<family>/paper_rows.yml; do not edit -->', '',
           'Kinds: **own** = the paper\'s model, variant or ablation (our config); **baseline** = a model the '
           'paper trains itself for comparison; **comparison** = another paper\'s reported figure (an '
           'upstream OpenMMLab config where one exists); **spec** = a row of an architecture table. Upstream '
           'configs are named `package::path` (mmengine\'s cross-library form).', '']
    summary = ['| family | own + baseline + spec rows configured | comparison rows with a config | '
               'comparison rows without | tables without a legible body |', '|---|---|---|---|---|']
    body = []
    for path in inventory_paths(root):
        family = osp.basename(osp.dirname(path))
        data = load(path)
        counts = dict(needed=0, needed_ok=0, cmp_ok=0, cmp_none=0, illegible=0)
        body += [f'## {family}: {data.get("paper", "")}', '']
        sections = [(f'Table {t["table"]}: {t.get("caption", "")}', t) for t in data.get('tables') or []]
        if data.get('text'):
            sections.append(('Reported in the text, without a table', {'rows': data['text']}))
        for title, table in sections:
            body += [f'### {title}', '']
            if table.get('illegible'):
                counts['illegible'] += 1
                body += [f'Not legible in the stored paper: {table["illegible"]}', '']
                if not table.get('rows'):
                    continue
            if table.get('note'):
                body += [table['note'], '']
            body += ['| row | kind | config |', '|---|---|---|']
            for row in table.get('rows') or []:
                configs = _configs(row)
                if row.get('kind') == 'comparison':
                    counts['cmp_ok' if configs else 'cmp_none'] += 1
                else:
                    counts['needed'] += 1
                    counts['needed_ok'] += bool(configs)
                cell = ', '.join(_link(c) for c in configs) if configs else f'none: {row.get("none", "")}'
                if row.get('note'):
                    cell += f' ({row["note"]})'
                body.append(f'| {row.get("row")} | {row.get("kind")} | {cell} |')
            body.append('')
        summary.append(f'| {family} | {counts["needed_ok"]} / {counts["needed"]} | {counts["cmp_ok"]} | '
                       f'{counts["cmp_none"]} | {counts["illegible"]} |')
    return '\n'.join(out + summary + [''] + body).rstrip() + '\n'


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--check', action='store_true', help='check only, write nothing')
    args = parser.parse_args(argv)
    problems = check()
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    if not args.check:
        with open(osp.join(ROOT, 'docs', 'paper_rows.md'), 'w') as f:
            f.write(render())
    return 0


if __name__ == '__main__':
    sys.exit(main())
