"""The training layer of kolo.torch (issue 21) under kolorun (2 and 3
ranks): autograd through every collective against a single-process
computation; DistributedOptimizer against a single-process run on the
concatenated batch; broadcast_parameters / broadcast_optimizer_state for
every torch.optim optimizer Horovod supports; broadcast_object /
allgather_object; sparse gradients; the optimizer's construction errors.
"""

import warnings

import pytest
import torch

import kolo.torch as hvd

pytestmark = pytest.mark.skipif(
    'KOLO_COORDINATOR' not in __import__('os').environ,
    reason='runs under kolorun (tests/python/run.sh NP ...)')

F64 = torch.float64


def rank_data(r, shape, scale=1.0):
    """Deterministic, rank-dependent float64 values."""
    g = torch.Generator().manual_seed(1000 + r)
    return torch.randn(shape, generator=g, dtype=F64) * scale


def every_rank(make):
    """[make(r) for every rank r]."""
    return [make(r) for r in range(hvd.size())]


def same_everywhere(t):
    """True when t has the same bits on every rank."""
    g = hvd.allgather(t.detach().reshape(1, -1).contiguous())
    return all(torch.equal(g[0], g[i]) for i in range(g.shape[0]))


# ---- autograd ----------------------------------------------------------------

def test_allreduce_backward_is_the_allreduce_of_the_gradient():
    r, n = hvd.rank(), hvd.size()
    w = torch.arange(6, dtype=F64).reshape(3, 2)
    for op, average in ((hvd.Sum, None), (hvd.Average, None), (None, True)):
        x = rank_data(r, (3, 2)).requires_grad_()
        y = hvd.allreduce(x, average=average, op=op, name=f'ag.ar.{op}')
        (y * w).sum().backward()
        factor = n if op == hvd.Sum else 1.0
        assert torch.allclose(x.grad, w * factor, rtol=0, atol=1e-12)


def test_grouped_allreduce_backward():
    n = hvd.size()
    xs = [rank_data(hvd.rank() + k, (2 + k,)).requires_grad_()
          for k in range(3)]
    ys = hvd.grouped_allreduce(xs, op=hvd.Sum, name='ag.gar')
    sum((y * (k + 1)).sum() for k, y in enumerate(ys)).backward()
    for k, x in enumerate(xs):
        assert torch.equal(x.grad, torch.full_like(x, (k + 1) * n))


def test_allgather_backward_against_a_single_process_computation():
    r, n = hvd.rank(), hvd.size()
    rows = [r_ + 1 for r_ in range(n)]  # first dimensions differ
    x = rank_data(r, (rows[r], 2)).requires_grad_()
    g = hvd.allgather(x, name='ag.ag')
    (g ** 2).sum().backward()
    # Reference: every rank's loss is sum(concat^2); the average over ranks
    # of d/dconcat is 2*concat; this rank's rows.
    full = torch.cat(every_rank(lambda q: rank_data(q, (rows[q], 2))))
    offset = sum(rows[:r])
    assert torch.allclose(x.grad, 2 * full[offset:offset + rows[r]])


def test_grouped_allgather_backward():
    r = hvd.rank()
    xs = [rank_data(r, (r + 1, 2)).requires_grad_(),
          rank_data(r + 10, (2, 3)).requires_grad_()]
    gs = hvd.grouped_allgather(xs, name='ag.gag')
    (gs[0].sum() * 3 + (gs[1] ** 2).sum()).backward()
    assert torch.allclose(xs[0].grad, torch.full_like(xs[0], 3.0))
    assert torch.allclose(xs[1].grad, 2 * xs[1].detach())


def test_broadcast_backward_reaches_the_root_only():
    r, n = hvd.rank(), hvd.size()
    root = n - 1
    x = rank_data(r, (4,)).requires_grad_()
    y = hvd.broadcast(x, root, name='ag.bc')
    assert torch.equal(y.detach(), rank_data(root, (4,)))
    (y * 2).sum().backward()
    expect = torch.full((4,), 2.0, dtype=F64) if r == root else \
        torch.zeros(4, dtype=F64)
    assert torch.equal(x.grad, expect)


