#!/usr/bin/python3
"""Goodput under churn (issue 38): training work done per second under
faults over the same without faults, with the same example and the same
step count, faulted and unfaulted runs alternated so that a slow minute of
a shared machine hits both.

Work is the committed steps that count toward the final result: a run
that ends well (kolorun exits 0 and no rank saw other parameters than the
others; the examples check after every membership change) counts its
--steps; a run that fails counts none. So

    goodput = (sum of work / sum of seconds, faulted)
              / (sum of work / sum of seconds, unfaulted)

Scenarios (scripts/goodput.sh):
  kill30  a SIGKILL of one of the 4 workers every 30 s (kill:pick=U:after=..,
          U drawn from the seed), replacements on (kolorun's elastic mode
          refills the slot);
  mix12   random faults of every kind at 12 per minute.
Examples: cpp (build/bin/kolo-elastic-train) and torch
(examples/torch_elastic_train.py under /usr/bin/python3, PYTHONPATH
build/python).

Usage: goodput.py [--scenario kill30|mix12] [--example cpp|torch]
                  [--minutes M] [--pairs P] [--seed S]
The functions at the top are pure (tests/scripts/goodput_test.py checks
them on a scripted schedule); main() runs the scenario.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get('KOLO_BIN_DIR', os.path.join(ROOT, 'build', 'bin'))
PYTHON = '/usr/bin/python3'
KINDS = 'kill,stop,term,delay,drop,slow'


def rate(runs):
    """Work per second over `runs`, each (work, seconds); None if no time."""
    seconds = sum(s for _, s in runs)
    return sum(w for w, _ in runs) / seconds if seconds > 0 else None


def goodput(faulted, unfaulted):
    """(work/s under faults) / (work/s unfaulted); runs are (work, seconds)."""
    f, u = rate(faulted), rate(unfaulted)
    if f is None or not u:
        return None
    return f / u


def kill_specs(every_s, until_s, seed):
    """A SIGKILL of one of the workers every `every_s` seconds up to
    `until_s`: kill:pick=U:after=Ns with U drawn from `seed`."""
    draw = random.Random(seed)
    return [f'kill:pick={draw.random():.6f}:after={t}s'
            for t in range(every_s, int(until_s) + 1, every_s)]


def progress(text):
    """A progress line on stderr (long runs must not be silent)."""
    print(text, file=sys.stderr, flush=True)


def job_argv(example, steps, seed, faults, fault_seed):
    argv = [os.path.join(BIN, 'kolorun'), '-np', '4', '--min-np', '2',
            '--max-np', '4', '--blacklist-cooldown-range', '1', '2',
            '--start-timeout', '120', '--elastic-timeout', '60']
    for spec in faults:
        argv += ['--fault', spec]
    if faults:
        argv += ['--fault-seed', str(fault_seed)]
    if example == 'cpp':
        return argv + [os.path.join(BIN, 'kolo-elastic-train'), '--steps',
                       str(steps), '--step-ms', '10', '--seed', str(seed),
                       '--log-every', '0', '--check-every', '50']
    # torch: 1536 samples / 48 = 32 steps an epoch.
    return argv + [PYTHON, os.path.join(ROOT, 'examples',
                                        'torch_elastic_train.py'),
                   '--epochs', str(max(1, steps // 32)), '--step-ms', '20',
                   '--log-every', '100000', '--seed', str(seed)]


def run_job(argv, timeout):
    """(ok, seconds, output) of one job."""
    env = dict(os.environ)
    env.setdefault('PYTHONPATH', os.path.join(ROOT, 'build', 'python'))
    start = time.monotonic()
    try:
        out = subprocess.run(argv, capture_output=True, text=True, env=env,
                             timeout=timeout, check=False)
        ok, text = out.returncode == 0, out.stdout + out.stderr
    except subprocess.TimeoutExpired as e:
        ok, text = False, f'timed out after {timeout} s: {e}'
    took = time.monotonic() - start
    # The job ended well and no rank saw others hold other parameters. (A
    # kill near the end may take the rank that prints FINAL after the
    # others finished; the result itself is chaos.py's to check.)
    return ok and 'INCONSISTENT' not in text, took, text


def steps_for(example, minutes):
    """Steps whose unfaulted run takes about `minutes` (measured on the
    2-core machine: ~12 ms a step for cpp, ~50 ms for torch at 4 ranks)."""
    per_step = 0.012 if example == 'cpp' else 0.05
    return max(32, int(minutes * 60 / per_step))


def table(scenario, example, faulted, unfaulted, fired):
    g = goodput(faulted, unfaulted)
    lines = ['| scenario | example | runs (faulted / unfaulted) | '
             'faults fired | work/s faulted | work/s unfaulted | goodput |',
             '|---|---|---|---|---|---|---|']
    fr, ur = rate(faulted), rate(unfaulted)
    lines.append(f'| {scenario} | {example} | {len(faulted)} / '
                 f'{len(unfaulted)} | {fired} | '
                 f'{fr:.1f} | {ur:.1f} | '
                 f'{"-" if g is None else f"{100 * g:.1f} %"} |'
                 if fr is not None and ur is not None else
                 f'| {scenario} | {example} | - | {fired} | - | - | - |')
    return '\n'.join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--scenario', choices=['kill30', 'mix12'],
                   default='kill30')
    p.add_argument('--example', choices=['cpp', 'torch'], default='cpp')
    p.add_argument('--minutes', type=float, default=2.0,
                   help='length of an unfaulted run')
    p.add_argument('--pairs', type=int, default=2,
                   help='unfaulted/faulted pairs, alternated')
    p.add_argument('--seed', type=int, default=1)
    a = p.parse_args()
    steps = steps_for(a.example, a.minutes)
    until = a.minutes * 60 * 1.5  # the faulted run is longer
    faulted, unfaulted, fired = [], [], 0
    for i in range(a.pairs):
        for faulty in (False, True):
            if a.scenario == 'kill30':
                specs = kill_specs(30, until, a.seed * 1000 + i)
            else:
                specs = [f'random:rate=12/min:kinds={KINDS}:until={until:.0f}s']
            report = f'/tmp/kolo-goodput-{os.getpid()}-{i}.json'
            argv = job_argv(a.example, steps, 4000 + a.seed,
                            specs if faulty else [], a.seed * 1000 + i)
            if faulty:
                argv[1:1] = ['--fault-report', report]
            progress(f'[{2 * i + faulty + 1}/{2 * a.pairs}] {a.example} '
                     f'{a.scenario} {"faulted" if faulty else "unfaulted"} '
                     f'{steps} steps ...')
            ok, took, text = run_job(argv, timeout=a.minutes * 60 * 4 + 180)
            work = steps if ok else 0
            (faulted if faulty else unfaulted).append((work, took))
            if faulty:
                fired += count_fired(report)
            progress(f'    {"ok" if ok else "FAILED"} in {took:.1f} s')
            if not ok:
                progress(text[-2000:])
    print(f'goodput: {a.scenario}, {a.example}, {steps} steps a run, '
          f'{a.pairs} pair(s) alternated (unfaulted, faulted)')
    print(table(a.scenario, a.example, faulted, unfaulted, fired))


def count_fired(report):
    """Faults a --fault-report says fired (0 if it is missing)."""
    try:
        with open(report, encoding='utf-8') as f:
            rep = json.load(f)
        os.unlink(report)
    except (OSError, ValueError):
        return 0
    return sum(1 for f in rep.get('faults', []) if f.get('state') == 'fired')


if __name__ == '__main__':
    main()
