"""kolo.torch with CUDA tensors (issue 23): every op over CUDA tensors with
exact values (NCCL where kolo uses it, else staging through host memory),
the ready-event ordering, and the errors. Run under kolorun like
test_collectives.py; the GPU tests skip without a usable CUDA device (Debian's
torch is CPU-only), the device-pointer plumbing is tested everywhere.
"""

import pytest
import torch

import kolo
import kolo.torch as hvd
from kolo import _kolo
from conftest import MULTI, data, reference

GPU = (torch.cuda.is_available() and hvd.cuda_built())
needs_gpu = pytest.mark.skipif(
    not GPU, reason='no usable CUDA device with a CUDA kolo build '
    f'(torch.cuda.is_available()={torch.cuda.is_available()}, '
    f'cuda_built()={hvd.cuda_built()})')
needs_job = pytest.mark.skipif(not MULTI, reason='runs under kolorun')

DTYPES = [torch.uint8, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64, torch.bool]
OPS = [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product]


def dev():
    return torch.device('cuda', 0)


def everyone(shape, dtype):
    tensors = [data(r, shape, dtype) for r in range(hvd.size())]
    if dtype is not torch.bool:
        tensors = [(t.to(torch.int64) % 3 + 1).to(dtype) for t in tensors]
    return tensors


def same(got, want):
    assert got.device.type == 'cuda', got.device
    got = got.cpu()
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    assert torch.equal(got, want), (got, want)


@needs_job
@pytest.mark.skipif(GPU, reason='a real device takes the pointer')
def test_device_pointer_without_a_device_fails_on_every_rank_and_job_goes_on():
    """The Python -> C++ device plumbing on a machine without a GPU: a
    pointer claimed to be on CUDA device 0 reaches kolo as a CUDA tensor and
    is refused with kolo's reason, on every rank; the next op works."""
    t = torch.ones(4)
    ptr = _kolo.DevicePointer(t.data_ptr(), 0, 0)
    assert (ptr.ptr, ptr.device, ptr.ready_event) == (t.data_ptr(), 0, 0)
    with pytest.raises(_kolo.Error) as e:
        h = _kolo.allreduce_async(ptr, ptr, [4], 7, 0, 1.0, 1.0,
                                  'allreduce.nodevice', 0)
        _kolo.synchronize(h)
    assert 'CUDA' in str(e.value) or 'cuda' in str(e.value), str(e.value)
    assert torch.equal(hvd.allreduce(torch.ones(3), op=hvd.Sum),
                       torch.full((3,), float(hvd.size())))


@needs_job
@needs_gpu
def test_build_flags():
    assert hvd.cuda_built() is True
    assert hvd.nccl_built() >= 20000


@needs_job
@needs_gpu
@pytest.mark.parametrize('dtype', DTYPES, ids=str)
@pytest.mark.parametrize('op', OPS)
def test_allreduce(dtype, op):
    if dtype is torch.bool and op == hvd.Average:
        pytest.skip('Average of bool is refused (test_collectives.py)')
    ts = everyone([5, 3], dtype)
    want = reference(ts, op)
    mine = ts[hvd.rank()].to(dev())
    out = hvd.allreduce(mine, op=op, name=f'cu.ar.{dtype}.{op}')
    same(out, want)
    same(mine, ts[hvd.rank()])  # input untouched
    ptr = mine.data_ptr()
    back = hvd.allreduce_(mine, op=op, name=f'cu.ar_.{dtype}.{op}')
    assert back is mine and mine.data_ptr() == ptr
    same(mine, want)
    h = hvd.allreduce_async(ts[hvd.rank()].to(dev()), op=op,
                            name=f'cu.ara.{dtype}.{op}')
    same(hvd.synchronize(h), want)


@needs_job
@needs_gpu
@pytest.mark.parametrize('dtype', [torch.float32, torch.float16,
                                   torch.int32], ids=str)
def test_prescale_postscale(dtype):
    ts = everyone([7], dtype)
    want = reference(ts, hvd.Sum, 0.5, 3.0)
    out = hvd.allreduce(ts[hvd.rank()].to(dev()), op=hvd.Sum,
                        prescale_factor=0.5, postscale_factor=3.0,
                        name=f'cu.scale.{dtype}')
    same(out, want)


@needs_job
@needs_gpu
def test_grouped_allreduce_and_fp16_compression():
    shapes = [[3], [2, 2], [0], [9]]
    per = [everyone(s, torch.float32) for s in shapes]
    mine = [p[hvd.rank()].to(dev()) for p in per]
    outs = hvd.grouped_allreduce(mine, op=hvd.Sum, name='cu.grouped')
    for o, p in zip(outs, per):
        same(o, reference(p, hvd.Sum))
    back = hvd.grouped_allreduce_(mine, op=hvd.Sum, name='cu.grouped_')
    for b, m, p in zip(back, mine, per):
        assert b is m
        same(b, reference(p, hvd.Sum))
    ts = everyone([6], torch.float32)
    out = hvd.allreduce(ts[hvd.rank()].to(dev()), op=hvd.Sum,
                        compression=hvd.Compression.fp16, name='cu.fp16')
    same(out, reference(ts, hvd.Sum))


@needs_job
@needs_gpu
@pytest.mark.parametrize('dtype', [torch.float32, torch.int64, torch.bool,
                                   torch.bfloat16], ids=str)
def test_allgather_uneven_rows(dtype):
    ts = [data(r, [r + 1, 3], dtype) for r in range(hvd.size())]
    out = hvd.allgather(ts[hvd.rank()].to(dev()), name=f'cu.ag.{dtype}')
    same(out, torch.cat(ts))
    outs = hvd.grouped_allgather([ts[hvd.rank()].to(dev()),
                                  ts[hvd.rank()][:1].to(dev())],
                                 name=f'cu.gag.{dtype}')
    same(outs[0], torch.cat(ts))
    same(outs[1], torch.cat([t[:1] for t in ts]))


