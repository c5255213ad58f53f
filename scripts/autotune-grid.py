#!/usr/bin/python3
"""Autotune against an exhaustive grid (scripts/autotune-grid.sh; issue 36).

For one preset of `kolo-bench --mode step` at one world size:
  1. the grid: every setting of the knobs autotune searches (fusion
     threshold x cycle time x response cache on/off), each timed by
     kolo-bench (one job per cycle time, since the cycle time is the
     coordinator's; kolo-bench sets threshold and cache capacity on every
     rank between settings);
  2. autotune: `kolorun --autotune` with kolo-bench's warm-up long enough
     for the whole sample budget, so that the timed steps run the setting
     autotune chose (its log file's "best" line);
  the two alternated for --rounds rounds (these VMs have slow minutes);
  3. a confirmation: the grid's best setting and autotune, alternated for
     --confirm rounds, each timed the same way (the grid's minimum over
     many noisy settings is biased low; this measures both again side by
     side).
Prints a table of the grid (median over rounds of each setting's median
step time), autotune's choices, and the ratio autotune / grid best of the
confirmation, against the goal (within 5 %). Progress lines go to stderr.

Usage: autotune-grid.py [--preset small161|resnet50] [--np N] [--rounds R]
                        [--confirm C] [--steps S] [--json FILE]
KOLO_BIN_DIR names the folder of kolorun and kolo-bench (default
build/bin).
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get('KOLO_BIN_DIR', os.path.join(ROOT, 'build', 'bin'))

# The grid spans autotune's search space (coordinator/autotune.h
# AutotuneOptions: fusion threshold 1-256 MiB on a log scale, cycle time
# 0.5-25 ms, cache on or off). The log's later columns (small_allreduce_kb,
# segment_kb, hierarchical) are not in the grid: on one host with shared
# memory they stay empty, and the "best" line is read by its first columns.
THRESHOLDS = [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20]
CYCLE_MS = [0.5, 2.5, 10.0, 25.0]
CAPACITIES = [0, 1024]
# Horovod's defaults, which kolorun's autotune flags default to.
WARMUP_SAMPLES, STEPS_PER_SAMPLE, MAX_SAMPLES = 3, 10, 20


def progress(text):
    print(f'[{time.strftime("%H:%M:%S")}] {text}', file=sys.stderr,
          flush=True)


def bench(np, preset, steps, warmup, kolorun_flags, bench_flags, work, tag):
    """One kolorun job of kolo-bench --mode step: its JSON rows."""
    out = os.path.join(work, f'{tag}.json')
    argv = ([os.path.join(BIN, 'kolorun'), '-np', str(np)] + kolorun_flags +
            [os.path.join(BIN, 'kolo-bench'), '--mode', 'step', '--preset',
             preset, '--inplace', '--steps', str(steps), '--warmup',
             str(warmup), '--json', out] + bench_flags)
    run = subprocess.run(argv, capture_output=True, text=True, timeout=1800,
                         check=False)
    if run.returncode != 0:
        sys.exit(f'autotune-grid: {" ".join(argv)} failed '
                 f'({run.returncode}):\n{run.stdout}{run.stderr}')
    with open(out, encoding='utf-8') as f:
        rows = json.load(f)
    for r in rows:
        if r.get('check') != 'ok':
            sys.exit(f'autotune-grid: a wrong result in {tag}: {r}')
    return rows


def grid_round(a, work, index):
    """{(threshold, cycle_ms, capacity): step_ms} of one pass over the
    grid."""
    times = {}
    for c in CYCLE_MS:
        rows = bench(a.np, a.preset, a.steps, 3, ['--cycle-time-ms', f'{c:g}'],
                     ['--fusion-threshold', ','.join(map(str, THRESHOLDS)),
                      '--cache-capacity', ','.join(map(str, CAPACITIES))],
                     work, f'grid{index}-{c:g}')
        for r in rows:
            times[(r['fusion_threshold'], c, r['cache_capacity'])] = \
                r['step_ms']
    return times


def autotune_run(a, work, index):
    """(step_ms of the timed steps, the chosen setting) of one job that
    tunes during kolo-bench's warm-up."""
    log = os.path.join(work, f'autotune{index}.csv')
    budget = (WARMUP_SAMPLES + MAX_SAMPLES) * STEPS_PER_SAMPLE
    rows = bench(a.np, a.preset, a.steps, budget + 3 * STEPS_PER_SAMPLE,
                 ['--autotune', '--autotune-log-file', log], [], work,
                 f'autotune{index}')
    chosen = None
    with open(log, encoding='utf-8') as f:
        for line in csv.reader(f):
            if line and line[0] == 'best':
                chosen = (float(line[1]), float(line[2]), line[3] == '1')
    if chosen is None:
        sys.exit(f'autotune-grid: autotune chose nothing within '
                 f'{budget} steps (log {log})')
    return rows[0]['step_ms'], chosen


