"""kolo.torch's errors at Horovod's points (run under kolorun, 2 and 3
ranks): ValueError at submission for a caller's mistake, HorovodInternalError
at synchronize for ranks that disagree -- on every rank -- and the job goes
on: every case is followed by an op that must work.
"""

import warnings

import pytest
import torch

import kolo.torch as hvd
from kolo.common.exceptions import HorovodInternalError


def works():
    """The next op after an error succeeds on every rank."""
    t = torch.ones(3)
    hvd.allreduce_(t, op=hvd.Sum)
    assert torch.equal(t, torch.full((3,), float(hvd.size())))


def test_shape_mismatch_fails_on_every_rank():
    r = hvd.rank()
    with pytest.raises(HorovodInternalError) as e:
        hvd.allreduce(torch.ones(r + 1), name='mismatch.shape')
    assert 'mismatch.shape' in str(e.value)
    works()


def test_in_place_async_errors_as_the_general_path():
    # allreduce_async_ has a hot path of its own (kolo/torch/mpi_ops.py):
    # the same errors, at the same points.
    r = hvd.rank()
    h = hvd.allreduce_async_(torch.ones(r + 1), name='mismatch.in_place')
    with pytest.raises(HorovodInternalError, match='mismatch.in_place'):
        hvd.synchronize(h)
    assert hvd.synchronize(h) is None  # the handle is gone
    t = torch.ones(2)
    h = hvd.allreduce_async_(t, name='dup.in_place', op=hvd.Sum)
    with pytest.raises(ValueError, match='dup.in_place'):
        hvd.allreduce_async_(torch.ones(2), name='dup.in_place', op=hvd.Sum)
    assert hvd.synchronize(h) is t
    with pytest.raises(ValueError, match=r'^Tensor type torch.ComplexFloatTensor'
                                         r' is not supported.$'):
        hvd.allreduce_async_(torch.ones(2, dtype=torch.complex64))
    with pytest.raises(ValueError, match='is not supported'):
        hvd.allreduce_async_(torch.ones(2, 2).to_sparse())
    with pytest.raises(ValueError, match='^Tensor is required to be contiguous.$'):
        hvd.allreduce_async_(torch.ones(4, 4).t())
    with pytest.raises(ValueError, match='bool'):
        hvd.allreduce_async_(torch.ones(2, dtype=torch.bool))
    with pytest.raises(ValueError, match='unknown reduce op 17'):
        hvd.allreduce_async_(torch.ones(2), op=17)
    with pytest.raises(NotImplementedError):
        hvd.allreduce_async_(torch.ones(2), op=hvd.Adasum)
    works()


def test_dtype_mismatch_fails_on_every_rank():
    dtype = torch.float32 if hvd.rank() == 0 else torch.float64
    with pytest.raises(HorovodInternalError):
        hvd.allreduce(torch.ones(2, dtype=dtype), name='mismatch.dtype')
    works()


def test_op_and_scale_mismatch_fail_on_every_rank():
    op = hvd.Sum if hvd.rank() == 0 else hvd.Max
    with pytest.raises(HorovodInternalError):
        hvd.allreduce(torch.ones(2), op=op, name='mismatch.op')
    with pytest.raises(HorovodInternalError):
        hvd.allreduce(torch.ones(2), op=hvd.Sum, name='mismatch.scale',
                      prescale_factor=1.0 + hvd.rank())
    works()


def test_root_mismatch_fails_on_every_rank():
    root = 0 if hvd.rank() == 0 else 1
    with pytest.raises(HorovodInternalError):
        hvd.broadcast(torch.ones(2), root, name='mismatch.root')
    works()


def test_allgather_trailing_shape_mismatch():
    with pytest.raises(HorovodInternalError):
        hvd.allgather(torch.ones(2, hvd.rank() + 1), name='mismatch.ag')
    works()