@needs_job
@needs_gpu
@pytest.mark.parametrize('dtype', [torch.float32, torch.uint8], ids=str)
def test_broadcast(dtype):
    for root in {0, hvd.size() - 1}:
        ts = everyone([4, 2], dtype)
        mine = ts[hvd.rank()].to(dev())
        out = hvd.broadcast(mine, root, name=f'cu.bc.{dtype}.{root}')
        same(out, ts[root])
        same(mine, ts[hvd.rank()])
        back = hvd.broadcast_(mine, root, name=f'cu.bc_.{dtype}.{root}')
        assert back is mine
        same(mine, ts[root])


@needs_job
@needs_gpu
def test_alltoall_with_splits():
    n, me = hvd.size(), hvd.rank()
    # Rank r sends (r + d) % 2 + 1 rows to rank d; row values name both.
    splits = [(me + d) % 2 + 1 for d in range(n)]
    rows = [torch.full((splits[d], 2), float(10 * me + d)) for d in range(n)]
    out, received = hvd.alltoall(torch.cat(rows).to(dev()),
                                 splits=torch.tensor(splits, dtype=torch.int32),
                                 name='cu.a2a')
    want_rows = [(s + me) % 2 + 1 for s in range(n)]
    assert received.tolist() == want_rows
    want = torch.cat([torch.full((want_rows[s], 2), float(10 * s + me))
                      for s in range(n)])
    same(out, want)


@needs_job
@needs_gpu
@pytest.mark.parametrize('op', [hvd.Sum, hvd.Average])
def test_reducescatter(op):
    n, me = hvd.size(), hvd.rank()
    ts = everyone([2 * n + 1, 3], torch.float32)
    full = reference(ts, op)
    rows = [(2 * n + 1) // n + (1 if r < (2 * n + 1) % n else 0)
            for r in range(n)]
    start = sum(rows[:me])
    out = hvd.reducescatter(ts[me].to(dev()), op=op, name=f'cu.rs.{op}')
    same(out, full[start:start + rows[me]])
    outs = hvd.grouped_reducescatter([ts[me].to(dev()), ts[me].to(dev()) * 2],
                                     op=op, name=f'cu.grs.{op}')
    same(outs[0], full[start:start + rows[me]])
    same(outs[1], reference([t * 2 for t in ts], op)[start:start + rows[me]])


@needs_job
@needs_gpu
def test_ready_event_orders_kolo_after_the_callers_stream():
    """The value is written by work still queued on the caller's stream
    (behind a ~0.2 s GPU sleep) when allreduce_ is submitted: kolo must wait
    for it (the ready event), never read the stale zeros."""
    t = torch.zeros(1 << 16, device=dev())
    torch.cuda.synchronize()
    torch.cuda._sleep(int(3e8))
    t.fill_(hvd.rank() + 1)
    hvd.allreduce_(t, op=hvd.Sum, name='cu.ready')
    n = hvd.size()
    assert torch.equal(t.cpu(), torch.full((1 << 16,), n * (n + 1) / 2))


@needs_job
@needs_gpu
def test_many_in_flight_then_synchronize_and_a_process_set():
    ts = [torch.full((100 + i,), float(hvd.rank() + i), device=dev())
          for i in range(40)]
    hs = [hvd.allreduce_async_(t, op=hvd.Sum, name=f'cu.many.{i}')
          for i, t in enumerate(ts)]
    n = hvd.size()
    for i, (h, t) in enumerate(zip(hs, ts)):
        assert hvd.synchronize(h) is t
        want = float(sum(r + i for r in range(n)))
        assert torch.equal(t.cpu(), torch.full((100 + i,), want))
    if n < 2:
        return  # a set of every rank is the global set
    # One set per rank (every rank adds them all): each rank reduces on its
    # own one-rank set, that set's communicator; then a set of two ranks.
    solo = [hvd.add_process_set([r]) for r in range(n)]
    pair = hvd.add_process_set([0, 1]) if n > 2 else None
    try:
        mine = torch.full((5,), float(hvd.rank() + 1), device=dev())
        out = hvd.allreduce(mine, op=hvd.Sum, name='cu.solo',
                            process_set=solo[hvd.rank()])
        same(out, torch.full((5,), float(hvd.rank() + 1)))
        if pair is not None and hvd.rank() < 2:
            out = hvd.allreduce(mine, op=hvd.Sum, name='cu.pair',
                                process_set=pair)
            same(out, torch.full((5,), 3.0))
    finally:
        for ps in solo + ([pair] if pair is not None else []):
            hvd.remove_process_set(ps)


@needs_job
@needs_gpu
def test_ranks_disagreeing_on_device_kind_fail_everywhere_job_goes_on():
    if hvd.size() < 2:
        pytest.skip('needs two ranks')
    t = torch.ones(4) if hvd.rank() == 0 else torch.ones(4, device=dev())
    with pytest.raises(hvd.HorovodInternalError) as e:
        hvd.allreduce(t, op=hvd.Sum, name='cu.kinds')
    assert 'device' in str(e.value), str(e.value)
    out = hvd.allreduce(torch.ones(2, device=dev()), op=hvd.Sum,
                        name='cu.after')
    same(out, torch.full((2,), float(hvd.size())))


def test_kolo_package_exports_the_device_pointer():
    assert kolo._kolo.DevicePointer(5).device == kolo._kolo.CPU
