"""torch.distributed on the kolo backend (kolo.torch.distributed): every op
torch 1.13's process groups have, on float32/float64/int32/int64, in place
and not, blocking and async, against results computed here; DDP on kolo
and on gloo from one seed ending with the same parameters; a collective the
ranks disagree on failing on every rank with RuntimeError while the next
works; send/recv refused. Under kolorun (2 and 3 ranks) the group comes
from kolorun's variables; alone (1 rank, no kolorun) from a tcp://
rendezvous, kolo's coordinator and secret through torch's store.
"""

import os
import socket
import time
import urllib.request
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

import kolo.torch.distributed as kdist  # registers "kolo"

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64]


def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@pytest.fixture(scope='module', autouse=True)
def group():
    if 'KOLO_COORDINATOR' in os.environ:  # kolorun
        dist.init_process_group('kolo')
    else:
        dist.init_process_group('kolo', init_method=f'tcp://127.0.0.1:'
                                f'{_free_port()}', rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def rs():
    return dist.get_rank(), dist.get_world_size()


def val(rank, n, dtype, start=1):
    """rank-dependent small values: start + rank + [0, n)."""
    return (torch.arange(n) + start + rank).to(dtype)


def over_ranks(fn):
    _, size = rs()
    return [fn(r) for r in range(size)]


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('op', ['SUM', 'PRODUCT', 'MIN', 'MAX', 'AVG'])
def test_all_reduce(dtype, op):
    rank, size = rs()
    parts = torch.stack(over_ranks(lambda r: val(r, 6, torch.int64)))
    want = {'SUM': parts.sum(0), 'PRODUCT': parts.prod(0),
            'MIN': parts.min(0).values, 'MAX': parts.max(0).values,
            'AVG': parts.sum(0) // size if not dtype.is_floating_point
            else parts.sum(0).double() / size}[op].to(dtype)
    t = val(rank, 6, dtype)
    dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
    assert torch.equal(t, want)
    # async, then non-contiguous (a transposed view, written back in place)
    t = val(rank, 6, dtype)
    w = dist.all_reduce(t, op=getattr(dist.ReduceOp, op), async_op=True)
    w.wait()
    assert w.is_completed() and w.is_success() and torch.equal(t, want)
    t = val(rank, 6, dtype).reshape(2, 3).t()
    dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
    assert torch.equal(t, want.reshape(2, 3).t())


def test_all_reduce_future_bool_premul_and_refusals():
    rank, size = rs()
    t = val(rank, 4, torch.float64)
    fut = dist.all_reduce(t, async_op=True).get_future()
    got = fut.wait()
    want = sum(over_ranks(lambda r: val(r, 4, torch.float64)))
    assert torch.equal(got[0], want) and torch.equal(t, want)
    # polled to completion; waited with a timeout; dropped unwaited (kolo's
    # op is released in the background, its staging copy kept till then)
    t = val(rank, 4, torch.float64)
    w = dist.all_reduce(t, async_op=True)
    deadline = time.monotonic() + 30
    while not w.is_completed():
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert w.is_success() and torch.equal(t, want)
    t = val(rank, 4, torch.float64)
    assert dist.all_reduce(t, async_op=True).wait(timedelta(seconds=30))
    assert torch.equal(t, want)
    dist.all_reduce(val(rank, 8, torch.float64).reshape(2, 4).t(),
                    async_op=True)
    b = torch.tensor([True, rank == 0, False])
    dist.all_reduce(b, op=dist.ReduceOp.BOR)
    assert b.tolist() == [True, True, False]
    b = torch.tensor([True, rank == 0, False])
    dist.all_reduce(b, op=dist.ReduceOp.BAND)
    assert b.tolist() == [True, size == 1, False]
    t = val(rank, 4, torch.float64)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(2.0))
    assert torch.equal(t, 2 * want)
    with pytest.raises(RuntimeError, match='BXOR'):
        dist.all_reduce(torch.ones(2, dtype=torch.int32),
                        op=dist.ReduceOp.BXOR)
    with pytest.raises(RuntimeError, match='bitwise'):
        dist.all_reduce(torch.ones(2, dtype=torch.int32),
                        op=dist.ReduceOp.BAND)


