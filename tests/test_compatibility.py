"""docs/compatibility.md states what tools/misc/compatibility.py obtains: upstream detectors, segmentors,
recognizers and classifier heads with our backbones, two training steps and one inference at odd sizes.

The default suite reruns a representative set in one process (one consumer per library, a refusal among them)
and compares each result with the document's cell and footnote; the ``slow`` test reruns every documented cell
and compares the whole generated part (``tools/misc/compatibility.py --write`` runs the whole matrix)."""
import pytest

from toolcfg import load_tool

# one per library and kind of consumer: an FPN detector, a segmentor reading by in_index, a 2-D recognizer
# through SingleTensorBackbone, a 3-D recognizer, the refused TimeSformer head, a classifier head
REPRESENTATIVE = ['RetinaNet/PosMLP', 'UperNet/WaveMLP', 'TSN/PVTPEG', 'I3D head/PosMLPVideo',
                  'TimeSformer head/PosMLPVideo', 'LinearClsHead (Swin)/PVTPEG']


@pytest.fixture(scope='module')
def tool():
    return load_tool('tools', 'misc', 'compatibility.py')


def _mark(result):
    return '✓' if result == 'passes' else 'refused' if result.startswith('refused') else '✗'


def test_document_names_only_cases_of_the_tool(tool):
    documented = tool.documented_cells()
    assert set(documented) <= set(tool.all_cases())
    assert set(REPRESENTATIVE) <= set(documented), 'run tools/misc/compatibility.py --write'


def test_representative_cases_are_as_documented(tool):
    with open(tool.DOC) as f:
        doc = f.read()
    documented = tool.documented_cells(doc)
    results = tool.run_matrix(REPRESENTATIVE, procs=(1, ))
    for case in REPRESENTATIVE:
        got = results[case][1]
        assert documented[case][1] == _mark(got), f'{case}: the document says {documented[case][1]}, the run {got}'
        if got != 'passes':
            assert got in doc, f'{case}: the sentence {got!r} is not the documented one'
    assert results['TimeSformer head/PosMLPVideo'][1].startswith('refused: cls_head TimeSformerHead classifies')


@pytest.mark.parametrize('case', ['DINO/PVTPEG', 'Deformable DETR/WaveMLP'])
def test_a_case_starts_from_the_same_weights_every_time(tool, case):
    """DETR-style models allocate ``level_embed`` without values; the case sets it (``init_weights()``, as
    mmengine's Runner does), so a rerun starts from the same weights whatever memory it is given."""
    import torch
    first = {k: v.clone() for k, v in tool.case_model(case)[1].state_dict().items()}
    garbage = torch.full((1 << 22, ), float('nan'))  # freed memory that the next allocation may reuse
    del garbage
    second = tool.case_model(case)[1].state_dict()
    assert first.keys() == second.keys()
    assert [k for k in first if not torch.equal(first[k], second[k])] == []


@pytest.mark.slow
@pytest.mark.timeout(7200)  # 76 cells, 21 also in two processes: 2.5 min on the idle 2-vCPU VM, over 15 min loaded
def test_every_documented_case_reruns_as_documented(tool):
    """Every cell of the document, in the numbers of processes it states, rerun; the generated part is what the
    tool renders from those results."""
    with open(tool.DOC) as f:
        doc = f.read()
    documented = tool.documented_cells(doc)
    results = {}
    for procs in (1, 2):
        cases = [c for c, per in documented.items() if procs in per]
        if procs == 1:
            results.update({c: {1: tool.run_case(c)} for c in cases})
        elif cases:
            for c, r in tool.run_distributed(cases).items():
                results.setdefault(c, {})[2] = r
    assert tool.generated_part(doc) == tool.render({c: results[c] for c in tool.all_cases() if c in results})
