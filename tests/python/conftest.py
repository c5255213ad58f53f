"""Shared set-up of kolo's Python tests.

Under kolorun every rank runs the same tests in the same order; the session
fixture joins the job once (test_lifecycle.py re-inits on its own). A test
that fails on one rank would leave the other ranks waiting in a collective,
so a failure ends this process at once (after pytest printed it): kolorun
then ends the job with a non-zero exit, and every wait has a deadline.

Helpers: rank-dependent data and Horovod's scaling arithmetic, computed
independently of kolo for exact comparisons.
"""

import os
import sys

import pytest
import torch

import kolo.torch as hvd

MULTI = 'KOLO_COORDINATOR' in os.environ  # under kolorun


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report):
    if MULTI and report.failed:
        sys.stdout.write(f'\nFAILED on rank {os.environ.get("KOLO_RANK")}: '
                         f'{report.nodeid}\n{report.longreprtext}\n')
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)


@pytest.fixture(scope='session', autouse=True)
def job():
    if not MULTI:
        yield None
        return
    hvd.init()
    yield hvd
    if hvd.is_initialized():
        hvd.barrier()
        hvd.shutdown()


ALL_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
              torch.float16, torch.bfloat16, torch.float32, torch.float64,
              torch.bool]
NUMERIC = [d for d in ALL_DTYPES if d is not torch.bool]
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def data(rank, shape, dtype):
    """Small values (sums over 3 ranks stay exact in every dtype)."""
    n = 1
    for d in shape:
        n *= d
    base = torch.arange(n, dtype=torch.int64).reshape(shape)
    if dtype is torch.bool:
        return ((base + rank) % 2 == 0)
    return ((base * 7 + rank * 3) % 13 + 1).to(dtype)


def horovod_scale(x, factor):
    """x * factor per element as Horovod's CPU path computes it."""
    if factor == 1.0:
        return x.clone()
    if x.dtype in (torch.float16, torch.bfloat16):
        return (x.float() * torch.tensor(factor, dtype=torch.float32)).to(
            x.dtype)
    if x.dtype is torch.float32:
        return x * torch.tensor(factor, dtype=torch.float32)
    if x.dtype is torch.float64:
        return x * factor
    # integers: double, truncated toward zero, wrapped to the width
    return (x.double() * factor).trunc().to(torch.int64).to(x.dtype)


def reference(tensors, op, pre=1.0, post=1.0):
    """Horovod's result of `op` over `tensors` (one per rank)."""
    n = len(tensors)
    xs = [horovod_scale(t, pre) for t in tensors]
    dtype = xs[0].dtype
    if op in (hvd.Sum, hvd.Average):
        if dtype is torch.bool:
            out = torch.stack(xs).any(0)
        elif dtype.is_floating_point:
            out = torch.stack([x.double() for x in xs]).sum(0).to(dtype)
        else:
            out = torch.stack([x.to(torch.int64) for x in xs]).sum(0).to(dtype)
        if op == hvd.Average:
            post = post / n
    elif op == hvd.Min:
        out = xs[0]
        for x in xs[1:]:
            out = torch.minimum(out, x)
    elif op == hvd.Max:
        out = xs[0]
        for x in xs[1:]:
            out = torch.maximum(out, x)
    elif op == hvd.Product:
        if dtype is torch.bool:
            out = torch.stack(xs).all(0)
        else:
            out = xs[0].clone()
            for x in xs[1:]:
                out = out * x
    return horovod_scale(out, post)
