"""The kolo package in one process, without a job: module layout, build
flags, constants, checks that come before init, ProcessSet, Compression,
the message when torch is missing.
"""

import ctypes
import os
import subprocess
import sys
import tempfile

import pytest
import torch

import kolo
import kolo.torch as hvd

NOT_INIT = 'Horovod has not been initialized; use hvd.init().'


def test_module_layout():
    import kolo.common.exceptions as exc
    import kolo.common.process_sets as ps
    import kolo.torch.compression as comp
    import kolo.torch.mpi_ops as ops
    assert issubclass(exc.HorovodInternalError, RuntimeError)
    assert issubclass(exc.HostsUpdatedInterrupt, RuntimeError)
    assert exc.HostsUpdatedInterrupt(True).skip_sync is True
    assert hvd.HorovodInternalError is exc.HorovodInternalError
    assert hvd.ProcessSet is ps.ProcessSet is kolo.ProcessSet
    assert hvd.Compression is comp.Compression
    assert ops.allreduce is hvd.allreduce
    assert callable(ops.is_homogeneous)


def test_constants_and_build_flags_before_init():
    assert (hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max,
            hvd.Product) == (0, 1, 2, 3, 4, 5)
    assert not hvd.is_initialized()
    assert hvd.gloo_built() is True and hvd.gloo_enabled() is True
    assert hvd.mpi_built() is False and hvd.mpi_enabled() is False
    nccl = hvd.nccl_built()
    assert isinstance(nccl, int) and not isinstance(nccl, bool)
    assert isinstance(hvd.cuda_built(), bool)
    if hvd.cuda_built():
        # The version of the NCCL library loaded with kolo (kolo builds CUDA
        # with NCCL only), as NCCL itself reports it.
        lib = ctypes.CDLL('libnccl.so.2')
        version = ctypes.c_int()
        assert lib.ncclGetVersion(ctypes.byref(version)) == 0
        assert nccl == version.value and nccl >= 20000
    else:
        assert nccl == 0
    for flag in (hvd.ddl_built, hvd.ccl_built, hvd.rocm_built):
        assert flag() is False
    with pytest.raises(ValueError, match='MPI is not enabled'):
        hvd.mpi_threads_supported()


def test_use_before_init():
    for getter in (hvd.rank, hvd.size, hvd.local_rank, hvd.local_size,
                   hvd.cross_rank, hvd.cross_size):
        with pytest.raises(ValueError) as e:
            getter()
        assert str(e.value) == NOT_INIT
    with pytest.raises(hvd.HorovodInternalError) as e:
        hvd.allreduce(torch.ones(2))
    assert str(e.value) == NOT_INIT
    for call in (lambda: hvd.allgather(torch.ones(2)),
                 lambda: hvd.broadcast_(torch.ones(2), 0),
                 lambda: hvd.alltoall(torch.ones(2)),
                 lambda: hvd.reducescatter(torch.ones(2)),
                 hvd.join, hvd.barrier):
        with pytest.raises(hvd.HorovodInternalError):
            call()
    with pytest.raises(ValueError, match='not been initialized'):
        hvd.start_timeline('/tmp/x.json')
    with pytest.raises(ValueError, match='not been initialized'):
        hvd.stop_timeline()
    with pytest.raises(ValueError, match='not been initialized'):
        hvd.add_process_set([0])
    hvd.shutdown()  # a no-op when not initialised


def test_tensor_checks_come_before_init():
    with pytest.raises(ValueError, match=r'^Tensor type torch.ComplexDoubleTensor'
                                         r' is not supported.$'):
        hvd.allreduce(torch.ones(2, dtype=torch.complex128))
    with pytest.raises(ValueError, match='^Tensor is required to be contiguous.$'):
        hvd.allreduce_(torch.ones(3, 3).t())
    with pytest.raises(ValueError, match='is not supported'):
        hvd.broadcast(torch.ones(2, 2).to_sparse(), 0)


