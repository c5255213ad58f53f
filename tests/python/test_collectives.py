"""Every kolo.torch collective x every dtype, in place and out of place, sync
and async, against values computed here (run under kolorun, 2 and 3 ranks).
"""

import signal
import threading
import time

import pytest
import torch

import kolo.torch as hvd
from kolo import _kolo
from conftest import ALL_DTYPES, FLOATS, NUMERIC, data, reference

OPS = [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product]


def everyone(shape, dtype, small=False):
    tensors = [data(r, shape, dtype) for r in range(hvd.size())]
    if small and dtype is not torch.bool:
        tensors = [(t.to(torch.int64) % 3 + 1).to(dtype) for t in tensors]
    return tensors


_BITS = {torch.float16: torch.int16, torch.bfloat16: torch.int16,
         torch.float32: torch.int32, torch.float64: torch.int64}


def same(a, b):
    """Equal dtype, shape and bits."""
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert a.shape == b.shape, (a.shape, b.shape)
    bits = _BITS.get(a.dtype)
    if bits is not None:
        a, b = a.contiguous().view(bits), b.contiguous().view(bits)
    assert torch.equal(a, b), (a, b)


@pytest.mark.parametrize('dtype', ALL_DTYPES, ids=str)
@pytest.mark.parametrize('op', OPS)
def test_allreduce_every_dtype_and_op(dtype, op):
    if dtype is torch.bool and op == hvd.Average:
        with pytest.raises(ValueError, match='bool'):
            hvd.allreduce(torch.ones(2, dtype=torch.bool), op=op)
        return
    tensors = everyone((3, 5), dtype, small=op == hvd.Product)
    mine = tensors[hvd.rank()]
    want = reference(tensors, op)
    # out of place, sync: the input stays as it was
    before = mine.clone()
    got = hvd.allreduce(mine, op=op, name=f'ar.{dtype}.{op}')
    same(got, want)
    same(mine, before)
    # in place, sync: the same object comes back
    t = mine.clone()
    assert hvd.allreduce_(t, op=op) is t
    same(t, want)
    # async out of place and in place
    h1 = hvd.allreduce_async(mine, op=op, name=f'ara.{dtype}.{op}')
    t2 = mine.clone()
    h2 = hvd.allreduce_async_(t2, op=op)
    assert isinstance(h1, int) and isinstance(h2, int)
    same(hvd.synchronize(h1), want)
    assert hvd.synchronize(h2) is t2
    same(t2, want)


@pytest.fixture(params=['torch C++', 'Python attributes'])
def tensor_reader(request):
    """allreduce_async_'s hot path reads tensors through torch's C++
    accessors (kolo._kolo_c10d's reader) or, in a build without that
    module, through their Python attributes: each test runs with both."""
    c10d = pytest.importorskip('kolo._kolo_c10d')
    if request.param == 'Python attributes':
        _kolo.set_tensor_reader(None)
    yield request.param
    _kolo.set_tensor_reader(c10d.tensor_reader)


def test_hot_path_takes_what_it_should_and_reads_it_exactly(tensor_reader):
    fast = _kolo.allreduce_tensor_fast  # a handle, or None: the general path
    for t in (torch.ones(2, dtype=torch.bool), torch.ones(4, 4).t(),
              torch.ones(2, 2).to_sparse(), torch.ones(2, dtype=torch.complex64),
              torch.ones(2).numpy()):
        assert fast(t, hvd.Sum, 1.0, 1.0, None) is None, (tensor_reader, t)
    n, r = hvd.size(), hvd.rank()
    ranks = sum(range(1, n + 1))
    # a view at an offset into its storage: only its own elements change
    base = torch.arange(10, dtype=torch.float32) * (r + 1)
    view = base[3:7]
    h = fast(view, hvd.Sum, 1.0, 1.0, 'hot.view')
    assert isinstance(h, int)
    assert hvd.synchronize(h) is view
    want = torch.arange(10, dtype=torch.float32) * (r + 1)
    want[3:7] = torch.arange(3, 7, dtype=torch.float32) * ranks
    same(base, want)
    # 0-d, empty and a parameter (a subclass of torch.Tensor)
    for t, name in ((torch.tensor(float(r + 1)), 'hot.scalar'),
                    (torch.empty(0), 'hot.empty'),
                    (torch.nn.Parameter(torch.full((3,), float(r + 1)),
                                        requires_grad=False), 'hot.param')):
        h = fast(t, hvd.Sum, 1.0, 1.0, name)
        assert isinstance(h, int), name
        assert hvd.synchronize(h) is t
        same(t.detach(), torch.full(t.shape, float(ranks)))
    # every numeric dtype, of a shape with several dimensions
    for dtype in NUMERIC:
        tensors = everyone((2, 3, 4), dtype)
        t = tensors[r].clone()
        h = fast(t, hvd.Sum, 1.0, 1.0, f'hot.{dtype}')
        assert isinstance(h, int), dtype
        assert hvd.synchronize(h) is t
        same(t, reference(tensors, hvd.Sum))


