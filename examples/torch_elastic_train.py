"""Elastic data-parallel training with kolo.torch, written as a Horovod
script (``import horovod.torch as hvd`` runs it on Horovod): the small CNN
of examples/torch_train.py on a synthetic MNIST-shaped data set drawn from
a fixed seed, through ``hvd.elastic.run``, ``TorchState`` and
``ElasticSampler``.

    kolorun -np 4 --min-np 2 --max-np 4 --fault kill:rank=2:after=8s \\
        /usr/bin/python3 examples/torch_elastic_train.py

Each step trains on one global batch of --batch-size samples, split over
the ranks (batch-size / size() each, so --batch-size must divide by every
size the job may have: 48 serves 1 to 4 ranks); the loss is summed over
the rank's samples and divided by the global batch, and the gradients are
summed (op=hvd.Sum): the update is the gradient of the mean loss over the
global batch at any size. The sampler fixes each epoch's order before it
takes out what was processed, so after a membership change the global
batches go on in the same sequence. A lost worker makes the survivors roll
back to the last commit (every --commit-every steps) and replay from there
at the new size; a replacement joins at a commit and receives the state.

So a run with faults trains on the same batches as one without, and its
final loss equals the unfaulted run's up to float32 rounding: the partial
sums of a replayed step are added in another order at another size (about
1e-7 relative per step). Stated tolerance: 0.5 % relative on the final
loss (tests/python/test_example_torch_elastic.py; measured well inside).

Output: rank 0 prints ``LOSS step=N loss=L`` every --log-every steps,
``RESET size=N`` after each membership change (every rank prints it with
its rank), and at the end ``FINAL loss=L accuracy=A steps=S`` and
``CONSISTENT ranks=N`` once it has checked that every rank holds
bit-identical parameters (else it exits 3).
"""

import argparse
import hashlib
import sys
import time

import torch
import torch.nn.functional as F
import torch.utils.data

import kolo.torch as hvd


class Net(torch.nn.Module):
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


def synthetic_data(n, seed, split):
    """n MNIST-shaped samples of `split` (0: training, 1: test): each class
    a random template (drawn from `seed`) plus noise."""
    g = torch.Generator().manual_seed(seed)
    templates = torch.randn(10, 1, 28, 28, generator=g)
    g.manual_seed(seed * 1000003 + split)
    labels = torch.randint(0, 10, (n,), generator=g)
    images = templates[labels] + 2.5 * torch.randn(n, 1, 28, 28, generator=g)
    return torch.utils.data.TensorDataset(images.double(), labels)


def params_digest(model):
    h = hashlib.sha256()
    for _, p in sorted(model.state_dict().items()):
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--epochs', type=int, default=3)
    parser.add_argument('--samples', type=int, default=1536,
                        help='data set size (a multiple of --batch-size)')
    parser.add_argument('--batch-size', type=int, default=48,
                        help='global batch (divisible by every size)')
    parser.add_argument('--commit-every', type=int, default=4)
    parser.add_argument('--lr', type=float, default=0.05)
    parser.add_argument('--seed', type=int, default=42)
    parser.add_argument('--step-ms', type=float, default=0.0,
                        help='sleep per step (to stretch a run for faults)')
    parser.add_argument('--log-every', type=int, default=16)
    args = parser.parse_args()

    hvd.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    dataset = synthetic_data(args.samples, args.seed, 0)
    model = Net().double()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.5)
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters(), op=hvd.Sum)
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True,
                                         seed=args.seed)
    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler,
                                   epoch=0, step=0)

    def on_reset():
        print(f'RESET size={hvd.size()} rank={hvd.rank()}', flush=True)
    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def train(state):
        while state.epoch < args.epochs:
            if args.batch_size % hvd.size() != 0:
                raise SystemExit(f'--batch-size {args.batch_size} must '
                                 f'divide by the {hvd.size()} ranks')
            per_rank = args.batch_size // hvd.size()
            loader = torch.utils.data.DataLoader(
                dataset, batch_size=per_rank, sampler=state.sampler)
            for batch_idx, (images, labels) in enumerate(loader):
                optimizer.zero_grad()
                out = model(images)
                loss = F.cross_entropy(out, labels, reduction='sum') / \
                    args.batch_size
                loss.backward()
                optimizer.step()
                if args.step_ms:
                    time.sleep(args.step_ms / 1000.0)
                state.sampler.record_batch(batch_idx, per_rank)
                state.step += 1
                if state.step % args.log_every == 0:
                    total = hvd.allreduce(loss.detach(), op=hvd.Sum,
                                          name='loss').item()
                    if hvd.rank() == 0:
                        print(f'LOSS step={state.step} loss={total:.6f}',
                              flush=True)
                if state.step % args.commit_every == 0:
                    state.commit()
            state.epoch += 1
            state.sampler.set_epoch(state.epoch)
            state.commit()

    train(state)

    digests = hvd.allgather_object(params_digest(model))
    model.eval()
    test = synthetic_data(512, args.seed, 1)
    with torch.no_grad():
        out = model(test.tensors[0])
        test_loss = F.cross_entropy(out, test.tensors[1]).item()
        accuracy = (out.argmax(1) == test.tensors[1]).float().mean().item()
    if hvd.rank() == 0:
        print(f'FINAL loss={test_loss:.10f} accuracy={accuracy:.4f} '
              f'steps={state.step}', flush=True)
        if len(set(digests)) != 1:
            print(f'INCONSISTENT parameters across ranks: {digests}',
                  flush=True)
            sys.exit(3)
        print(f'CONSISTENT ranks={len(digests)}', flush=True)
    hvd.shutdown()


if __name__ == '__main__':
    main()
