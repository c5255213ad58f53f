"""examples/torch_train.py (a Horovod-style script on kolo.torch) at 1 and 2
ranks: the loss curves agree within the tolerance its docstring states
(1 % relative; float32 sums in another order), and it learns."""

import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, '..', '..', 'examples', 'torch_train.py')

pytestmark = pytest.mark.skipif(
    'KOLO_COORDINATOR' in os.environ or 'KOLO_BIN_DIR' not in os.environ,
    reason='runs kolorun itself (tests/python/run.sh 1 ...)')


def run(np_):
    out = subprocess.run(
        [os.path.join(os.environ['KOLO_BIN_DIR'], 'kolorun'), '-np', str(np_),
         '--start-timeout', '120', sys.executable, SCRIPT, '--steps', '60'],
        capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    losses = [float(v) for v in re.findall(r'LOSS step=\d+ loss=([0-9.]+)',
                                           out.stdout)]
    final = re.search(r'FINAL loss=([0-9.]+) accuracy=([0-9.]+)', out.stdout)
    assert losses and final, out.stdout
    return losses, float(final.group(1)), float(final.group(2))


def test_two_ranks_follow_the_single_process_curve():
    one, final1, acc1 = run(1)
    two, final2, acc2 = run(2)
    assert len(one) == len(two) == 3
    for a, b in zip(one, two):
        assert abs(a - b) <= 0.01 * a, (one, two)
    assert abs(final1 - final2) <= 0.01 * final1
    assert one[-1] < one[0]  # it learns
    assert acc1 > 0.2 and acc2 > 0.2  # well above chance (0.1)