def test_allreduce_default_is_average_and_scalar():
    t = torch.tensor(float(hvd.rank() + 1))
    got = hvd.allreduce(t)
    n = hvd.size()
    assert got.shape == ()
    assert got.item() == pytest.approx(sum(range(1, n + 1)) / n)


def test_in_place_has_no_copy():
    t = torch.ones(1000)
    ptr = t.data_ptr()
    out = hvd.allreduce_(t, op=hvd.Sum)
    assert out is t and out.data_ptr() == ptr
    assert torch.equal(t, torch.full((1000,), float(hvd.size())))


@pytest.mark.parametrize('dtype', NUMERIC, ids=str)
def test_prescale_postscale_bit_exact(dtype):
    # Rank 0 alone holds random values (others zeros), so the sum is exact in
    # any order and every bit of the result comes from the factors.
    g = torch.Generator().manual_seed(1234)
    if dtype.is_floating_point:
        x0 = (torch.rand(4099, generator=g, dtype=torch.float64) * 200 -
              100).to(dtype)
    else:
        hi = 100 if dtype in (torch.uint8, torch.int8) else 100000
        lo = 0 if dtype is torch.uint8 else -hi
        x0 = torch.randint(lo, hi, (4099,), generator=g).to(dtype)
    zeros = torch.zeros_like(x0)
    tensors = [x0] + [zeros] * (hvd.size() - 1)
    mine = tensors[hvd.rank()]
    for op, pre, post in [(hvd.Sum, 0.7, 1.3), (hvd.Average, 1.0, 1.0),
                          (hvd.Average, 0.3, 2.9), (hvd.Sum, 1.0 / 3, 1.0),
                          (hvd.Max, 0.55, 1.0)]:
        if op == hvd.Max and not dtype.is_floating_point:
            continue  # the zeros of the other ranks would win
        want = reference(tensors, op, pre, post)
        got = hvd.allreduce(mine, op=op, prescale_factor=pre,
                            postscale_factor=post)
        same(got, want)
        t = mine.clone()
        hvd.allreduce_(t, op=op, prescale_factor=pre, postscale_factor=post)
        same(t, want)


@pytest.mark.parametrize('dtype', [torch.int32, torch.int64, torch.float32],
                         ids=str)
def test_integer_and_float_average_truncation(dtype):
    # sums that do not divide evenly: Horovod multiplies by 1/size
    tensors = [torch.tensor([r * 5 + 1, -(r * 7) - 2, 3 * r], dtype=dtype)
               for r in range(hvd.size())]
    got = hvd.allreduce(tensors[hvd.rank()], op=hvd.Average)
    same(got, reference(tensors, hvd.Average))


def test_fp16_compression():
    x = data(hvd.rank(), (64,), torch.float32) / 8
    got = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16)
    assert got.dtype is torch.float32
    want = reference([(data(r, (64,), torch.float32) / 8).half()
                      for r in range(hvd.size())], hvd.Sum).float()
    same(got, want)
    ints = torch.arange(5, dtype=torch.int32)
    same(hvd.allreduce(ints, op=hvd.Sum, compression=hvd.Compression.fp16),
         ints * hvd.size())


@pytest.mark.parametrize('dtype', [torch.float32, torch.int64, torch.float16],
                         ids=str)
