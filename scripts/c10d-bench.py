#!/usr/bin/env python3
"""dist.all_reduce (float32, SUM) through torch.distributed on the `kolo`
backend against `gloo`, and kolo.torch's own allreduce_ beside them, in one
job, runs alternated (issue 40). kolo.torch runs twice: under one name, as
a training loop does (kolo's response cache then announces it as a bit),
and under a new name each call, which the cache never serves (as the kolo
backend named its collectives before its names repeated from one lap of
its call slots to the next: docs/pytorch.md). Every rank holds a kolo
default group and a gloo group of every rank; each round times each path
in turn (the order rotating by round), ITERS calls after a warm-up (70
calls of each path first: more than one lap of the group's call slots,
whose first calls the cache has not seen), and rank 0 prints the median
and best per call for each size.

    PYTHONPATH=build/python build/bin/kolorun -np 2 /usr/bin/python3 \\
        scripts/c10d-bench.py [ROUNDS] [ITERS]
"""

import itertools
import statistics
import sys
import time

import torch
import torch.distributed as dist

import kolo.torch as hvd
import kolo.torch.distributed  # noqa: F401  registers "kolo"

SIZES = [('4 B', 1), ('1 MiB', 1 << 18), ('64 MiB', 1 << 24)]


def timed(call, iters):
    """Seconds per call, each call timed alone (with a barrier-free loop)."""
    out = []
    for _ in range(iters):
        t0 = time.perf_counter()
        call()
        out.append(time.perf_counter() - t0)
    return out


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    iters = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    dist.init_process_group('kolo')
    gloo = dist.new_group(backend='gloo')
    rank = dist.get_rank()
    fresh = itertools.count()
    for label, n in SIZES:
        t = torch.ones(n)
        paths = {
            'kolo (c10d)': lambda: dist.all_reduce(t),
            'gloo (c10d)': lambda: dist.all_reduce(t, group=gloo),
            'kolo.torch': lambda: hvd.allreduce_(t, op=hvd.Sum,
                                                 name='bench'),
            'kolo.torch new names': lambda: hvd.allreduce_(
                t, op=hvd.Sum, name=f'bench.{next(fresh)}'),
        }
        k = iters if n < (1 << 20) else max(3, iters // 4)
        times = {p: [] for p in paths}
        for p in paths:  # one lap of the kolo group's 64 call slots and more
            timed(paths[p], 70)
        for r in range(rounds):
            names = list(paths)
            names = names[r % len(names):] + names[:r % len(names)]
            for p in names:
                timed(paths[p], 2)  # warm-up
                times[p] += timed(paths[p], k)
        if rank == 0:
            for p, ts in times.items():
                print(f'{label:>7} {p:<20} median {statistics.median(ts) * 1e6:10.1f} us'
                      f'  best {min(ts) * 1e6:10.1f} us  ({len(ts)} calls)',
                      flush=True)
    dist.destroy_process_group()


if __name__ == '__main__':
    main()