@pytest.mark.parametrize('dtype', DTYPES)
def test_all_reduce_coalesced_and_broadcast(dtype):
    rank, size = rs()
    a, b = val(rank, 3, dtype), val(rank, 5, dtype, start=10)
    dist.all_reduce_coalesced([a, b])
    assert torch.equal(a, sum(over_ranks(lambda r: val(r, 3, dtype))))
    assert torch.equal(b, sum(over_ranks(lambda r: val(r, 5, dtype, 10))))
    for root in range(size):
        t = val(rank, 6, dtype).reshape(3, 2)
        w = dist.broadcast(t, src=root, async_op=True)
        w.wait()
        assert torch.equal(t, val(root, 6, dtype).reshape(3, 2))


@pytest.mark.parametrize('dtype', DTYPES)
def test_all_gather_and_gather(dtype):
    rank, size = rs()
    want = over_ranks(lambda r: val(r, 4, dtype).reshape(2, 2))
    out = [torch.zeros(2, 2, dtype=dtype) for _ in range(size)]
    dist.all_gather(out, val(rank, 4, dtype).reshape(2, 2))
    assert all(torch.equal(o, w) for o, w in zip(out, want))
    flat = torch.zeros(size * 4, dtype=dtype)
    dist.all_gather_into_tensor(flat, val(rank, 4, dtype))
    assert torch.equal(flat, torch.cat([w.reshape(-1) for w in want]))
    flat = torch.zeros(size * 4, dtype=dtype)
    dist._all_gather_base(flat, val(rank, 4, dtype))
    assert torch.equal(flat, torch.cat([w.reshape(-1) for w in want]))
    for root in range(size):
        out = ([torch.zeros(2, 2, dtype=dtype) for _ in range(size)]
               if rank == root else None)
        dist.gather(val(rank, 4, dtype).reshape(2, 2), out, dst=root)
        if rank == root:
            assert all(torch.equal(o, w) for o, w in zip(out, want))


@pytest.mark.parametrize('dtype', DTYPES)
def test_scatter_and_reduce(dtype):
    rank, size = rs()
    for root in range(size):
        ins = ([val(r, 3, dtype, start=100) for r in range(size)]
               if rank == root else None)
        out = torch.zeros(3, dtype=dtype)
        dist.scatter(out, ins, src=root)
        assert torch.equal(out, val(rank, 3, dtype, start=100))
        t = val(rank, 5, dtype)
        dist.reduce(t, dst=root, op=dist.ReduceOp.MAX)
        if rank == root:
            assert torch.equal(t, val(size - 1, 5, dtype))


@pytest.mark.parametrize('dtype', DTYPES)
def test_reduce_scatter(dtype):
    rank, size = rs()
    # rank r contributes val(r, 2 * size) split in size parts of 2
    full = sum(over_ranks(lambda r: val(r, 2 * size, dtype)))
    out = torch.zeros(2, dtype=dtype)
    dist.reduce_scatter(out, list(val(rank, 2 * size, dtype).split(2)))
    assert torch.equal(out, full[2 * rank:2 * rank + 2])
    out = torch.zeros(2, dtype=dtype)
    dist.reduce_scatter_tensor(out, val(rank, 2 * size, dtype))
    assert torch.equal(out, full[2 * rank:2 * rank + 2])
    out = torch.zeros(2, dtype=dtype)
    dist._reduce_scatter_base(out, val(rank, 2 * size, dtype),
                              op=dist.ReduceOp.MIN)
    assert torch.equal(out, val(0, 2 * size, dtype)[2 * rank:2 * rank + 2])


@pytest.mark.parametrize('dtype', DTYPES)
def test_all_to_all(dtype):
    rank, size = rs()
    # rank r sends (r + d + 1) rows of 2 to rank d, valued 100 * r + d
    def rows(src, dst):
        return torch.full((src + dst + 1, 2), 100 * src + dst, dtype=dtype)
    ins = [rows(rank, d) for d in range(size)]
    outs = [torch.zeros(s + rank + 1, 2, dtype=dtype) for s in range(size)]
    dist.all_to_all(outs, ins)
    assert all(torch.equal(o, rows(s, rank)) for s, o in enumerate(outs))
    out = torch.zeros(sum(s + rank + 1 for s in range(size)), 2, dtype=dtype)
    dist.all_to_all_single(out, torch.cat(ins),
                           output_split_sizes=[s + rank + 1
                                               for s in range(size)],
                           input_split_sizes=[rank + d + 1
                                              for d in range(size)])
    assert torch.equal(out, torch.cat([rows(s, rank) for s in range(size)]))
    even = torch.arange(2 * size).to(dtype) + 10 * rank
    out = torch.zeros(2 * size, dtype=dtype)
    w = dist.all_to_all_single(out, even, async_op=True)
    w.wait()
    assert torch.equal(out, torch.cat(
        [torch.arange(2 * rank, 2 * rank + 2).to(dtype) + 10 * s
         for s in range(size)]))