def test_alltoall_backward_sends_the_gradient_back():
    r, n = hvd.rank(), hvd.size()
    splits = [(q + r) % 2 + 1 for q in range(n)]
    x = rank_data(r, (sum(splits), 2)).requires_grad_()
    out, received = hvd.alltoall(x, splits=torch.tensor(splits,
                                                        dtype=torch.int32),
                                 name='ag.a2a')
    assert not received.requires_grad
    weight = torch.arange(out.numel(), dtype=F64).reshape(out.shape) + r
    (out * weight).sum().backward()
    # Row i of x went to some rank q, which multiplied it by its weight;
    # sending the gradient back returns exactly those weights, in order.
    back, _ = hvd.alltoall(weight.contiguous(), splits=received,
                           name='ag.a2a.check')
    assert torch.equal(x.grad, back)


@pytest.mark.parametrize('op', [hvd.Sum, hvd.Average])
def test_reducescatter_backward_is_horovods(op):
    n = hvd.size()
    x = rank_data(hvd.rank(), (2 * n, 3)).requires_grad_()
    y = hvd.reducescatter(x, op=op, prescale_factor=0.5, name=f'ag.rs.{op}')
    y.sum().backward()
    # Horovod: allgather(grad * (size if Sum) * prescale * postscale).
    factor = (n if op == hvd.Sum else 1) * 0.5
    assert torch.equal(x.grad, torch.full_like(x, factor))


def test_grouped_reducescatter_backward():
    n = hvd.size()
    xs = [rank_data(hvd.rank(), (n, 2)).requires_grad_(),
          rank_data(hvd.rank(), (2 * n,)).requires_grad_()]
    ys = hvd.grouped_reducescatter(xs, op=hvd.Sum, name='ag.grs')
    sum(y.sum() for y in ys).backward()
    for x in xs:
        assert torch.equal(x.grad, torch.full_like(x, float(n)))


# ---- DistributedOptimizer ----------------------------------------------------

def make_model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(),
                               torch.nn.Linear(7, 1)).double()


def batches(steps, per_rank):
    """Every step's global batch: per_rank rows for each rank."""
    g = torch.Generator().manual_seed(7)
    n = hvd.size()
    return [(torch.randn(per_rank * n, 5, generator=g, dtype=F64),
             torch.randn(per_rank * n, 1, generator=g, dtype=F64))
            for _ in range(steps)]


def shard(t, per_rank):
    r = hvd.rank()
    return t[r * per_rank:(r + 1) * per_rank]


def reference_run(make_opt, data, passes=1, clip=None):
    """The same training in this process alone, on the concatenated
    batches (each pass's loss is the mean over the whole global batch)."""
    model = make_model()
    opt = make_opt(model.parameters())
    for i in range(0, len(data), passes):
        opt.zero_grad()
        for x, y in data[i:i + passes]:
            ((model(x) - y) ** 2).mean().backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
    return model


def distributed_run(make_opt, data, per_rank, passes=1, clip=None, **kw):
    model = make_model()
    opt = hvd.DistributedOptimizer(make_opt(model.parameters()),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=passes, **kw)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for i in range(0, len(data), passes):
        opt.zero_grad()
        for x, y in data[i:i + passes]:
            ((model(shard(x, per_rank)) - shard(y, per_rank)) ** 2).mean(
            ).backward()
        if clip is not None:
            opt.synchronize()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            with opt.skip_synchronize():
                opt.step()
        else:
            opt.step()
    return model


def assert_matches(model, ref, tol):
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        assert same_everywhere(p), name
        assert torch.allclose(p, q, rtol=tol, atol=tol), (name, p, q)


