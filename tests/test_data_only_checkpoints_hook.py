"""``mmposmlp.DataOnlyCheckpointsHook`` under mmengine's plain ``Runner`` (what mmseg 1.2's ``tools/test.py``
builds whatever ``runner_type`` says): with the hook in ``default_hooks`` the run's checkpoint loads go through
the data-only loader; without it, through mmengine's own. Each case runs in a fresh process, because the
loader registration is process-wide."""
import os
import os.path as osp
import subprocess
import sys
import textwrap

import pytest
import torch

from toolcfg import repo_path

SCRIPT = textwrap.dedent('''
    import sys
    import torch.nn as nn
    from mmengine.model import BaseModel
    from mmengine.runner import Runner

    class Tiny(BaseModel):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def forward(self, inputs, data_samples=None, mode='tensor'):
            return self.fc(inputs)

    path, work_dir, with_hook = sys.argv[1], sys.argv[2], sys.argv[3] == '1'
    hooks = dict(data_only_checkpoints=dict(type='mmposmlp.DataOnlyCheckpointsHook')) if with_hook else {}
    runner = Runner(model=Tiny(), work_dir=work_dir, default_hooks=hooks)
    runner.call_hook('before_run')
    try:
        runner.load_checkpoint(path)
    except Exception as e:  # noqa: BLE001
        print('REFUSED:', type(e).__name__, str(e).splitlines()[0] if str(e) else '')
    else:
        print('LOADED')
''')


class _RunsShell:
    """Pickles as ``os.system(command)``: executed by any loader that builds arbitrary objects."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


def _load_under_plain_runner(tmp_path, checkpoint, with_hook):
    script = tmp_path / 'load.py'
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=repo_path())
    res = subprocess.run([sys.executable, str(script), str(checkpoint), str(tmp_path / 'work'),
                          '1' if with_hook else '0'], capture_output=True, text=True, cwd=str(tmp_path), env=env,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


@pytest.fixture
def evil_checkpoint(tmp_path):
    marker = tmp_path / 'MARKER'
    path = tmp_path / 'evil.pth'
    torch.save({'state_dict': _RunsShell(f'touch {marker}')}, str(path))
    return path, marker


def test_the_hook_routes_the_plain_runners_loads_through_the_data_only_loader(tmp_path, evil_checkpoint):
    path, marker = evil_checkpoint
    out = _load_under_plain_runner(tmp_path, path, with_hook=True)
    assert 'REFUSED: UnsafeCheckpointError' in out and 'refusing to load' in out, out
    assert not marker.exists()


def test_without_the_hook_the_plain_runner_uses_mmengines_loader(tmp_path, evil_checkpoint):
    """The control: the refusal above comes from the hook, not from something else in the process."""
    path, marker = evil_checkpoint
    out = _load_under_plain_runner(tmp_path, path, with_hook=False)
    assert 'UnsafeCheckpointError' not in out, out
    assert not marker.exists()  # torch 2.6+ loads weights-only by default


def test_the_hook_loads_an_ordinary_checkpoint(tmp_path):
    path = tmp_path / 'plain.pth'
    torch.save({'state_dict': {'fc.weight': torch.ones(2, 2), 'fc.bias': torch.zeros(2)}, 'meta': {}}, str(path))
    assert _load_under_plain_runner(tmp_path, path, with_hook=True).strip().endswith('LOADED')
    assert osp.isfile(path)