def test_barrier_subgroup_and_names():
    rank, size = rs()
    dist.barrier()
    members = [0, size - 1] if size > 2 else list(range(size))
    sub = kdist.new_group(members)
    if rank in members:
        t = torch.ones(2) * (rank + 1)
        dist.all_reduce(t, group=sub)
        assert torch.equal(t, torch.ones(2) * sum(m + 1 for m in members))
        t = torch.full((2,), float(rank))
        dist.broadcast(t, src=members[-1], group=sub)
        assert torch.equal(t, torch.full((2,), float(members[-1])))
    dist.barrier()


def test_mismatch_fails_on_every_rank_and_the_next_works():
    rank, size = rs()
    if size == 1:
        pytest.skip('needs 2 ranks')
    with pytest.raises(RuntimeError, match='shape'):
        dist.all_reduce(torch.ones(rank + 2))
    w = dist.all_reduce(torch.ones(2, dtype=torch.int32 if rank else
                                   torch.int64), async_op=True)
    with pytest.raises(RuntimeError, match='kolo backend'):
        w.wait()
    assert w.is_completed() and not w.is_success()
    with pytest.raises(RuntimeError, match='called different collectives.*'
                       'allreduce .* on rank'):
        t = torch.ones(2)
        if rank == 0:
            dist.all_reduce(t)
        else:
            dist.broadcast(t, src=0)
    t = torch.ones(3)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((3,), float(size)))


@pytest.mark.parametrize('refused,first', [('op', 'the refusing rank'),
                                            ('tensor', 'the others')])
def test_a_call_refused_on_one_rank_fails_on_every_rank_at_once(refused,
                                                                first):
    """A call that one rank refuses before it reaches kolo (an op kolo has
    not, a sparse tensor) still takes its call slot there and voids it: the
    other ranks' call in that slot fails at once, naming the refusing rank
    and why (not at the group's timeout, which a hang would run into: its
    message differs), whichever rank comes first; the group's next calls
    pair up as before, with exact results."""
    rank, size = rs()
    if size == 1:
        pytest.skip('needs 2 ranks')
    group = kdist.new_group(timeout=timedelta(seconds=60))
    if (rank == 0) != (first == 'the refusing rank'):
        time.sleep(0.5)  # the others' calls come second
    t = torch.ones(2, dtype=torch.int32)
    why = {'op': 'BXOR is refused', 'tensor': 'a sparse tensor'}[refused]
    if rank == 0:
        with pytest.raises(RuntimeError, match=why):
            if refused == 'op':
                dist.all_reduce(t, op=dist.ReduceOp.BXOR, group=group)
            else:
                dist.all_reduce(t.to_sparse(), group=group)
    else:
        with pytest.raises(RuntimeError, match=(
                r"allreduce c10d\.[0-9.]+allreduce\.Int\.2 failed: rank 0 "
                r"refused the call at this point of ordered stream "
                r"'c10d\.[0-9.]+' \(process set \d+, call slot \d+\) "
                r"before it reached the coordinator: allreduce: .*" + why)):
            dist.all_reduce(t, group=group)
    for n in (3, 2):
        t = torch.full((n,), rank + 1, dtype=torch.int32)
        dist.all_reduce(t, group=group)
        assert torch.equal(t, torch.full((n,), size * (size + 1) // 2,
                                         dtype=torch.int32))
    dist.destroy_process_group(group)


def _cache_counts():
    """kolo's coordinator's response cache hits and misses so far, from its
    metrics page (tests/python/run.sh starts kolorun with --metrics-port)."""
    port = os.environ['KOLO_TEST_METRICS_PORT']
    with urllib.request.urlopen(f'http://127.0.0.1:{port}/metrics',
                                timeout=30) as page:
        out = page.read().decode()
    counts = {}
    for line in out.splitlines():
        for key in ('kolo_cache_hits_total', 'kolo_cache_misses_total'):
            if line.startswith(key):
                counts[key] = float(line.split()[-1])
    return counts['kolo_cache_hits_total'], counts['kolo_cache_misses_total']