@pytest.mark.parametrize('passes', [1, 3])
def test_optimizer_matches_a_single_process_run(passes):
    data = batches(6, per_rank=4)
    sgd = lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9)  # noqa: E731
    model = distributed_run(sgd, data, 4, passes=passes)
    # backward_passes_per_step accumulates passes gradients (a sum), as
    # the reference does.
    assert_matches(model, reference_run(sgd, data, passes=passes), 1e-12)


def test_optimizer_with_groups_and_with_a_list_of_groups():
    data = batches(4, per_rank=3)
    adam = lambda ps: torch.optim.Adam(ps, lr=0.01)  # noqa: E731
    ref = reference_run(adam, data)
    assert_matches(distributed_run(adam, data, 3, groups=2), ref, 1e-12)
    model = make_model()
    params = list(model.parameters())
    opt = hvd.DistributedOptimizer(torch.optim.Adam(params, lr=0.01),
                                   named_parameters=model.named_parameters(),
                                   groups=[[params[0], params[2]]])
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for x, y in data:
        opt.zero_grad()
        ((model(shard(x, 3)) - shard(y, 3)) ** 2).mean().backward()
        opt.step()
    assert_matches(model, ref, 1e-12)


def test_optimizer_with_fp16_compression():
    data = batches(4, per_rank=4)
    sgd = lambda ps: torch.optim.SGD(ps, lr=0.05)  # noqa: E731
    model = distributed_run(sgd, data, 4, compression=hvd.Compression.fp16)
    # The averaged gradients went through float16: 3 decimal digits.
    assert_matches(model, reference_run(sgd, data), 2e-3)


def test_gradient_clipping_between_synchronize_and_step():
    data = batches(4, per_rank=4)
    sgd = lambda ps: torch.optim.SGD(ps, lr=0.5)  # noqa: E731
    model = distributed_run(sgd, data, 4, clip=0.05)
    assert_matches(model, reference_run(sgd, data, clip=0.05), 1e-12)


def test_step_after_synchronize_warns():
    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    model(torch.ones(2, 5, dtype=F64)).sum().backward()
    opt.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        opt.step()
    assert any('skip_synchronize' in str(w.message) for w in caught)


def test_parameter_whose_requires_grad_changes():
    model = make_model()
    first = model[0].weight
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    before = first.detach().clone()
    first.requires_grad_(False)
    opt.zero_grad()
    (model(rank_data(hvd.rank(), (3, 5))) ** 2).sum().backward()
    opt.step()
    # Every rank submitted the frozen parameter's (zero) gradient anyway:
    # nothing hangs, and it did not move.
    assert torch.equal(first.detach(), before)
    for p in model.parameters():
        assert same_everywhere(p)
    first.requires_grad_(True)


def test_zero_grad_before_step_is_refused_and_double_backward_too():
    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    x = torch.ones(2, 5, dtype=F64)
    model(x).sum().backward()
    with pytest.raises(AssertionError, match='zero_grad'):
        opt.zero_grad()
    with pytest.raises(AssertionError, match='backward_passes_per_step'):
        model(x).sum().backward()
    opt.step()


def test_construction_errors():
    model = make_model()
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match='sequence of tuples'):
        hvd.DistributedOptimizer(sgd, named_parameters=list(
            model.parameters()))
    named = list(model.named_parameters())
    with pytest.raises(ValueError, match='must be unique'):
        hvd.DistributedOptimizer(sgd, named_parameters=[named[0], named[0]] +
                                 named[1:])
    with pytest.raises(ValueError, match='were not named'):
        hvd.DistributedOptimizer(sgd, named_parameters=named[1:])
    with pytest.raises(ValueError, match='must be > 0'):
        hvd.DistributedOptimizer(sgd, backward_passes_per_step=0)
    with pytest.raises(ValueError, match='non-negative integer'):
        hvd.DistributedOptimizer(sgd, groups=-1)
    with pytest.raises(ValueError, match='consist of torch.Tensor'):
        hvd.DistributedOptimizer(sgd, groups=[[1]])
    p = next(model.parameters())
    with pytest.raises(ValueError, match='only appear once'):
        hvd.DistributedOptimizer(sgd, groups=[[p], [p]])
    with pytest.raises(ValueError, match='gradient_predivide_factor'):
        hvd.DistributedOptimizer(sgd, op=hvd.Sum, gradient_predivide_factor=2)
    opt = hvd.DistributedOptimizer(sgd)
    assert isinstance(opt, torch.optim.SGD)
    assert opt._parameter_names[p] == 'allreduce.noname.0.0'