def test_grouped_allreduce(dtype):
    shapes = [(3,), (2, 4), (7,)]
    per = [everyone(s, dtype) for s in shapes]
    mine = [p[hvd.rank()] for p in per]
    want = [reference(p, hvd.Sum) for p in per]
    got = hvd.grouped_allreduce(mine, op=hvd.Sum, name='grp')
    assert isinstance(got, list) and len(got) == 3
    for g, w in zip(got, want):
        same(g, w)
    h = hvd.grouped_allreduce_async(mine, op=hvd.Sum)
    out = hvd.synchronize(h)
    assert isinstance(out, tuple)
    for g, w in zip(out, want):
        same(g, w)
    copies = [m.clone() for m in mine]
    res = hvd.grouped_allreduce_(copies, op=hvd.Sum)
    assert isinstance(res, tuple) and all(a is b for a, b in zip(res, copies))
    for g, w in zip(copies, want):
        same(g, w)
    copies = [m.clone() for m in mine]
    h = hvd.grouped_allreduce_async_(copies, op=hvd.Average)
    res = hvd.synchronize(h)
    for g, p in zip(res, per):
        same(g, reference(p, hvd.Average))


@pytest.mark.parametrize('dtype', ALL_DTYPES, ids=str)
def test_allgather(dtype):
    n, r = hvd.size(), hvd.rank()
    mine = data(r, (r + 1, 3), dtype)  # first dimensions differ per rank
    want = torch.cat([data(k, (k + 1, 3), dtype) for k in range(n)])
    same(hvd.allgather(mine, name=f'ag.{dtype}'), want)
    same(hvd.synchronize(hvd.allgather_async(mine)), want)
    empty = torch.empty((0, 3), dtype=dtype)
    got = hvd.allgather(mine if r == 0 else empty)
    same(got, data(0, (1, 3), dtype))
    grouped = hvd.grouped_allgather([mine, mine[:1]], name=f'gag.{dtype}')
    assert isinstance(grouped, tuple)
    same(grouped[0], want)
    same(grouped[1], torch.cat([data(k, (k + 1, 3), dtype)[:1]
                                for k in range(n)]))
    h = hvd.grouped_allgather_async([mine])
    same(hvd.synchronize(h)[0], want)


@pytest.mark.parametrize('dtype', ALL_DTYPES, ids=str)
def test_broadcast(dtype):
    n, r = hvd.size(), hvd.rank()
    root = n - 1
    mine = data(r, (4, 2), dtype)
    want = data(root, (4, 2), dtype)
    before = mine.clone()
    same(hvd.broadcast(mine, root, name=f'bc.{dtype}'), want)
    same(mine, before)  # out of place leaves the input alone
    same(hvd.synchronize(hvd.broadcast_async(mine, 0)), data(0, (4, 2), dtype))
    t = mine.clone()
    assert hvd.broadcast_(t, root) is t
    same(t, want)
    t = mine.clone()
    assert hvd.synchronize(hvd.broadcast_async_(t, 0)) is t
    same(t, data(0, (4, 2), dtype))


@pytest.mark.parametrize('dtype', ALL_DTYPES, ids=str)
def test_alltoall(dtype):
    n, r = hvd.size(), hvd.rank()
    rows = 2 * n
    mine = data(r, (rows, 2), dtype)
    # even split
    got = hvd.alltoall(mine, name=f'a2a.{dtype}')
    want = torch.cat([data(k, (rows, 2), dtype)[2 * r:2 * r + 2]
                      for k in range(n)])
    same(got, want)
    # uneven splits: rank k sends (j + k) % 3 rows to rank j
    def splits_of(k):
        return [(j + k) % 3 for j in range(n)]
    src = data(r, (sum(splits_of(r)) + 1, 2), dtype)  # one row left over
    out, received = hvd.alltoall(src, splits=torch.tensor(
        splits_of(r), dtype=torch.int32))
    pieces = []
    for k in range(n):
        s = splits_of(k)
        start = sum(s[:r])
        pieces.append(data(k, (sum(s) + 1, 2), dtype)[start:start + s[r]])
    same(out, torch.cat(pieces))
    assert received.dtype is torch.int32
    assert received.tolist() == [splits_of(k)[r] for k in range(n)]
    # async always gives (output, received_splits); splits as a list
    h = hvd.alltoall_async(src, splits=splits_of(r))
    out2, rec2 = hvd.synchronize(h)
    same(out2, torch.cat(pieces))
    assert rec2.tolist() == received.tolist()


