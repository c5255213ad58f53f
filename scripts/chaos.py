#!/usr/bin/python3
"""The chaos run (scripts/chaos.sh): kolo-elastic-train under kolorun with
random faults of every kind, round after round, until the time is up; then
a table of what happened.

Each round is one job: 4 workers, --min-np 2, a random-fault spec drawn from
the round's seed (kill, stop for 1-4 s then SIGCONT, term, delay, drop,
slow, kill-coordinator: kolorun's coordinator killed and started again at
its port 1 s later), kolorun's fault report as JSON. It checks:
  - the job ends, within a bound (longer than the round can take even with
    every recovery; past it the round is a *hang* and is killed);
  - every rank's final parameters are the unfaulted run's, bit for bit
    (kolo-elastic-train's fingerprint; its int64 fixed-point gradients make
    results independent of world size and of replayed commits), and no
    rank ever saw another rank hold other parameters (EL_INCONSISTENT; the
    example checks after every membership change) — else *wrong*;
  - no process of the round is left afterwards (*orphans*).
It prints the faults fired by kind, the recoveries (a membership change the
job came back from) with the median and max time from a fault to the
survivors' next completed collective, hangs, wrong results and orphans,
and exits non-zero when there was any hang, wrong result, orphan or failed
round.

It also prints the goodput (scripts/goodput.py): committed steps per second
of the rounds (a failed round counts none) over those of the unfaulted
reference run, which runs the same job (4 workers, same steps) without
faults. CI's run has one reference run: alternated runs are
scripts/goodput.sh's.

Usage: chaos.py [MINUTES] [SEED] [--round-seconds S] [--rate R] [--faults N]
       chaos.py --replay ROUND_SEED [--round-seconds S] [--rate R]
--faults N runs rounds until N faults fired (MINUTES ignored); --replay
reruns one round of an earlier run from its round seed (SEED * 1000 +
round index: the same data, the same fault plan, given the same
--round-seconds and --rate) and prints its result. --rate sets the faults
per minute (default 8); a long fault-count run may raise it.
Progress lines go to stderr. KOLO_BIN_DIR names the folder of kolorun and
kolo-elastic-train, default build/bin.
"""

import argparse
import collections
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import goodput  # noqa: E402  (scripts/goodput.py)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get('KOLO_BIN_DIR', os.path.join(ROOT, 'build', 'bin'))
KINDS = 'kill,stop,term,delay,drop,slow,kill-coordinator'
ROUND_SECONDS = 45   # default: faults are drawn over this much of a round
RATE_PER_MIN = 8     # faults per minute
STEP_MS = 10


def train_args(seed, steps):
    return [os.path.join(BIN, 'kolo-elastic-train'), '--steps', str(steps),
            '--step-ms', str(STEP_MS), '--seed', str(seed),
            '--check-every', '50', '--log-every', '0']


def fingerprints(output):
    """The EL_FINAL fingerprints (one per rank that finished)."""
    out = []
    for line in output.splitlines():
        if 'EL_FINAL ' in line:
            out.append(line.split('fingerprint=')[1].split()[0])
    return out


def orphans(marker):
    """Processes whose command line holds `marker` (the round's seed)."""
    found = []
    for pid in os.listdir('/proc'):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f'/proc/{pid}/cmdline', 'rb') as f:
                cmd = f.read().replace(b'\0', b' ').decode(errors='replace')
        except OSError:
            continue
        if marker in cmd and 'chaos.py' not in cmd:
            found.append((int(pid), cmd.strip()))
    return found


def job_args():
    """kolorun's options of every job (the reference run's too)."""
    return [os.path.join(BIN, 'kolorun'), '-np', '4', '--min-np', '2',
            '--max-np', '4', '--blacklist-cooldown-range', '1', '2',
            '--elastic-timeout', '60']


