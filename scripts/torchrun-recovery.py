#!/usr/bin/python3
"""torchrun's answer to a lost worker, measured: DistributedDataParallel on
Gloo under torch's elastic agent (torchrun --max-restarts), one worker
SIGKILLed mid-training. The agent stops every worker and starts them all
again; each loads the last checkpoint and goes on. This is the peer side of
kolo's elastic DDP comparison (issue 40): kolo's survivors keep their
processes and their memory (docs/pytorch.md, "Elastic DDP").

It prints one line:
  RESULT runner=torchrun np=N kill_step=K resumed_from=C steps_redone=R
         kill_to_next_step_s=T total_s=S fingerprint=F
where kill_to_next_step_s runs from the SIGKILL to the first step completed
after the restart (rank 0's clock; same machine), steps_redone is how many
steps the restart repeated (since the checkpoint), the fingerprint is the
final parameters' (float64, summed gradients), `unfaulted` says whether an
unfaulted run of the same job (run first) ended with the same bits, and
max_abs_diff is the largest difference of a parameter between the two.

Debian's torchrun (torch 1.13 on Python 3.11) fails before starting any
worker unless its redirects are given as "2" (its parser cannot read "0" or
"3" on Python 3.11: enum.Flag no longer lists them), so it runs as
`python3 -m torch.distributed.run ... --redirects 2 --tee 2`.

Usage: torchrun-recovery.py [--np N] [--steps S] [--kill-at K]
                            [--checkpoint-every C] [--step-ms MS]
"""

import argparse
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time


def worker(a):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    dist.init_process_group('gloo')
    rank, size = dist.get_rank(), dist.get_world_size()
    restart = int(os.environ.get('TORCHELASTIC_RESTART_COUNT', '0'))
    print(f'PID rank={rank} pid={os.getpid()} restart={restart}', flush=True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.Tanh(),
                                torch.nn.Linear(128, 10)).double()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    start = 0
    if os.path.exists(a.checkpoint):
        ck = torch.load(a.checkpoint)
        model.load_state_dict(ck['model'])
        opt.load_state_dict(ck['opt'])
        start = ck['step'] + 1
        if rank == 0:
            print(f'RESUMED from={ck["step"]} restart={restart}', flush=True)
    net = DistributedDataParallel(model)
    batch = 48  # global: the same samples whatever the world size
    for step in range(start, a.steps):
        g = torch.Generator().manual_seed(step)
        x = torch.randn(batch, 64, generator=g, dtype=torch.float64)
        y = torch.randint(0, 10, (batch,), generator=g)
        mine = slice(rank * batch // size, (rank + 1) * batch // size)
        opt.zero_grad()
        # Summed over the global batch: DDP averages, so scale by size.
        loss = torch.nn.functional.cross_entropy(
            net(x[mine]), y[mine], reduction='sum') * size
        loss.backward()
        opt.step()
        if a.step_ms > 0:
            time.sleep(a.step_ms / 1000)
        if rank == 0:
            print(f'STEP step={step} restart={restart} t={time.time():.6f}',
                  flush=True)
            if step % a.checkpoint_every == 0:
                tmp = a.checkpoint + '.tmp'
                torch.save({'model': model.state_dict(),
                            'opt': opt.state_dict(), 'step': step}, tmp)
                os.replace(tmp, a.checkpoint)
    if rank == 0:
        flat = torch.cat([p.detach().flatten() for p in model.parameters()])
        digest = hashlib.sha256(flat.numpy().tobytes()).hexdigest()[:16]
        torch.save(flat, a.checkpoint + '.final')
        print(f'FINAL fingerprint={digest}', flush=True)
    dist.destroy_process_group()


def fields(line):
    return dict(kv.split('=', 1) for kv in line.split()[1:] if '=' in kv)


def run(a, kill):
    """One torchrun job; (result fields, seconds). SIGKILLs rank 1 once
    rank 0 completed step a.kill_at, when `kill`."""
    work = tempfile.mkdtemp(prefix='torchrun-recovery-')
    port = 29400 + os.getpid() % 500 + (1 if kill else 0)
    argv = [sys.executable, '-m', 'torch.distributed.run',
            '--nproc_per_node', str(a.np), '--max_restarts', '3',
            '--monitor_interval', '0.1', '--redirects', '2', '--tee', '2',
            '--log_dir', work, '--rdzv_backend', 'c10d',
            '--rdzv_endpoint', f'127.0.0.1:{port}',
            os.path.abspath(__file__), '--worker',
            '--checkpoint', os.path.join(work, 'checkpoint.pt'),
            '--steps', str(a.steps), '--step-ms', str(a.step_ms),
            '--checkpoint-every', str(a.checkpoint_every)]
    env = dict(os.environ, OMP_NUM_THREADS='1')
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env,
                            start_new_session=True)
    timer = threading.Timer(a.bound, lambda: os.killpg(proc.pid,
                                                       signal.SIGKILL))
    timer.start()
    pids, killed_at, kill_step, out = {}, None, None, {}
    for line in proc.stdout:
        if line.startswith('PID '):
            f = fields(line)
            pids[int(f['rank'])] = int(f['pid'])
        elif line.startswith('STEP '):
            f = fields(line)
            step, restart, t = int(f['step']), int(f['restart']), float(
                f['t'])
            if kill and killed_at is None and step >= a.kill_at:
                os.kill(pids[1], signal.SIGKILL)
                killed_at, kill_step = time.time(), step
            if killed_at is not None and restart > 0 and \
                    'kill_to_next_step_s' not in out:
                out['kill_to_next_step_s'] = f'{t - killed_at:.3f}'
        elif line.startswith('RESUMED '):
            out['resumed_from'] = fields(line)['from']
        elif line.startswith('FINAL '):
            out['fingerprint'] = fields(line)['fingerprint']
    proc.wait()
    timer.cancel()
    if proc.returncode != 0 or 'fingerprint' not in out:
        sys.exit(f'torchrun-recovery: the torchrun job failed '
                 f'(status {proc.returncode}); its logs are in {work}')
    out['final'] = os.path.join(work, 'checkpoint.pt.final')
    if kill:
        out['kill_step'] = str(kill_step)
        out['steps_redone'] = str(kill_step - int(out['resumed_from']))
    return out, time.monotonic() - t0


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
    p.add_argument('--checkpoint', help=argparse.SUPPRESS)
    p.add_argument('--np', type=int, default=4)
    p.add_argument('--steps', type=int, default=300)
    p.add_argument('--kill-at', type=int, default=150)
    p.add_argument('--checkpoint-every', type=int, default=50)
    p.add_argument('--step-ms', type=int, default=20)
    p.add_argument('--bound', type=float, default=600,
                   help='seconds before a job counts as hung')
    a = p.parse_args()
    if a.worker:
        worker(a)
        return
    clean, _ = run(a, kill=False)
    faulted, seconds = run(a, kill=True)
    import torch
    diff = (torch.load(faulted['final']) - torch.load(clean['final'])).abs()
    same = faulted['fingerprint'] == clean['fingerprint']
    print(f'RESULT runner=torchrun np={a.np} kill_step={faulted["kill_step"]} '
          f'resumed_from={faulted["resumed_from"]} '
          f'steps_redone={faulted["steps_redone"]} '
          f'kill_to_next_step_s={faulted.get("kill_to_next_step_s", "?")} '
          f'total_s={seconds:.1f} fingerprint={faulted["fingerprint"]} '
          f'unfaulted={"same" if same else clean["fingerprint"]} '
          f'max_abs_diff={diff.max().item():.3g}',
          flush=True)


if __name__ == '__main__':
    main()
