#!/usr/bin/python3
"""kolorun --events with --fault (issue 38): the faults kolorun fires reach
the event log as `fault` events, and the fault report's kolorun-fired
faults can be derived from them (id, kind, spec, state, target worker and
incarnation match). One short job of 4 workers with 2 kills. Needs
KOLO_BIN_DIR (kolorun, kolo-elastic-train).
"""

import json
import os
import subprocess
import sys
import tempfile


def main():
    bindir = os.environ['KOLO_BIN_DIR']
    work = tempfile.mkdtemp(prefix='kolo-fault-events.')
    events, report = f'{work}/events.jsonl', f'{work}/report.json'
    argv = [f'{bindir}/kolorun', '-np', '4', '--min-np', '2', '--max-np', '4',
            '--blacklist-cooldown-range', '1', '2', '--events', events,
            '--fault', 'kill:rank=1:after=2s', '--fault',
            'kill:worker=w3:after=4s', '--fault-report', report,
            f'{bindir}/kolo-elastic-train', '--steps', '600', '--step-ms',
            '10', '--log-every', '0']
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                         check=False)
    if out.returncode != 0:
        sys.exit(out.stdout + out.stderr)
    with open(events, encoding='utf-8') as f:
        evs = [json.loads(line) for line in f if line.strip()]
    with open(report, encoding='utf-8') as f:
        rep = json.load(f)
    from_events = sorted(
        (e['id'], e['kind'], e['spec'], e['state'], e['worker_id'],
         e['incarnation']) for e in evs if e['event'] == 'fault')
    from_report = sorted(
        (f['id'], f['kind'], f['spec'], f['state'], f['target']['worker'],
         f['target']['incarnation']) for f in rep['faults']
        if f['fired_by'] == 'kolorun' and f['state'] in ('fired', 'skipped'))
    if len(from_report) != 2 or from_events != from_report:
        sys.exit(f'events {from_events} != report {from_report}')
    print(f'the event log holds the report\'s faults: {from_events}')


if __name__ == '__main__':
    main()