def run_round(index, seed, steps, data_seed, reference, work):
    report = os.path.join(work, f'round{index}.json')
    marker = f'--seed {data_seed}'  # marks the run's worker processes
    spec = (f'random:rate={RATE_PER_MIN}/min:kinds={KINDS}:'
            f'until={ROUND_SECONDS}s')
    argv = job_args() + ['--fault', spec, '--fault-seed', str(seed),
                         '--fault-report', report] + train_args(data_seed,
                                                                steps)
    # Bound: the training itself plus generous room for every recovery.
    bound = ROUND_SECONDS * 3 + 120
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    hang = False
    try:
        output, _ = proc.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        hang = True
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
    took = time.monotonic() - start
    time.sleep(1.0)  # let the guards finish their cleanup
    left = orphans(marker)
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    prints = fingerprints(output)
    inconsistent = output.count('EL_INCONSISTENT')
    wrong = inconsistent > 0 or (proc.returncode == 0 and (
        len(prints) < 2 or any(p != reference for p in prints)))
    try:
        with open(report, encoding='utf-8') as f:
            rep = json.load(f)
    except (OSError, ValueError):
        rep = None
    with open(os.path.join(work, f'round{index}.log'), 'w',
              encoding='utf-8') as f:
        f.write(output)
    return {'index': index, 'seed': seed, 'exit': proc.returncode,
            'hang': hang, 'took': took, 'orphans': left, 'wrong': wrong,
            'inconsistent': inconsistent, 'fingerprints': prints,
            'consistent_checks': output.count('EL_CONSISTENT'),
            'report': rep}


def reference_run(data_seed, steps, timed=True):
    """The unfaulted run: (fingerprint, seconds). The same job as a round's
    (4 workers, same steps), without faults. Not `timed` (no goodput): one
    process without the per-step sleep, as the fingerprint is the same at
    every size (docs/elastic.md), in seconds rather than a minute."""
    start = time.monotonic()
    argv = job_args() + train_args(data_seed, steps)
    if not timed:
        argv = train_args(data_seed, steps)
        i = argv.index('--step-ms')
        del argv[i:i + 2]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                         check=False)
    took = time.monotonic() - start
    prints = set(fingerprints(out.stdout))
    if out.returncode != 0 or len(prints) != 1:
        sys.exit('chaos: the unfaulted reference run failed:\n' + out.stdout +
                 out.stderr)
    return prints.pop(), took


def fired_faults(r):
    return [f for f in (r['report'] or {}).get('faults', [])
            if f.get('state') == 'fired']


def replay_command(round_seed):
    return (f'scripts/chaos.sh --replay {round_seed} --round-seconds '
            f'{ROUND_SECONDS} --rate {RATE_PER_MIN}')


def print_table(rounds, steps, ref_seconds, work):
    by_kind = collections.Counter()
    recoveries, times = 0, []
    for r in rounds:
        for f in fired_faults(r):
            by_kind[f['kind']] += 1
            rec = f.get('recovery')
            if isinstance(rec, dict) and rec.get('max_s') is not None:
                recoveries += 1
                times.append(rec['max_s'])
    failed = [r for r in rounds if r['exit'] != 0 and not r['hang']]
    hangs = [r for r in rounds if r['hang']]
    wrong = [r for r in rounds if r['wrong']]
    orphan_count = sum(len(r['orphans']) for r in rounds)
    good = None if ref_seconds is None else goodput.goodput(
        [(0 if r['exit'] != 0 or r['wrong'] else steps, r['took'])
         for r in rounds], [(steps, ref_seconds)])
    print()
    print('| what | count |')
    print('|---|---|')
    print(f'| rounds (jobs) | {len(rounds)} |')
    for kind in KINDS.split(','):
        print(f'| faults fired: {kind} | {by_kind.get(kind, 0)} |')
    print(f'| recoveries (membership changes the job came back from) | '
          f'{recoveries} |')
    if times:
        print(f'| recovery time, median / max (fault -> survivors\' next '
              f'collective) | {statistics.median(times):.3f} s / '
              f'{max(times):.3f} s |')
    print(f'| identical-state checks passed (EL_CONSISTENT) | '
          f'{sum(r["consistent_checks"] for r in rounds)} |')
    if good is not None:
        print(f'| goodput (committed steps/s under faults over the '
              f'unfaulted run\'s, {ref_seconds:.1f} s) | {100 * good:.1f} % |')
    print(f'| rounds that failed | {len(failed)} |')
    print(f'| hangs (a round past its bound) | {len(hangs)} |')
    print(f'| wrong results | {len(wrong)} |')
    print(f'| orphans left | {orphan_count} |')
    for r in failed + hangs + wrong:
        print(f'  see {work}/round{r["index"]}.log (seed {r["seed"]}); '
              f'replay: {replay_command(r["seed"])}')
    return bool(failed or hangs or wrong or orphan_count)