def test_gradient_predivide_factor_gives_the_same_average():
    data = batches(3, per_rank=2)
    sgd = lambda ps: torch.optim.SGD(ps, lr=0.1)  # noqa: E731
    model = distributed_run(sgd, data, 2, gradient_predivide_factor=4.0)
    assert_matches(model, reference_run(sgd, data), 1e-12)


# ---- state broadcast ---------------------------------------------------------

OPTIMIZERS = [
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
    lambda ps: torch.optim.Adam(ps, lr=0.01),
    lambda ps: torch.optim.AdamW(ps, lr=0.01),
    lambda ps: torch.optim.Adamax(ps, lr=0.01),
    lambda ps: torch.optim.NAdam(ps, lr=0.01),
    lambda ps: torch.optim.RAdam(ps, lr=0.01),
    lambda ps: torch.optim.Adagrad(ps, lr=0.01),
    lambda ps: torch.optim.Adadelta(ps),
    lambda ps: torch.optim.RMSprop(ps, lr=0.01, momentum=0.5),
    lambda ps: torch.optim.ASGD(ps, lr=0.01),
    lambda ps: torch.optim.Rprop(ps, lr=0.01),
]


@pytest.mark.parametrize('index', range(len(OPTIMIZERS)))
def test_broadcast_optimizer_state(index):
    model = make_model(seed=hvd.rank())  # every rank differs
    opt = OPTIMIZERS[index](model.parameters())
    # Rank-dependent state: a few local steps, and a rank-dependent lr.
    for k in range(hvd.rank() + 1):
        opt.zero_grad()
        (model(rank_data(hvd.rank() + k, (4, 5))) ** 2).sum().backward()
        opt.step()
    for group in opt.param_groups:
        group['lr'] = 0.5 + hvd.rank()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]['lr'] == 0.5
    for state in opt.state.values():
        for key, value in state.items():
            if torch.is_tensor(value):
                assert same_everywhere(value.double().reshape(-1)), key


def test_broadcast_optimizer_state_of_a_fresh_optimizer_and_lbfgs():
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=0.01 * (hvd.rank() + 1))
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]['lr'] == 0.01
    assert len(opt.state) == len(list(model.parameters()))
    with pytest.raises(ValueError, match='LBFGS'):
        hvd.broadcast_optimizer_state(
            torch.optim.LBFGS(model.parameters()), root_rank=0)


def test_broadcast_parameters_takes_dicts_and_lists_only():
    model = make_model(seed=hvd.rank())
    hvd.broadcast_parameters(list(model.named_parameters()), root_rank=0)
    for p in model.parameters():
        assert same_everywhere(p)
    with pytest.raises(ValueError, match='invalid params'):
        hvd.broadcast_parameters(model.parameters(), root_rank=0)


def test_broadcast_object_and_allgather_object():
    obj = {'rank': hvd.rank(), 'nested': [1, (2, 'x')], 'f': lambda v: v + 1}
    got = hvd.broadcast_object(obj, root_rank=hvd.size() - 1)
    assert got['rank'] == hvd.size() - 1 and got['f'](1) == 2
    everyone = hvd.allgather_object({'r': hvd.rank(), 'pad': 'x' * hvd.rank()})
    assert [e['r'] for e in everyone] == list(range(hvd.size()))


