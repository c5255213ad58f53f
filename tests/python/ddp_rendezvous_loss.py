"""A kolorun worker for test_example_torch_ddp_elastic.py: in an elastic
job of 3, the worker of rank VICTIM (argv[1]) SIGKILLs itself inside
kolo.torch.distributed.reinit(), after the epoch's token went out and
before torch's init_process_group, so the others meet the loss inside
torch's rendezvous (the store-based barrier, whose adds are kolo
collectives), not in a collective of theirs. That must end in kolo's
membership error on every survivor, and kolo.torch.elastic.run must make
the 2 survivors' group, whose all_reduce then works. Prints ``REINIT-FAILED rank=R ERROR after S s`` on
each survivor and ``OK rank=R size=N sum=X`` once the new group works."""

import os
import signal
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import kolo.torch as hvd
import kolo.torch.distributed as kdist


def main():
    victim = int(sys.argv[1])
    hvd.init()
    init_process_group = dist.init_process_group

    def dying_init(*args, **kwargs):
        if hvd.size() == 3 and hvd.rank() == victim:
            os.kill(os.getpid(), signal.SIGKILL)
        return init_process_group(*args, **kwargs)

    dist.init_process_group = dying_init
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, n=0)

    @hvd.elastic.run
    def train(_state):
        start = time.monotonic()
        try:
            kdist.reinit(timeout=timedelta(seconds=3))
        except Exception as e:
            print(f'REINIT-FAILED rank={hvd.rank()} {type(e).__name__} '
                  f'after {time.monotonic() - start:.2f} s', flush=True)
            raise
        x = torch.ones(1)
        dist.all_reduce(x)
        print(f'OK rank={dist.get_rank()} size={dist.get_world_size()} '
              f'sum={x.item():g}', flush=True)

    train(state)
    dist.destroy_process_group()
    hvd.shutdown()


if __name__ == '__main__':
    main()