@pytest.mark.parametrize('dtype', NUMERIC, ids=str)
def test_reducescatter(dtype):
    n, r = hvd.size(), hvd.rank()
    rows = 2 * n + 1  # uneven: the first rank gets one more
    tensors = everyone((rows, 2), dtype)
    for op in (hvd.Sum, hvd.Average):
        full = reference(tensors, op)
        counts = [rows // n + (1 if k < rows % n else 0) for k in range(n)]
        start = sum(counts[:r])
        want = full[start:start + counts[r]]
        same(hvd.reducescatter(tensors[r], op=op), want)
        same(hvd.synchronize(hvd.reducescatter_async(tensors[r], op=op)),
             want)
    got = hvd.grouped_reducescatter([tensors[r], tensors[r][:n]], op=hvd.Sum)
    assert isinstance(got, list)
    full = reference(tensors, hvd.Sum)
    counts = [rows // n + (1 if k < rows % n else 0) for k in range(n)]
    same(got[0], full[sum(counts[:r]):sum(counts[:r]) + counts[r]])
    same(got[1], full[:n][r:r + 1])
    out = hvd.synchronize(hvd.grouped_reducescatter_async([tensors[r]],
                                                          op=hvd.Sum))
    same(out[0], full[sum(counts[:r]):sum(counts[:r]) + counts[r]])


def test_reducescatter_scaling_matches_horovod():
    n, r = hvd.size(), hvd.rank()
    # rank 0 alone holds values: the sum is exact in any order, every bit
    # of the result comes from the factors
    x0 = data(0, (n * 3,), torch.float16) / 3
    tensors = [x0] + [torch.zeros_like(x0)] * (n - 1)
    full = reference(tensors, hvd.Average, 0.7, 1.9)
    got = hvd.reducescatter(tensors[r], prescale_factor=0.7,
                            postscale_factor=1.9)
    same(got, full[3 * r:3 * r + 3])


def test_poll_false_while_in_flight_and_gil_released():
    r, last = hvd.rank(), hvd.size() - 1
    t = torch.ones(8)
    if r == last:
        time.sleep(1.0)  # the others wait in synchronize meanwhile
    h = hvd.allreduce_async_(t, op=hvd.Sum, name='late')
    if r != last:
        assert hvd.poll(h) is False
    ticks = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    th = threading.Thread(target=spin)
    th.start()
    start = time.monotonic()
    hvd.synchronize(h)
    waited = time.monotonic() - start
    stop.set()
    th.join(timeout=10)
    assert torch.equal(t, torch.full((8,), float(hvd.size())))
    if r != last:
        assert waited > 0.5
        # a thread holding no GIL ticks ~1000 times per second
        assert ticks[0] > 50, (ticks[0], waited)
    with pytest.raises(ValueError, match='was not created or has been cleared'):
        hvd.poll(h)
    assert hvd.synchronize(h) is None


def test_interrupted_synchronize_keeps_the_handle():
    # An exception from a signal handler (Ctrl-C's KeyboardInterrupt) ends
    # the wait in synchronize; the handle stays valid and its tensor in use.
    r, last = hvd.rank(), hvd.size() - 1
    t = torch.ones(4)
    if r == last:
        time.sleep(1.5)  # the others are interrupted meanwhile
    h = hvd.allreduce_async_(t, op=hvd.Sum, name='interrupted')
    if r != last:
        class Interrupted(Exception):
            pass

        def interrupt(signum, frame):
            raise Interrupted()

        before = signal.signal(signal.SIGALRM, interrupt)
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        try:
            with pytest.raises(Interrupted):
                hvd.synchronize(h)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, before)
        assert hvd.poll(h) in (False, True)  # still known
    assert hvd.synchronize(h) is t
    assert torch.equal(t, torch.full((4,), float(hvd.size())))


def test_many_async_then_synchronize():
    ts = [torch.full((k + 1,), float(hvd.rank())) for k in range(50)]
    hs = [hvd.allreduce_async_(t, name=f'many.{k}', op=hvd.Sum)
          for k, t in enumerate(ts)]
    total = float(sum(range(hvd.size())))
    for h, t in zip(hs, ts):
        assert hvd.synchronize(h) is t
        assert torch.equal(t, torch.full_like(t, total))


def test_barrier_and_join_uneven_batches():
    hvd.barrier()
    n, r = hvd.size(), hvd.rank()
    for b in range(r + 1):  # rank r has r + 1 batches
        t = torch.full((4,), float(r + 1))
        got = hvd.allreduce(t, op=hvd.Average, name=f'batch.{b}')
        # ranks without batch b have joined and contribute zeros; Average
        # still divides by the full size
        want = sum(k + 1 for k in range(n) if k >= b) / n
        assert torch.allclose(got, torch.full((4,), want))
    last = hvd.join()
    assert isinstance(last, int) and 0 <= last < n
    everyone_last = hvd.allgather(torch.tensor([last]))
    assert everyone_last.tolist() == [last] * n
    hvd.barrier()


def test_process_sets_at_run_time():
    n, r = hvd.size(), hvd.rank()
    # not every rank (a set of every rank would duplicate the global one)
    ranks = [0, n - 1] if n > 2 else [n - 1]
    ps = hvd.add_process_set(ranks)
    assert ps.process_set_id not in (None, 0)
    assert ps.ranks == ranks and ps.size() == len(ranks)
    assert ps.included() == (r in ranks)
    assert ps.rank() == (ranks.index(r) if r in ranks else -1)
    with pytest.raises(ValueError, match='duplicate process set'):
        hvd.add_process_set(list(ranks))
    if r in ranks:
        t = torch.full((3,), float(r))
        got = hvd.allreduce(t, op=hvd.Average, process_set=ps)
        assert torch.equal(got, torch.full((3,), sum(ranks) / len(ranks)))
        g = hvd.allgather(torch.tensor([r]), process_set=ps)
        assert g.tolist() == ranks
        b = hvd.broadcast(torch.tensor([r]), n - 1, process_set=ps)
        assert b.tolist() == [n - 1]
        rs = hvd.reducescatter(torch.ones(len(ranks), 2), op=hvd.Sum,
                               process_set=ps)
        assert torch.equal(rs, torch.full((1, 2), float(len(ranks))))
        hvd.barrier(process_set=ps)
    else:
        with pytest.raises(ValueError):
            hvd.allreduce(torch.ones(1), process_set=ps)
    hvd.barrier()
    assert hvd.remove_process_set(ps) is True
    assert ps.process_set_id is None
    assert hvd.remove_process_set(hvd.global_process_set) is False
    with pytest.raises(ValueError):
        hvd.allreduce(torch.ones(1), process_set=ps)


def test_numpy_through_kolo():
    import numpy as np
    import kolo
    n, r = hvd.size(), hvd.rank()
    a = np.arange(6, dtype=np.int32) + r
    got = kolo.allreduce(a, op=kolo.Sum)
    assert got.tolist() == [n * i + sum(range(n)) for i in range(6)]
    b = a.copy()
    assert kolo.allreduce_(b, op=kolo.Sum) is b
    assert b.tolist() == got.tolist()
    g = kolo.allgather(np.full((r + 1,), r, dtype=np.float64))
    assert g.tolist() == [float(k) for k in range(n) for _ in range(k + 1)]
    assert kolo.broadcast(np.array([r], dtype=np.int8), 0).tolist() == [0]
    out, rec = kolo.alltoall(np.arange(n, dtype=np.int64) + 10 * r,
                             splits=[1] * n)
    assert out.tolist() == [10 * k + r for k in range(n)]
    assert rec.tolist() == [1] * n
    rs = kolo.reducescatter(np.ones((n, 2), dtype=np.float32), op=kolo.Sum)
    assert rs.tolist() == [[float(n), float(n)]]
    with pytest.raises(ValueError, match='contiguous'):
        kolo.allreduce(np.ones((4, 4))[:, ::2])