def setting_text(s):
    threshold, cycle, capacity = s
    return (f'fusion {threshold >> 20} MiB, cycle {cycle:g} ms, '
            f'cache {"on" if capacity else "off"}')


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--preset', default='small161',
                   choices=['small161', 'resnet50'])
    p.add_argument('--np', type=int, default=2)
    p.add_argument('--rounds', type=int, default=3)
    p.add_argument('--confirm', type=int, default=3)
    p.add_argument('--steps', type=int, default=30)
    p.add_argument('--json', metavar='FILE')
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix='kolo-autotune-grid.')
    grid = {}
    tuned, choices = [], []
    for i in range(a.rounds):
        progress(f'round {i + 1}/{a.rounds}: the grid '
                 f'({len(THRESHOLDS) * len(CYCLE_MS) * len(CAPACITIES)} '
                 f'settings)')
        for k, v in grid_round(a, work, i).items():
            grid.setdefault(k, []).append(v)
        progress(f'round {i + 1}/{a.rounds}: autotune')
        ms, chosen = autotune_run(a, work, i)
        tuned.append(ms)
        choices.append(chosen)
    medians = {k: statistics.median(v) for k, v in grid.items()}
    best = min(medians, key=medians.get)
    confirm_grid, confirm_tuned = [], []
    for i in range(a.confirm):
        progress(f'confirmation {i + 1}/{a.confirm}: the grid best, autotune')
        rows = bench(a.np, a.preset, a.steps, 3,
                     ['--cycle-time-ms', f'{best[1]:g}'],
                     ['--fusion-threshold', str(best[0]), '--cache-capacity',
                      str(best[2])], work, f'confirm-grid{i}')
        confirm_grid.append(rows[0]['step_ms'])
        ms, chosen = autotune_run(a, work, a.rounds + i)
        confirm_tuned.append(ms)
        choices.append(chosen)
    g = statistics.median(confirm_grid)
    t = statistics.median(confirm_tuned)
    ratio = t / g
    print(f'# autotune against the grid: {a.preset}, {a.np} ranks, '
          f'{a.rounds} alternated rounds, {a.confirm} confirmations; '
          f'logs in {work}')
    print('| setting | step (ms), median of rounds |')
    print('|---|---|')
    for k in sorted(medians, key=medians.get):
        print(f'| {setting_text(k)} | {medians[k]:.3f} |')
    print()
    print('| | step (ms) |')
    print('|---|---|')
    print(f'| grid best in the sweep: {setting_text(best)} | '
          f'{medians[best]:.3f} |')
    print(f'| autotune in the sweep rounds (median) | '
          f'{statistics.median(tuned):.3f} |')
    print(f'| confirmation: the grid best (median of {a.confirm}) | '
          f'{g:.3f} ({", ".join(f"{x:.3f}" for x in confirm_grid)}) |')
    print(f'| confirmation: autotune (median of {a.confirm}) | {t:.3f} '
          f'({", ".join(f"{x:.3f}" for x in confirm_tuned)}) |')
    print(f'| autotune / grid best | {ratio:.3f} '
          f'({"within" if ratio <= 1.05 else "NOT within"} 5 %) |')
    print('autotune chose: ' + '; '.join(
        f'{c[0]:.2f} MiB, {c[1]:.2f} ms, cache {"on" if c[2] else "off"}'
        for c in choices))
    if a.json:
        with open(a.json, 'w', encoding='utf-8') as f:
            json.dump({'preset': a.preset, 'np': a.np,
                       'grid': [{'fusion_threshold': k[0], 'cycle_ms': k[1],
                                 'cache_capacity': k[2], 'step_ms': v}
                                for k, v in medians.items()],
                       'grid_best': list(best), 'confirm_grid': confirm_grid,
                       'confirm_autotune': confirm_tuned, 'ratio': ratio,
                       'choices': choices}, f, indent=1)


if __name__ == '__main__':
    main()