def test_process_set_object():
    ps = hvd.ProcessSet([3, 1, 2])
    assert ps.ranks == [1, 2, 3] and ps.process_set_id is None
    assert ps.mpi_comm is None
    assert str(ps) == 'ProcessSet(process_set_id=None, ranks=[1, 2, 3], mpi_comm=None)'
    assert ps != hvd.ProcessSet([1, 2, 3])  # identity, as Horovod
    assert ps.size() is None and ps.included() is None
    with pytest.raises(ValueError):
        hvd.ProcessSet([0, '1'])
    assert hvd.global_process_set.process_set_id == 0
    assert hvd.remove_process_set is kolo.remove_process_set


def test_compression():
    x = torch.linspace(-1, 1, 7, dtype=torch.float64)
    c, ctx = hvd.Compression.fp16.compress(x)
    assert c.dtype is torch.float16 and ctx is torch.float64
    back = hvd.Compression.fp16.decompress(c, ctx)
    assert back.dtype is torch.float64
    assert torch.equal(back, x.half().double())
    i = torch.arange(3)
    c, ctx = hvd.Compression.fp16.compress(i)
    assert c is i and hvd.Compression.fp16.decompress(c, ctx) is i
    c, ctx = hvd.Compression.none.compress(x)
    assert c is x and hvd.Compression.none.decompress(c, ctx) is x


def test_init_refuses_comm_and_bad_process_sets():
    with pytest.raises(ValueError, match='MPI'):
        hvd.init(comm=[0, 1])
    ps = hvd.ProcessSet([0])
    with pytest.raises(ValueError, match='entry number 1 is a duplicate'):
        hvd.init(process_sets=[ps, ps])
    assert not hvd.is_initialized()


def test_missing_torch_is_explained():
    fake = tempfile.mkdtemp(prefix='kolo-notorch-')
    os.makedirs(os.path.join(fake, 'torch'))
    with open(os.path.join(fake, 'torch', '__init__.py'), 'w') as f:
        f.write("raise ImportError('No module named torch (simulated)')\n")
    env = dict(os.environ)
    env['PYTHONPATH'] = fake + os.pathsep + env.get('PYTHONPATH', '')
    proc = subprocess.run([sys.executable, '-c', 'import kolo.torch'],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert 'apt-get install -y python3-torch' in proc.stderr
    assert '/usr/bin/python3' in proc.stderr
    # kolo itself (NumPy arrays) works without torch
    proc = subprocess.run(
        [sys.executable, '-c',
         'import kolo, numpy; print(kolo.gloo_built(), kolo.is_initialized())'],
        env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ['True', 'False']


def test_import_leaves_cloudpickle_for_its_first_use():
    # start-up: cloudpickle is imported by broadcast_object/allgather_object
    proc = subprocess.run(
        [sys.executable, '-c',
         'import sys, kolo.torch; print("cloudpickle" in sys.modules)'],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ['False']


@pytest.mark.parametrize('built_for, torch_version, want', [
    ('', '1.13.0a0', "built without its torch.distributed backend"),
    ('1.12.0', '1.13.0a0', 'built for torch 1.12.0, and this is torch '
     '1.13.0'),
    ('1.13.0', '1.13.1+cpu', "kolo._kolo_c10d, built for torch 1.13.0) is "
     'not installed'),
])
def test_a_missing_torch_distributed_backend_says_why(built_for,
                                                      torch_version, want):
    # The three reasons kolo.torch.distributed may not load, each named:
    # kolo built without libtorch-dev, built for another torch, or the
    # backend's file missing (the Debian package kolo-torch not installed).
    script = (
        'import sys, torch, kolo._version as v\n'
        f'v.c10d_torch_version = {built_for!r}\n'
        f'torch.__version__ = {torch_version!r}\n'
        "sys.modules['kolo._kolo_c10d'] = None  # as if the file were absent\n"
        'import kolo.torch.distributed\n')
    proc = subprocess.run([sys.executable, '-c', script],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert 'ImportError' in proc.stderr and want in proc.stderr, proc.stderr
