"""A killed training process takes its children along (Linux ``PR_SET_PDEATHSIG``).

* ``end_with_parent``: a rank started by torchrun (its own session) ends when the launcher is SIGKILLed;
* ``forked_children_end_with_parent`` (``ExactResumeHook``): the data loader's forked workers end when the
  training process is SIGKILLed, instead of blocking forever on a full pipe.
"""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.skipif(not sys.platform.startswith('linux'), reason='PR_SET_PDEATHSIG is Linux-only')

# prints the pid of the process that must end with it, then sleeps until killed
PARENT = textwrap.dedent('''
    import os, subprocess, sys, time
    sys.path.insert(0, {root!r})
    mode = sys.argv[1]
    if mode == 'fork':
        from mmposmlp.engine.resume_state import forked_children_end_with_parent
        if sys.argv[2] == 'on':
            forked_children_end_with_parent()
        pid = os.fork()
        if pid == 0:  # a data worker
            time.sleep(120)
            os._exit(0)
    else:  # a rank in its own session, as torchrun starts it
        code = "import sys, time; sys.path.insert(0, {root!r})\\n"
        if sys.argv[2] == 'on':
            code += "from mmposmlp.utils.dist import end_with_parent; end_with_parent()\\n"
        code += 'print("ready", flush=True); time.sleep(120)'
        child = subprocess.Popen([sys.executable, '-c', code], start_new_session=True, stdout=subprocess.PIPE,
                                 text=True)
        child.stdout.readline()
        pid = child.pid
    print(pid, flush=True)
    time.sleep(120)
''').format(root=ROOT)


def _alive(pid):
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().split(') ')[1][0] not in 'ZX'
    except FileNotFoundError:
        return False


def _kill_parent_and_watch_child(mode, switch, wait=5.0):
    parent = subprocess.Popen([sys.executable, '-c', PARENT, mode, switch], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    try:
        assert _alive(child)
        parent.kill()
        parent.wait(10)
        deadline = time.monotonic() + wait
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        return not _alive(child)
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


@pytest.mark.parametrize('mode', ['fork', 'session'])
def test_children_end_within_seconds_of_a_sigkilled_parent(mode):
    assert _kill_parent_and_watch_child(mode, 'on'), f'{mode}: the child outlived its SIGKILLed parent'


def test_without_it_a_child_outlives_the_parent():
    """The control: the same process without the setting stays behind (what the fix prevents)."""
    assert not _kill_parent_and_watch_child('session', 'off', wait=1.0)