def test_duplicate_name_in_flight():
    t = torch.ones(2)
    h = hvd.allreduce_async(t, name='dup', op=hvd.Sum)
    with pytest.raises(ValueError, match='dup'):
        hvd.allreduce_async(t, name='dup', op=hvd.Sum)
    assert torch.equal(hvd.synchronize(h), torch.full((2,), float(hvd.size())))
    works()


def test_same_user_name_on_two_kinds_of_op_does_not_collide():
    t = torch.ones(2)
    h1 = hvd.allreduce_async(t, name='shared', op=hvd.Sum)
    h2 = hvd.broadcast_async(t, 0, name='shared')
    hvd.synchronize(h1)
    hvd.synchronize(h2)


def test_bad_splits():
    n = hvd.size()
    t = torch.arange(2 * n)
    with pytest.raises(ValueError, match='Number of entries in splits'):
        hvd.alltoall(t, splits=[1] * (n + 1))
    with pytest.raises(ValueError, match='greater than the first dimension'):
        hvd.alltoall(t, splits=[3] * n)
    with pytest.raises(ValueError, match='32-bit integer'):
        hvd.alltoall(t, splits=torch.ones(n, dtype=torch.int64))
    with pytest.raises(ValueError, match='1D splits'):
        hvd.alltoall(t, splits=torch.ones((n, 1), dtype=torch.int32))
    with pytest.raises(ValueError, match='even multiple'):
        hvd.alltoall(torch.arange(2 * n + 1))
    works()


def test_bad_dtypes_and_layouts_refused_locally():
    with pytest.raises(ValueError,
                       match=r'Tensor type torch.ComplexFloatTensor is not '
                             r'supported.'):
        hvd.allreduce(torch.ones(2, dtype=torch.complex64))
    with pytest.raises(ValueError, match='is not supported'):
        hvd.allreduce(torch.ones(2, 2).to_sparse())
    with pytest.raises(ValueError, match='Tensor is required to be contiguous.'):
        hvd.allreduce(torch.ones(4, 4).t())
    with pytest.raises(ValueError, match='contiguous'):
        hvd.allgather(torch.ones(4, 4)[:, ::2])
    with pytest.raises(ValueError, match='bool'):
        hvd.allreduce(torch.ones(2, dtype=torch.bool))  # Average of bools
    with pytest.raises(ValueError, match='bool'):
        hvd.allreduce(torch.ones(2, dtype=torch.bool), op=hvd.Sum,
                      prescale_factor=2.0)
    works()


def test_reducescatter_checks():
    with pytest.raises(HorovodInternalError,
                       match='only supports AVERAGE and SUM'):
        hvd.reducescatter(torch.ones(4), op=hvd.Max)
    with pytest.raises(ValueError, match='scalar'):
        hvd.reducescatter(torch.tensor(1.0))
    with pytest.raises(NotImplementedError):
        hvd.reducescatter(torch.ones(4), op=hvd.Adasum)
    works()


def test_op_and_average_arguments():
    with pytest.raises(ValueError, match='supersedes average'):
        hvd.allreduce(torch.ones(2), average=True, op=hvd.Sum)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        got = hvd.allreduce(torch.ones(2), average=False)
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    assert torch.equal(got, torch.full((2,), float(hvd.size())))
    with pytest.raises(NotImplementedError):
        hvd.allreduce(torch.ones(2), op=hvd.Adasum)
    works()


def test_unknown_handles():
    with pytest.raises(ValueError, match='Handle 987654 was not created'):
        hvd.poll(987654)
    assert hvd.synchronize(987654) is None


def test_broadcast_root_not_an_int():
    with pytest.raises(ValueError):
        hvd.broadcast(torch.ones(1), '0')
    works()


def test_peer_joined_fails_other_collectives():
    # While a rank has joined, allgather fails on the ranks that submitted it.
    if hvd.rank() == 0:
        last = hvd.join()
    else:
        with pytest.raises(HorovodInternalError):
            hvd.allgather(torch.ones(1), name='during.join')
        last = hvd.join()
    assert 0 <= last < hvd.size()
    works()
