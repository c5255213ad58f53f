#!/usr/bin/python3
"""scripts/chaos.sh --replay (issue 38): two replays of one round seed fire
the same fault schedule. The schedule is drawn from the seed alone, so the
faults' ids, kinds and specs (with their planned times) must match; which
worker a pick= hits depends on the membership then and is not compared.
Rounds of 10 s keep it short (seed 5003 fires three faults in them).
Needs KOLO_BIN_DIR (kolorun, kolo-elastic-train).
"""

import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')


def replay(seed):
    out = subprocess.run(
        [os.path.join(ROOT, 'scripts', 'chaos.sh'), '--replay', str(seed),
         '--round-seconds', '10'], capture_output=True, text=True,
        timeout=400, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    return re.findall(r'^    fault (\d+): (\S+) at', out.stdout, re.M), out


def main():
    first, out = replay(5003)
    second, _ = replay(5003)
    if not first:
        sys.exit('no fault fired in the replay:\n' + out.stdout)
    if first != second:
        sys.exit(f'replays differ:\n{first}\n{second}')
    print(f'same schedule twice: {first}')


if __name__ == '__main__':
    main()