# ---- sparse ------------------------------------------------------------------

@pytest.mark.parametrize('sparse_as_dense', [False, True])
def test_sparse_embedding_gradients(sparse_as_dense):
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 3, sparse=True).double()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(emb.parameters(), lr=1.0),
                                   named_parameters=emb.named_parameters(),
                                   sparse_as_dense=sparse_as_dense)
    before = emb.weight.detach().clone()
    idx = torch.tensor([hvd.rank(), 5])  # row 5 on every rank
    emb(idx).sum().backward()
    opt.step()
    # Average of the ranks' gradients: 1/n per rank that touched a row.
    n = hvd.size()
    expect = before.clone()
    for r in range(n):
        expect[r] -= 1.0 / n
    expect[5] -= 1.0
    assert torch.allclose(emb.weight.detach(), expect, atol=1e-12)


def test_sparse_allreduce_async_returns_a_callable():
    t = torch.sparse_coo_tensor(torch.tensor([[hvd.rank()]]),
                                torch.tensor([2.0], dtype=F64), (4,))
    handle = hvd.sparse_allreduce_async(t, name='sparse.direct', op=hvd.Sum)
    assert callable(handle)
    out = handle().coalesce().to_dense()
    expect = torch.zeros(4, dtype=F64)
    expect[:hvd.size()] = 2.0
    assert torch.equal(out, expect)


# ---- SyncBatchNorm -------------------------------------------------------------

def test_sync_batch_norm_refuses_cpu_input():
    bn = hvd.SyncBatchNorm(3)
    with pytest.raises(ValueError, match='on GPU'):
        bn(torch.ones(4, 3))


def test_sync_batch_norm_math_matches_a_batch_norm_of_the_global_batch():
    from kolo.torch.sync_batch_norm import \
        _SyncBatchNorm  # pylint: disable=import-outside-toplevel
    r, n = hvd.rank(), hvd.size()
    rows = [q + 2 for q in range(n)]  # uneven slices
    xs = [rank_data(q, (rows[q], 3, 4)) for q in range(n)]
    weight = torch.tensor([1.0, 2.0, -0.5], dtype=F64, requires_grad=True)
    bias = torch.tensor([0.1, 0.0, 0.3], dtype=F64, requires_grad=True)
    upstream = [rank_data(q + 50, (rows[q], 3, 4)) for q in range(n)]
    # Reference: one batch norm over the concatenated batch.
    ref_bn = torch.nn.BatchNorm1d(3).double()
    with torch.no_grad():
        ref_bn.weight.copy_(weight)
        ref_bn.bias.copy_(bias)
    full = torch.cat(xs).requires_grad_()
    ref_out = ref_bn(full)
    (ref_out * torch.cat(upstream)).sum().backward()
    # This rank's slice through the synchronised function.
    x = xs[r].clone().requires_grad_()
    rm, rv = torch.zeros(3, dtype=F64), torch.ones(3, dtype=F64)
    out = _SyncBatchNorm.apply(x, weight, bias, rm, rv, 1e-5, 0.1)
    (out * upstream[r]).sum().backward()
    lo = sum(rows[:r])
    assert torch.allclose(out, ref_out[lo:lo + rows[r]], atol=1e-10)
    assert torch.allclose(x.grad, full.grad[lo:lo + rows[r]], atol=1e-10)
    assert torch.allclose(rm, ref_bn.running_mean, atol=1e-12)
    assert torch.allclose(rv, ref_bn.running_var, atol=1e-12)
    # weight/bias gradients are local: their sum over ranks is the whole
    # batch's.
    total_w = hvd.allreduce(weight.grad.clone(), op=hvd.Sum, name='bn.gw')
    assert torch.allclose(total_w, ref_bn.weight.grad, atol=1e-10)