def parse_args():
    p = argparse.ArgumentParser(description='The chaos run.')
    p.add_argument('numbers', nargs='*', type=float,
                   help='MINUTES SEED, or SEED with --faults')
    p.add_argument('--replay', type=int, metavar='ROUND_SEED',
                   help='rerun one round from its seed')
    p.add_argument('--faults', type=int, metavar='N',
                   help='run rounds until N faults fired')
    p.add_argument('--round-seconds', type=int, default=ROUND_SECONDS)
    p.add_argument('--rate', type=int, default=RATE_PER_MIN,
                   help='faults per minute (default %(default)s)')
    p.add_argument('--no-goodput', action='store_true',
                   help='skip the timed 4-worker reference run (no goodput '
                        'row; the fingerprint comes from one process)')
    a = p.parse_args()
    nums = list(a.numbers)
    a.minutes = 2.0 if a.faults or not nums else nums.pop(0)
    a.seed = int(nums.pop(0)) if nums else 1
    return a


def main():
    global ROUND_SECONDS, RATE_PER_MIN  # pylint: disable=global-statement
    a = parse_args()
    ROUND_SECONDS = a.round_seconds
    if a.rate <= 0:
        sys.exit('chaos: --rate must be a positive number of faults a minute')
    RATE_PER_MIN = a.rate
    # A round's seed is SEED * 1000 + its index: a replay finds SEED there.
    seed = a.replay // 1000 if a.replay is not None else a.seed
    work = tempfile.mkdtemp(prefix='kolo-chaos.')
    # Steps that fill the round's fault window and a little more.
    steps = int((ROUND_SECONDS + 10) * 1000 / (STEP_MS + 2))
    # The training data of every round (and the mark of its processes).
    data_seed = 7000 + seed % 100000
    goodput.progress('chaos: the unfaulted reference run ...')
    reference, ref_seconds = reference_run(data_seed, steps,
                                           timed=not a.no_goodput)
    goal = (f'{a.faults} faults' if a.faults else
            f'replay of round seed {a.replay}' if a.replay is not None else
            f'{a.minutes:g} min')
    print(f'chaos: {goal}, seed {seed}, unfaulted fingerprint '
          f'{reference} in {ref_seconds:.1f} s'
          f'{" (one process, no goodput)" if a.no_goodput else ""}, rounds of ~{ROUND_SECONDS} s '
          f'with {RATE_PER_MIN} faults/min of {KINDS}; logs in {work}',
          flush=True)
    deadline = time.monotonic() + a.minutes * 60
    rounds, fired = [], 0
    while not rounds or (a.replay is None and (
            fired < a.faults if a.faults else time.monotonic() < deadline)):
        index = len(rounds)
        round_seed = a.replay if a.replay is not None else seed * 1000 + index
        goodput.progress(f'[round {index + 1}'
                         f'{f", {fired}/{a.faults} faults" if a.faults else ""}'
                         f'] seed {round_seed} ...')
        r = run_round(index, round_seed, steps, data_seed, reference, work)
        rounds.append(r)
        fired += len(fired_faults(r))
        print(f'  round {index}: seed {round_seed}, exit {r["exit"]}, '
              f'{r["took"]:.1f} s, {len(fired_faults(r))} fault(s) fired'
              f'{", HANG" if r["hang"] else ""}'
              f'{", WRONG" if r["wrong"] else ""}'
              f'{", ORPHANS" if r["orphans"] else ""}', flush=True)
        if a.replay is not None:
            for f in fired_faults(r):
                print(f'    fault {f["id"]}: {f["spec"]} at '
                      f'{f["fired_s"]:.3f} s on {(f["target"] or {}).get("worker")}')
    sys.exit(1 if print_table(rounds, steps,
                              None if a.no_goodput else ref_seconds,
                              work) else 0)


if __name__ == '__main__':
    main()
