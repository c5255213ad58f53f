"""Elastic DDP: torch.nn.parallel.DistributedDataParallel on kolo's
torch.distributed backend, in kolo.torch.elastic's retry loop. A worker
lost mid-step fails the survivors' pending collectives; the loop restores
the last commit (a TorchState of the model and optimizer), makes the new
epoch's process group (kolo.torch.distributed.reinit()), wraps DDP again
and goes on: no process restarts, no checkpoint is read.

    kolorun -np 4 --min-np 2 --max-np 4 --fault kill:rank=2:after=4s \\
        /usr/bin/python3 examples/torch_ddp_elastic_train.py

A float64 MLP regresses a fixed target on data fixed by the global step
(step s uses samples s*B .. s*B+B-1 of a data set drawn from --seed, rank r
of W taking every W-th of them). The result does not depend on the world
size, bit for bit: each sample's gradient is computed alone (a batch of
one, under DDP's no_sync) and rounded to a grid of 2**-GRID_BITS; a rank's
sum of those is exact, DDP's allreduce of them (a comm hook that sums,
where DDP's default averages) is exact too, and the update is the same
function of that exact sum at any size. So a run that loses a worker,
replays from its last commit at 3 ranks and takes a replacement back ends
with the unfaulted run's parameters exactly.

Output: ``CAUGHT rank=R RuntimeError: kolo membership change (lost)...``
where a collective of the process group failed with the change named (the
rank is the ended epoch's), ``RESET size=N rank=R`` after each membership
change (every rank), ``RECOVERED rank=R after=ERROR seconds=S`` on each survivor at its first
step completed after the loop caught ERROR (HorovodInternalError: a worker
lost; HostsUpdatedInterrupt: one joined or left at a commit; S from the
catch), ``LOSS step=N
loss=L`` every --log-every steps (rank 0), and at the end ``FINAL
params=DIGEST steps=N`` (a SHA-256 of the parameters, rank 0) and
``CONSISTENT ranks=N`` once every rank holds the same digest (else it
exits 3).
"""

import argparse
import hashlib
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import kolo.torch as hvd
import kolo.torch.distributed as kdist

GRID_BITS = 32  # per-sample gradients are rounded to multiples of 2**-32


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.Tanh(),
        torch.nn.Linear(16, 16), torch.nn.Tanh(),
        torch.nn.Linear(16, 1)).double()


def make_data(n, seed):
    """n samples (x, y): y a fixed smooth function of x plus noise."""
    g = torch.Generator().manual_seed(seed * 7919 + 1)
    x = torch.randn(n, 8, generator=g, dtype=torch.float64)
    y = torch.sin(x[:, :4].sum(1, keepdim=True)) + \
        0.1 * torch.randn(n, 1, generator=g, dtype=torch.float64)
    return x, y


def sum_hook(_state, bucket):
    """DDP comm hook: the bucket summed over the ranks (DDP's default
    divides by the world size, which rounds differently at each size)."""
    fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
    return fut.then(lambda f: f.value()[0])


def params_digest(model):
    h = hashlib.sha256()
    for _, p in sorted(model.state_dict().items()):
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--steps', type=int, default=120)
    parser.add_argument('--batch-size', type=int, default=12,
                        help='global batch (at least the largest size)')
    parser.add_argument('--commit-every', type=int, default=5)
    parser.add_argument('--lr', type=float, default=0.05)
    parser.add_argument('--seed', type=int, default=7)
    parser.add_argument('--step-ms', type=float, default=0.0,
                        help='sleep per step (to stretch a run for faults)')
    parser.add_argument('--log-every', type=int, default=20)
    args = parser.parse_args()

    hvd.init()
    torch.set_num_threads(1)
    model = make_model(args.seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    data_x, data_y = make_data(args.steps * args.batch_size, args.seed)
    state = hvd.elastic.TorchState(model, optimizer, step=0)
    failed_at = []  # when this survivor's last collective failed

    def on_reset():
        print(f'RESET size={hvd.size()} rank={hvd.rank()}', flush=True)
    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def train(state):
        try:
            steps(state)
        except Exception as e:
            # The backend's RuntimeError, as kolo's error it stands for.
            why = hvd.elastic.membership_error(e) or e
            failed_at.append((time.monotonic(), type(why).__name__))
            text = str(e)
            at = text.find('kolo membership change')
            if at >= 0:
                print(f'CAUGHT rank={hvd.rank()} {type(e).__name__}: '
                      f'{text[at:at + 40]}...', flush=True)
            raise

    def steps(state):
        # The epoch's process group, and DDP over it (both belong to the
        # epoch: a membership change brings the loop back here).
        kdist.reinit()
        ddp = DDP(model)
        ddp.register_comm_hook(None, sum_hook)
        rank, size = dist.get_rank(), dist.get_world_size()
        scale = 2.0 ** GRID_BITS
        while state.step < args.steps:
            base = state.step * args.batch_size
            mine = range(base + rank, base + args.batch_size, size)
            grid = [torch.zeros_like(p) for p in model.parameters()]
            loss_sum = torch.zeros((), dtype=torch.float64)
            with ddp.no_sync():
                for i in mine:
                    optimizer.zero_grad()
                    loss = (ddp(data_x[i:i + 1]) - data_y[i:i + 1]).pow(2).sum()
                    loss.backward()
                    loss_sum += loss.detach()
                    for q, p in zip(grid, model.parameters()):
                        q += torch.round(p.grad * scale)
            # The exact per-rank sums go through DDP's allreduce: a
            # backward of a zero loss adds 0 to each gradient.
            for q, p in zip(grid, model.parameters()):
                p.grad.copy_(q)
            ddp(data_x[base:base + 1]).sum().mul(0.0).backward()
            for p in model.parameters():
                p.grad.div_(scale * args.batch_size)
            optimizer.step()
            if args.step_ms:
                time.sleep(args.step_ms / 1000.0)
            state.step += 1
            if failed_at:
                when, why = failed_at[-1]
                print(f'RECOVERED rank={rank} after={why} seconds='
                      f'{time.monotonic() - when:.3f}', flush=True)
                failed_at.clear()
            if state.step % args.log_every == 0:
                dist.all_reduce(loss_sum)
                if rank == 0:
                    print(f'LOSS step={state.step} '
                          f'loss={loss_sum.item() / args.batch_size:.6f}',
                          flush=True)
            if state.step % args.commit_every == 0:
                state.commit()
        state.commit()

    train(state)

    digest = params_digest(model)
    digests = hvd.allgather_object(digest)
    if hvd.rank() == 0:
        print(f'FINAL params={digest} steps={state.step}', flush=True)
        if len(set(digests)) != 1:
            print(f'INCONSISTENT parameters across ranks: {digests}',
                  flush=True)
            sys.exit(3)
        print(f'CONSISTENT ranks={len(digests)}', flush=True)
    if dist.is_initialized():
        dist.destroy_process_group()
    hvd.shutdown()


if __name__ == '__main__':
    main()
