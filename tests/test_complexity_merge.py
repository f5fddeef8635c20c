"""``tools/analysis/complexity.py --merge``: the rows it keeps get their "d" columns from the unrounded
measurements (the hidden block of docs/model_zoo.md), never from the 2-decimal cells."""
import os.path as osp

import pytest

from tools.analysis import params_flops as C
from toolcfg import load_tool

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
CFG = 'configs/posmlp/posmlp-t_8xb120_in1k.py'
REP = dict(params_m=21, gflops=1.10, source='a paper', input=None)


def _row(params_m, gflops, rep=REP, config=CFG):
    return dict(config=config, params_m=params_m, gflops=gflops, input='224x224', counted='whole model', note='',
                reported=dict(rep))


def _kept(md, rep=REP):
    rows = C.rows_from_markdown(md, [CFG])
    for r in rows:
        r['reported'] = dict(rep)
    return rows


def test_kept_rows_keep_the_unrounded_measurements_and_their_deltas():
    # 1.1044 GFLOPs vs the paper's 1.10: +0.4%; from the printed 1.10 it would be +0.0%
    md = C.markdown_table([_row(20.9449, 1.1044)])
    assert '| 20.94 | 1.10 |' in md and '| -0.3% |' in md and '| +0.4% |' in md
    assert f'{C.MEASUREMENTS_BEGIN}\nposmlp-t_8xb120_in1k 20.9449 1.1044\n{C.MEASUREMENTS_END}' in md
    kept = _kept(md)
    assert (kept[0]['params_m'], kept[0]['gflops']) == (20.9449, 1.1044) and 'printed' not in kept[0]
    assert C.markdown_table(kept) == md  # a merge that counts nothing changes nothing


def test_rows_of_a_file_without_measurements_keep_their_printed_deltas_until_the_paper_changes():
    md = C.markdown_table([_row(20.9449, 1.1044)])
    legacy = md.split(C.MEASUREMENTS_BEGIN)[0]  # as written before the block existed
    kept = _kept(legacy)
    assert kept[0]['gflops'] == 1.10 and kept[0]['printed']['d_flops'] == '+0.4%'
    assert not C.needs_recount(kept[0])
    assert '| +0.4% |' in C.markdown_table(kept)  # not the +0.0% of the rounded cells
    changed = _kept(legacy, rep=dict(REP, gflops=1.2))
    assert C.needs_recount(changed[0])
    with pytest.raises(ValueError, match=r"^posmlp-t_8xb120_in1k: the papers' numbers changed and only rounded "
                                         r'measurements are known; count the config again$'):
        C.markdown_table(changed)
    # the paper's FLOPs were at another input (no "d" printed); now they are comparable: a "d" is needed
    other_input = C.markdown_table([_row(20.9449, 1.1044, rep=dict(REP, input='512x512'))])
    assert '| (paper at 512x512) |' in other_input
    kept = _kept(other_input.split(C.MEASUREMENTS_BEGIN)[0])
    assert C.needs_recount(kept[0])
    kept = _kept(other_input.split(C.MEASUREMENTS_BEGIN)[0], rep=dict(REP, input='512x512'))
    assert not C.needs_recount(kept[0]) and '| (paper at 512x512) |' in C.markdown_table(kept)


def test_a_hand_edited_cell_that_contradicts_the_measurements_is_refused():
    md = C.markdown_table([_row(20.9449, 1.1044)]).replace('| 20.94 |', '| 20.95 |')
    with pytest.raises(ValueError, match='posmlp-t_8xb120_in1k: the table says 20.95M / 1.10 GFLOPs but the '
                                         'measurements block 20.9449M / 1.1044 GFLOPs; regenerate the file'):
        C.rows_from_markdown(md, [CFG])


def test_merge_recounts_a_kept_row_whose_paper_changed_and_that_has_no_measurements(tmp_path, monkeypatch):
    """The tool counts the requested config, keeps a row with measurements as it is and counts again a row
    of an older file (rounded cells only) whose papers' numbers are no longer the printed ones."""
    tool = load_tool('tools', 'analysis', 'complexity.py')
    monkeypatch.chdir(ROOT)
    t, s = 'configs/cpvt/cpvt-ti_8xb128_in1k.py', 'configs/cpvt/cpvt-ti-gap_8xb128_in1k.py'
    b = 'configs/cpvt/cpvt-b_8xb128_in1k.py'
    old = C.markdown_table([_row(1.0, None, config=t), _row(2.0, None, config=s),
                            _row(3.0, None, config=b, rep=dict(REP, params_m=3))])
    # s: an older row without measurements, its paper params printed as 21.0 (now 6); b: a row with measurements
    old = old.replace('cpvt-ti-gap_8xb128_in1k 2.0 n/a\n', '')
    out = tmp_path / 'zoo.md'
    out.write_text(old)
    assert tool.main(['--configs', 'configs/cpvt', '--pattern', 'cpvt-ti_8xb128_in1k.py', '--no-flops',
                      '--merge', '--out', str(out)]) == 0
    rows = {osp.basename(r['config']): r for r in C.rows_from_markdown(out.read_text(), C.find_configs())}
    assert rows['cpvt-b_8xb128_in1k.py']['params_m'] == 3.0  # kept as it was
    for name in ('cpvt-ti_8xb128_in1k.py', 'cpvt-ti-gap_8xb128_in1k.py'):  # counted
        assert 5 < rows[name]['params_m'] < 6 and 'printed' not in rows[name], rows[name]