def test_a_steps_calls_are_served_by_the_response_cache():
    """The backend's names repeat from one lap of the group's call slots to
    the next, so a step's collectives become response cache hits (they were
    all misses when every call had a name of its own)."""
    rank, size = rs()
    if 'KOLO_TEST_METRICS_PORT' not in os.environ or size == 1:
        pytest.skip('needs a kolorun job with --metrics-port (run.sh)')
    dist.barrier()
    before = _cache_counts() if rank == 0 else None
    dist.barrier()
    steps, shapes = 200, (3, 5, 7)  # 3 calls a step: a lap is 64 steps
    for _ in range(steps):
        for n in shapes:
            t = torch.ones(n)
            dist.all_reduce(t)
            assert torch.equal(t, torch.full((n,), float(size)))
    dist.barrier()
    if rank == 0:
        hits, misses = (a - b for a, b in zip(_cache_counts(), before))
        calls = steps * len(shapes)
        # First lap: each shape meets each of the 64 slots once (misses);
        # then every call is a hit. The barriers add a few of either.
        assert misses <= 64 * len(shapes) + 4, (hits, misses)
        assert hits >= calls - 64 * len(shapes), (hits, misses)
    dist.barrier()


def test_more_calls_in_flight_than_call_slots():
    """Calls one lap of the slots apart share a name: the later one waits
    for the earlier (kolo refuses two ops of one name in flight)."""
    _, size = rs()
    ts = [torch.full((4,), float(i)) for i in range(150)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for w in works:
        w.wait()
    for i, t in enumerate(ts):
        assert torch.equal(t, torch.full((4,), float(i * size)))


def late_rank():
    """For the tests where the last rank comes late: (rank, size, the late
    rank, the sum over the ranks of a 2-element tensor filled with rank + 1).
    Skips on one rank."""
    rank, size = rs()
    if size == 1:
        pytest.skip('needs 2 ranks')
    return rank, size, size - 1, torch.full((2,), float(sum(range(1, size + 1))))


def test_group_timeout():
    """The group's timeout: wait() with a shorter one raises and the op goes
    on; an op not complete within the group's fails and makes the group
    unusable on that rank, whose destruction does not wait for the op,
    while the late rank's call completes it."""
    rank, size, late, want = late_rank()
    patient = kdist.new_group(timeout=timedelta(seconds=5))
    strict = kdist.new_group(timeout=timedelta(seconds=1))
    dist.barrier()
    t = torch.full((2,), float(rank + 1))
    if rank == late:
        time.sleep(1)
    w = dist.all_reduce(t, group=patient, async_op=True)
    if rank != late:
        start = time.monotonic()
        with pytest.raises(RuntimeError, match=r'allreduce c10d\.\S+: wait\(\) '
                           r'timed out after 200 ms; the collective goes on'):
            w.wait(timedelta(milliseconds=200))
        assert time.monotonic() - start < 0.9
    w.wait()
    assert torch.equal(t, want)

    dist.barrier()
    t = torch.full((2,), float(rank + 1))
    if rank == late:
        time.sleep(2.5)
        dist.all_reduce(t, group=strict)  # the others' ops still wait
        assert torch.equal(t, want)
    else:
        start = time.monotonic()
        with pytest.raises(RuntimeError, match=r'allreduce c10d\.\S+ timed out: '
                           r'not complete within the process group.s timeout '
                           r'of 1000 ms .*destroy it and make a new one'):
            dist.all_reduce(t, group=strict)
        assert 0.9 < time.monotonic() - start < 2.4
        with pytest.raises(RuntimeError, match=r'broadcast: this process '
                           r'group is unusable on this rank: its allreduce '
                           r'c10d\.\S+ timed out after 1000 ms'):
            dist.broadcast(t, src=0, group=strict)
        start = time.monotonic()
        dist.destroy_process_group(strict)  # the op still waits for `late`
        del strict  # the last hold on the ProcessGroupKolo
        assert time.monotonic() - start < 1
    dist.barrier()  # the late rank's all_reduce ended the op everywhere
    t = torch.ones(1)
    dist.all_reduce(t, group=patient)  # another group is unaffected
    assert t.item() == size
    if rank == late:
        dist.destroy_process_group(strict)
    dist.destroy_process_group(patient)


def test_group_destruction_waits_for_no_op():
    """Destroying a group (or dropping a work after it) returns at once
    while its ops wait for a late rank, even under a long timeout; the ops
    go on and complete when it comes, futures included."""
    rank, size, late, want = late_rank()
    group = kdist.new_group(timeout=timedelta(hours=1))
    dist.barrier()
    ts = [torch.full((2,), float(rank + 1)) for _ in range(3)]
    if rank == late:
        time.sleep(2)
        for t in ts:
            dist.all_reduce(t, group=group)
            assert torch.equal(t, want)
    else:
        dropped = dist.all_reduce(ts[0], group=group, async_op=True)
        fut = dist.all_reduce(ts[1], group=group, async_op=True).get_future()
        kept = dist.all_reduce(ts[2], group=group, async_op=True)
        start = time.monotonic()
        del dropped  # its op goes to the progress thread
        dist.destroy_process_group(group)
        del group  # the last hold on the ProcessGroupKolo
        del kept  # dropped after the group: not on this thread either
        assert time.monotonic() - start < 1
    dist.barrier()  # the late rank's calls ended the ops everywhere
    if rank != late:
        assert torch.equal(fut.wait()[0], want)
        for t in ts:
            assert torch.equal(t, want)
    else:
        dist.destroy_process_group(group)


def test_group_timeout_through_the_future():
    """The path DDP's comm hooks take: a work's future, driven by the
    group's progress thread, carries the timeout's error when its op is not
    complete within the group's timeout; then() callbacks see it too."""
    rank, size = rs()
    if size == 1:
        pytest.skip('needs 2 ranks')
    late = size - 1
    strict = kdist.new_group(timeout=timedelta(seconds=1))
    dist.barrier()
    t = torch.full((2,), float(rank + 1))
    if rank == late:
        time.sleep(2.5)
        dist.all_reduce(t, group=strict)
        assert torch.equal(t, torch.full((2,), float(sum(range(1, size + 1)))))
    else:
        start = time.monotonic()
        fut = dist.all_reduce(t, group=strict, async_op=True).get_future()
        chained = fut.then(lambda f: f.value())
        with pytest.raises(RuntimeError, match=r'allreduce c10d\.\S+ timed '
                           r'out: not complete within the process group.s '
                           r'timeout of 1000 ms'):
            fut.wait()
        assert 0.9 < time.monotonic() - start < 2.4
        with pytest.raises(RuntimeError, match='timed out'):
            chained.wait()
    dist.barrier()
    dist.destroy_process_group(strict)


def test_send_recv_refused():
    with pytest.raises(RuntimeError, match='send is not supported'):
        dist.send(torch.ones(1), dst=0)
    with pytest.raises(RuntimeError, match='recv is not supported'):
        dist.recv(torch.ones(1), src=0)


class _Net(torch.nn.Module):
    """An MLP, with a layer that takes no part if `unused`
    (find_unused_parameters)."""

    def __init__(self, unused):
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 1)
        if unused:
            self.unused = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


