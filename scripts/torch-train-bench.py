#!/usr/bin/python3
"""One side of the training benchmark (scripts/torch-train-bench.sh): a
data-parallel training loop, timed per step, through kolo.torch's
DistributedOptimizer (mode kolo, under kolorun), torch's
DistributedDataParallel on its Gloo backend (mode ddp, torchrun's env://
ranks) or DistributedDataParallel on kolo's c10d backend (mode ddp-kolo,
under kolorun: `import kolo.torch.distributed`, init_process_group("kolo")).
Same model, same per-rank batch, same optimizer, one thread per rank.

Models:
  cnn  the small CNN of examples/torch_train.py (~30 K parameters: the step
       is compute-bound);
  mlp  a 784-2048-2048-2048-10 MLP (~10.2 M parameters, 39 MiB of float32
       gradients per step: communication-bound).

Rank 0 prints one line:
  RESULT mode=kolo|ddp|ddp-kolo np=N model=M steps=S median_ms=X p10_ms=Y p90_ms=Z
(per-step wall time on rank 0, after --warmup steps).
"""

import argparse
import os
import statistics
import time

import torch
import torch.nn.functional as F


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 8, kernel_size=5)
        self.conv2 = torch.nn.Conv2d(8, 16, kernel_size=5)
        self.fc1 = torch.nn.Linear(16 * 4 * 4, 64)
        self.fc2 = torch.nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def mlp():
    return torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(784, 2048), torch.nn.ReLU(),
        torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
        torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
        torch.nn.Linear(2048, 10))


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--mode', choices=['kolo', 'ddp', 'ddp-kolo'],
                   required=True)
    p.add_argument('--model', choices=['cnn', 'mlp'], default='cnn')
    p.add_argument('--batch', type=int, default=32, help='per rank')
    p.add_argument('--steps', type=int, default=30)
    p.add_argument('--warmup', type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = Cnn() if args.model == 'cnn' else mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    if args.mode == 'kolo':
        import kolo.torch as hvd
        hvd.init()
        rank, size = hvd.rank(), hvd.size()
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        opt = hvd.DistributedOptimizer(
            opt, named_parameters=model.named_parameters())
        net = model
    else:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        if args.mode == 'ddp-kolo':
            import kolo.torch.distributed  # noqa: F401  (registers 'kolo')
        dist.init_process_group('kolo' if args.mode == 'ddp-kolo' else 'gloo')
        rank, size = dist.get_rank(), dist.get_world_size()
        net = DistributedDataParallel(model)

    g = torch.Generator().manual_seed(rank)
    images = torch.randn(args.batch, 1, 28, 28, generator=g)
    labels = torch.randint(0, 10, (args.batch,), generator=g)
    times = []
    for step in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(net(images), labels)
        loss.backward()
        opt.step()
        if step >= args.warmup:
            times.append((time.perf_counter() - t0) * 1e3)

    if rank == 0:
        q = statistics.quantiles(times, n=10)
        print(f'RESULT mode={args.mode} np={size} model={args.model} '
              f'steps={args.steps} median_ms={statistics.median(times):.2f} '
              f'p10_ms={q[0]:.2f} p90_ms={q[-1]:.2f}', flush=True)
    if args.mode == 'kolo':
        hvd.shutdown()
    else:
        dist.destroy_process_group()


if __name__ == '__main__':
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    main()
