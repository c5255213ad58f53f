"""A kolo.torch worker for the launcher tests: hvd.init() under whatever
launcher started it, one exact allreduce (the sum of rank + 1 over the job),
one line to check: PY rank=R size=N local_rank=L sum=S."""

import os

import torch

import kolo.torch as hvd

hvd.init()
total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum)
# One write of the whole line: print() may write the text and its newline
# apart, and the launcher interleaves the ranks' writes.
os.write(1, (f'PY rank={hvd.rank()} size={hvd.size()} '
             f'local_rank={hvd.local_rank()} sum={total.item():g}\n').encode())
hvd.shutdown()