def _train(seed, group, extras=False):
    """DDP, a few SGD steps of float64; extras: find_unused_parameters, a
    step accumulated under no_sync, and the fp16 compression comm hook."""
    # pylint: disable=import-outside-toplevel
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    torch.manual_seed(seed)
    model = _Net(extras).double()
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, process_group=group, bucket_cap_mb=0.0001,
        find_unused_parameters=extras)
    if extras:
        ddp.register_comm_hook(group, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1000 + dist.get_rank())
    for step in range(4):
        x = torch.randn(5, 8, dtype=torch.float64, generator=gen)
        if extras and step == 1:
            with ddp.no_sync():
                ddp(x).square().mean().backward()
            continue
        ddp(x).square().mean().backward()
        opt.step()
        opt.zero_grad()
    return [p.detach().clone() for p in model.parameters()]


def test_ddp_on_kolo_equals_gloo():
    _, size = rs()
    if size > 2:
        pytest.skip('bit-for-bit equality needs sums of 2 (order-free)')
    gloo = dist.new_group(list(range(size)), backend='gloo')
    for extras in (False, True):
        on_kolo = _train(7, None, extras)
        on_gloo = _train(7, gloo, extras)
        assert all(torch.equal(a, b) for a, b in zip(on_kolo, on_gloo))
    if size == 2:  # the runs differ from each other
        assert not torch.equal(_train(7, None)[0], _train(8, None)[0])
    dist.destroy_process_group(gloo)


TORCHRUN_JOB = '''\
import torch, torch.distributed as dist
import kolo.torch.distributed
dist.init_process_group("kolo")
t = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(t)
print("RESULT", dist.get_rank(), dist.get_world_size(), t.item(), flush=True)
dist.destroy_process_group()
'''


@pytest.mark.skipif('KOLO_COORDINATOR' in os.environ,
                    reason='starts torchrun itself (run.sh 1)')
