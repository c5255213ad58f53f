"""init/shutdown cycles, use before init, process sets given to init, the
dynamic timeline, horovodrun's environment variables and the job secret
gone from os.environ after init (run under kolorun, 2 and 3 ranks). Leaves
the job initialised, as the session fixture expects.
"""

import os
import subprocess
import sys
import tempfile
import warnings

import pytest
import torch

import kolo.torch as hvd
from kolo.common.exceptions import HorovodInternalError

NOT_INIT = 'Horovod has not been initialized; use hvd.init().'


def test_horovod_environment_variables():
    assert os.environ['HOROVOD_RANK'] == str(hvd.rank())
    assert os.environ['HOROVOD_SIZE'] == str(hvd.size())
    assert os.environ['HOROVOD_LOCAL_RANK'] == str(hvd.local_rank())
    assert os.environ['HOROVOD_LOCAL_SIZE'] == str(hvd.local_size())
    assert os.environ['HOROVOD_CROSS_RANK'] == str(hvd.cross_rank())
    assert os.environ['HOROVOD_CROSS_SIZE'] == str(hvd.cross_size())
    assert os.environ['HOROVOD_HOSTNAME']
    assert hvd.is_homogeneous()


def test_job_secret_is_gone_from_os_environ_after_init():
    """kolo removes KOLO_SECRET from the process environment at init (the
    documentation says so); Python's copy goes too, so that os.environ and the
    programs started with it (subprocess) do not hand the secret on."""
    assert hvd.is_initialized()
    # (Booleans only: a failure must not print the secret.)
    in_environ = 'KOLO_SECRET' in os.environ
    assert not in_environ, 'KOLO_SECRET is still in os.environ'
    child = subprocess.run(
        [sys.executable, '-c',
         'import os; print("KOLO_SECRET" in os.environ)'],
        capture_output=True, text=True, timeout=60, check=True)
    assert child.stdout.strip() == 'False', 'a child process got KOLO_SECRET'


def test_fifty_init_shutdown_cycles():
    rank, size = hvd.rank(), hvd.size()
    for cycle in range(50):
        hvd.shutdown()
        assert not hvd.is_initialized()
        if cycle == 0:
            with pytest.raises(ValueError, match='not been initialized'):
                hvd.rank()
            with pytest.raises(ValueError, match='not been initialized'):
                hvd.size()
            with pytest.raises(HorovodInternalError) as e:
                hvd.allreduce(torch.ones(1))
            assert str(e.value) == NOT_INIT
            with pytest.raises(HorovodInternalError):
                hvd.barrier()
        hvd.init()
        assert (hvd.rank(), hvd.size()) == (rank, size)
        t = torch.full((2,), float(cycle))
        hvd.allreduce_(t, op=hvd.Sum)  # unnamed: the counter restarted
        assert torch.equal(t, torch.full((2,), float(cycle * size)))


def test_init_again_is_a_no_op_that_clears_handles():
    h = hvd.allreduce_async(torch.ones(1), name='cleared', op=hvd.Sum)
    hvd.init()  # no-op, but the handle map is emptied (as Horovod)
    assert hvd.synchronize(h) is None
    hvd.barrier()


def test_process_sets_given_to_init():
    n = hvd.size()
    hvd.shutdown()
    first = hvd.ProcessSet([n - 1])
    with pytest.raises(ValueError, match='is a duplicate'):
        hvd.init(process_sets=[first, hvd.ProcessSet([n - 1])])
    hvd.init(process_sets=[first])
    assert first.process_set_id == 1
    if first.included():
        got = hvd.allreduce(torch.ones(2), op=hvd.Sum, process_set=first)
        assert torch.equal(got, torch.ones(2))
    hvd.barrier()
    hvd.shutdown()
    assert first.process_set_id is None  # sets are reset at shutdown
    hvd.init(process_sets='dynamic')
    assert hvd.global_process_set.ranks == list(range(n))


def test_shutdown_with_unmatched_op_pending_does_not_hang():
    if hvd.rank() == 0:
        hvd.allreduce_async(torch.ones(1), name='never.matched')
    with warnings.catch_warnings(record=True):
        warnings.simplefilter('always')
        hvd.shutdown()  # returns; the pending op ended with an error
    hvd.init()
    t = torch.ones(1)
    hvd.allreduce_(t, op=hvd.Sum)
    assert t.item() == hvd.size()


def test_dynamic_timeline():
    with pytest.raises(ValueError, match='HOROVOD_TIMELINE=DYNAMIC'):
        hvd.start_timeline('/tmp/never-written.json')
    hvd.shutdown()
    os.environ['HOROVOD_TIMELINE'] = 'DYNAMIC'
    try:
        hvd.init()
        path = os.path.join(tempfile.mkdtemp(prefix='kolo-tl-'), 'tl.json')
        hvd.start_timeline(path, mark_cycles=True)
        hvd.allreduce(torch.ones(4), name='traced')
        hvd.stop_timeline()
        hvd.allreduce(torch.ones(4), name='untraced')
        hvd.barrier()
        if hvd.rank() == 0:
            text = open(path).read()
            assert 'allreduce.traced' in text
            assert 'untraced' not in text
            assert text.rstrip().endswith(']')
        else:
            assert not os.path.exists(path)
        hvd.shutdown()
    finally:
        del os.environ['HOROVOD_TIMELINE']
    hvd.init()
