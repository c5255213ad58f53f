"""The training step of kolo-bench --mode step, through kolo.torch.

Run under kolorun: ``kolorun -np 2 /usr/bin/python3 bench/python_step.py
--preset resnet50``. Every rank submits the preset's float32 tensors with
``hvd.allreduce_async_(t, name=..., op=hvd.Average)`` in reverse order (as
Horovod's DistributedOptimizer hands over gradients during backward), then
``hvd.synchronize`` on every handle. Steps run back to back, as kolo-bench's
(no barrier between them: each rank starts its next step when its last
synchronize returns). Step time = first submit to the last synchronize;
enqueue = the submits alone. Each rank's median and 90th
percentile over the timed steps, max over ranks (as kolo-bench). The inputs
are restored before the last step only (kolo-bench poisons its outputs
there), and every element of that step's result is checked against the
exact average.
Presets: resnet50 (ResNet-50's 161 parameter tensors, read from
bench/presets.cc so that both benchmarks use the same sizes) and small161
(161 x 256 floats). Prints one line per preset, and JSON with --json.
"""

import argparse
import json
import os
import re
import statistics
import sys
import time

import torch

import kolo.torch as hvd


def resnet50_sizes():
    here = os.path.dirname(os.path.abspath(__file__))
    text = open(os.path.join(here, 'presets.cc')).read()
    body = re.search(r'kResnet50 = \{(.*?)\};', text, re.S).group(1)
    sizes = [int(v) for v in re.findall(r'\d+', body)]
    assert len(sizes) == 161 and sum(sizes) == 25557032, (len(sizes),
                                                          sum(sizes))
    return sizes


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * len(s) + 0.5)) - 1))]


def run_preset(preset, steps, warmup):
    sizes = resnet50_sizes() if preset == 'resnet50' else [256] * 161
    r, n = hvd.rank(), hvd.size()
    # Small integers: exact sums in float32, so the check is exact.
    tensors = [torch.full((c,), float((r + i) % 7), dtype=torch.float32)
               for i, c in enumerate(sizes)]
    originals = [t.clone() for t in tensors]
    names = [f'{preset}.{i}' for i in range(len(sizes))]
    order = list(range(len(sizes)))[::-1]
    step_ms, enqueue_ms = [], []
    for step in range(warmup + steps):
        if step == warmup + steps - 1:  # the step that the check sees
            for t, o in zip(tensors, originals):
                t.copy_(o)
        t0 = time.perf_counter()
        handles = [hvd.allreduce_async_(tensors[i], name=names[i],
                                        op=hvd.Average) for i in order]
        t1 = time.perf_counter()
        for h in handles:
            hvd.synchronize(h)
        t2 = time.perf_counter()
        if step >= warmup:
            enqueue_ms.append((t1 - t0) * 1e3)
            step_ms.append((t2 - t0) * 1e3)
    for i, t in enumerate(tensors):
        # Horovod's average: the float32 sum times (float)(1/n)
        want = (torch.tensor(float(sum((k + i) % 7 for k in range(n))),
                             dtype=torch.float32) *
                torch.tensor(1.0 / n, dtype=torch.float32))
        assert torch.equal(t, torch.full_like(t, want.item())), (i, t[:3])
    mine = torch.tensor([statistics.median(step_ms), percentile(step_ms, 90),
                         statistics.median(enqueue_ms)], dtype=torch.float64)
    worst = hvd.allreduce(mine, op=hvd.Max, name=f'{preset}.figures')
    nbytes = 4 * sum(sizes)
    busbw = nbytes * 2 * (n - 1) / n / (worst[0].item() / 1e3) / 1e9
    return {'preset': preset, 'np': n, 'tensors': len(sizes),
            'bytes': nbytes, 'steps': steps, 'step_ms': worst[0].item(),
            'p90_ms': worst[1].item(), 'enqueue_ms': worst[2].item(),
            'busbw_GBps': busbw, 'check': 'ok'}


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--preset', default='resnet50,small161',
                   help='comma-separated: resnet50, small161')
    p.add_argument('--steps', type=int, default=20)
    p.add_argument('--warmup', type=int, default=3)
    p.add_argument('--json', help='append one JSON record per preset')
    args = p.parse_args()
    torch.set_num_threads(1)
    hvd.init()
    for preset in args.preset.split(','):
        rec = run_preset(preset, args.steps, args.warmup)
        if hvd.rank() == 0:
            print(f"kolo.torch step {preset}: np={rec['np']} "
                  f"step {rec['step_ms']:.3f} ms (p90 {rec['p90_ms']:.3f}) "
                  f"enqueue {rec['enqueue_ms']:.3f} ms "
                  f"busbw {rec['busbw_GBps']:.3f} GB/s check ok", flush=True)
            if args.json:
                with open(args.json, 'a') as f:
                    f.write(json.dumps(rec) + '\n')
    hvd.shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