@pytest.mark.parametrize('launch', [[], ['--standalone']])
def test_under_torchrun(tmp_path, launch):
    # torch 1.13's torchrun fails on Python 3.11 without --redirects/--tee
    # (docs/troubleshooting.md); free ports, never 29500.
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel
    script = tmp_path / 'job.py'
    script.write_text(TORCHRUN_JOB)
    rdzv = [] if launch else ['--master_port', str(_free_port())]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith('KOLO_') or k == 'KOLO_BIN_DIR'}
    out = subprocess.run(
        [sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node',
         '2', '--redirects', '1', '--tee', '1', *launch, *rdzv, str(script)],
        capture_output=True, text=True, env=env, timeout=120, check=False)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    for rank in (0, 1):
        assert f'RESULT {rank} 2 3.0' in text, text


def test_zero_redundancy_optimizer():
    """ZeroRedundancyOptimizer (each rank steps its shard of the parameters,
    then broadcasts it) on the kolo group ends where plain SGD does."""
    # pylint: disable=import-outside-toplevel
    from torch.distributed.optim import ZeroRedundancyOptimizer
    results = []
    for zero in (False, True):
        torch.manual_seed(3)
        model = _Net(False).double()
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        opt = (ZeroRedundancyOptimizer(ddp.parameters(),
                                       optimizer_class=torch.optim.SGD,
                                       lr=0.1)
               if zero else torch.optim.SGD(ddp.parameters(), lr=0.1))
        gen = torch.Generator().manual_seed(50 + dist.get_rank())
        for _ in range(3):
            x = torch.randn(4, 8, dtype=torch.float64, generator=gen)
            ddp(x).square().mean().backward()
            opt.step()
            opt.zero_grad()
        results.append([p.detach().clone() for p in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*results))


MISMATCH_JOB = '''\
import os, sys
import torch.distributed as dist
import kolo.torch.distributed
rank = int(os.environ["RANK"])  # kolo's rank; torch is told the other one
try:
    dist.init_process_group("kolo", init_method=sys.argv[1],
                            rank=1 - rank, world_size=2)
except RuntimeError as e:
    print("REFUSED", rank, e, flush=True)
'''


@pytest.mark.skipif('KOLO_COORDINATOR' in os.environ,
                    reason='starts its own processes (run.sh 1)')
def test_ranks_torch_and_kolo_disagree_on(tmp_path):
    # pylint: disable=import-outside-toplevel
    import subprocess
    import sys
    script = tmp_path / 'job.py'
    script.write_text(MISMATCH_JOB)
    url = f'tcp://127.0.0.1:{_free_port()}'
    env = {k: v for k, v in os.environ.items() if not k.startswith('KOLO_')}
    env.update(WORLD_SIZE='2', MASTER_ADDR='127.0.0.1',
               MASTER_PORT=str(_free_port()))
    jobs = [subprocess.Popen([sys.executable, str(script), url],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env=dict(env, RANK=str(r)))
            for r in (0, 1)]
    outs = [j.communicate(timeout=120)[0] for j in jobs]
    for r, out in enumerate(outs):
        assert f'REFUSED {r} kolo backend: torch says rank {1 - r} of 2, ' \
               f'kolo says rank {r} of 2' in out, out


def test_reinit_rendezvous_runs_on_kolo():
    # Last in the file: it replaces the module's group. reinit() makes the
    # default group through kolo.torch.epoch_store.EpochStore, whose add()
    # is a kolo collective (torch's store-based barrier) and whose other
    # operations are refused by name.
    old = dist.group.WORLD
    world = kdist.reinit()
    rank, size = rs()
    assert world is dist.group.WORLD and world is not old
    t = torch.tensor([rank + 1.0])
    dist.all_reduce(t)
    assert t.item() == size * (size + 1) / 2
    members = [0, size - 1] if size > 2 else list(range(size))
    sub = kdist.new_group(members)  # torch barriers on the epoch store
    if rank in members:
        t = torch.ones(1)
        dist.all_reduce(t, group=sub)
        assert t.item() == len(members)
    store = dist.distributed_c10d._get_default_store()  # pylint: disable=protected-access
    assert store.add('test.count', rank + 1) == size * (size + 1) // 2
    assert store.add('test.count', 0) == size * (size + 1) // 2
    with pytest.raises(RuntimeError, match=r"epoch store .* supports only "
                       r"add\(\).* get\(\)"):
        store.get('test.count')
    # A gloo group needs set/get: refused on every rank, before torch's
    # barrier, and the kolo group goes on.
    with pytest.raises(RuntimeError, match='supports only add'):
        dist.new_group(list(range(size)), backend='gloo')
    dist.all_reduce(t)
