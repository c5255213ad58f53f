"""Ranks that stop early must never strand the others (issue 39, point 1),
through kolorun with real kolo.torch processes:

- a rank that calls hvd.shutdown() and exits 0 while another waits in an
  allreduce: the waiting rank's op fails within seconds with an error naming
  the rank that left, and the job ends with exit 0;
- a rank whose synchronize() is interrupted (SIGINT caught as
  KeyboardInterrupt) keeps the op in flight: poll() still knows the handle
  and a later synchronize() takes the right result;
- the same interrupted rank that shuts down instead: the op fails on the
  other rank at once, naming it.

Each job runs with a deadline that catches a hang.
"""

import os
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.skipif(
    'KOLO_COORDINATOR' in os.environ or 'KOLO_BIN_DIR' not in os.environ,
    reason='runs kolorun itself (tests/python/run.sh 1 ...)')

PRELUDE = textwrap.dedent('''\
    import os, signal, sys, threading, time
    import torch
    import kolo.torch as hvd
    hvd.init()
    rank = hvd.rank()
    def say(*words):
        print(*words, flush=True)
    def interrupt_in(seconds):
        threading.Timer(seconds, os.kill,
                        (os.getpid(), signal.SIGINT)).start()
    ''')


def kolorun(tmp_path, body, np=2, timeout=60):
    script = tmp_path / 'job.py'
    script.write_text(PRELUDE + textwrap.dedent(body))
    argv = [os.path.join(os.environ['KOLO_BIN_DIR'], 'kolorun'), '-np',
            str(np), '--start-timeout', '60', sys.executable, str(script)]
    start = time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True,
                         timeout=timeout, check=False)
    return out.returncode, out.stdout + out.stderr, time.monotonic() - start


def test_rank_that_shuts_down_early_fails_the_others_op(tmp_path):
    code, text, _ = kolorun(tmp_path, '''\
        hvd.allreduce(torch.ones(2), name='warm-up')
        if rank == 1:
            time.sleep(0.5)  # rank 0 waits in 'x' meanwhile
            hvd.shutdown()
            say('LEFT')
            sys.exit(0)
        start = time.monotonic()
        try:
            hvd.allreduce(torch.ones(2), name='x')
            say('UNEXPECTED success')
        except Exception as e:  # pylint: disable=broad-except
            say('FAILED', type(e).__name__, f'{time.monotonic() - start:.1f}',
                str(e))
        hvd.shutdown()
        ''')
    assert 'LEFT' in text, text
    failed = [l for l in text.splitlines() if 'FAILED' in l]
    assert len(failed) == 1, text
    words = failed[0].split('FAILED', 1)[1].split()
    assert float(words[1]) < 10, text
    assert 'rank 1' in failed[0] and 'finished execution' in failed[0], text
    assert code == 0, text


def test_interrupted_synchronize_keeps_the_op(tmp_path):
    code, text, _ = kolorun(tmp_path, '''\
        t = torch.full((1 << 16,), float(rank + 1))
        if rank == 0:
            time.sleep(3)  # rank 1 is interrupted while it waits for this
            out = hvd.allreduce(t, name='allreduce.big', op=hvd.Sum)
        else:
            h = hvd.allreduce_async(t, name='allreduce.big', op=hvd.Sum)
            interrupt_in(1)
            try:
                hvd.synchronize(h)
                say('UNEXPECTED not interrupted')
            except KeyboardInterrupt:
                say('INTERRUPTED poll', hvd.poll(h))
            out = hvd.synchronize(h)
        say('RESULT', rank, bool(torch.all(out == 3.0)))
        hvd.shutdown()
        ''')
    assert 'INTERRUPTED poll False' in text, text
    assert 'RESULT 0 True' in text and 'RESULT 1 True' in text, text
    assert code == 0, text


def test_interrupted_rank_that_shuts_down_fails_the_others_op(tmp_path):
    code, text, _ = kolorun(tmp_path, '''\
        t = torch.full((1 << 16,), float(rank + 1))
        if rank == 1:
            h = hvd.allreduce_async(t, name='allreduce.big', op=hvd.Sum)
            interrupt_in(0.5)
            try:
                hvd.synchronize(h)
            except KeyboardInterrupt:
                say('INTERRUPTED')
            try:
                hvd.shutdown()  # abandons the op
            except Exception as e:  # pylint: disable=broad-except
                say('SHUTDOWN says', str(e))
            sys.exit(0)
        time.sleep(2)
        start = time.monotonic()
        try:
            hvd.allreduce(t, name='allreduce.big', op=hvd.Sum)
            say('UNEXPECTED success')
        except Exception as e:  # pylint: disable=broad-except
            say('FAILED', f'{time.monotonic() - start:.1f}', str(e))
        hvd.shutdown()
        ''')
    assert 'INTERRUPTED' in text, text
    failed = [l for l in text.splitlines() if 'FAILED' in l]
    assert len(failed) == 1, text
    assert float(failed[0].split('FAILED', 1)[1].split()[0]) < 10, text
    assert 'rank 1' in failed[0], text
    assert code == 0, text
