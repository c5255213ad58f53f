"""kolo.torch under the real torchrun (torch.distributed.run), 2 workers:

- a plain launch (static rendezvous: torchrun's agent keeps its store on
  MASTER_PORT) and a --standalone one (c10d rendezvous: MASTER_PORT left to
  the workers) both work with nothing kolo-specific set: kolo takes its
  coordinator port and job secret through torchrun's store, the allreduce and
  broadcast_parameters give exact results, torch.distributed's own
  process group still starts beside kolo, init() works again after
  shutdown(), and the secret is on no command line; so does a launch of two
  agents (--nnodes 2 on one host), and a restarted attempt reads its own
  values, not the failed attempt's;
- a user's KOLO_COORDINATOR and KOLO_SECRET_FILE are used as given, and the
  store is left alone; a user's KOLO_SECRET_FILE alone stays out of it;
- a store that cannot be reached, or a rank 0 that never publishes, ends
  the start with an error naming what was waited for, within a deadline.

`torchrun` itself fails on Debian 12's torch 1.13 with Python 3.11 (to_map:
'NoneType' object has no attribute 'get'); `python -m torch.distributed.run
--redirects 1 --tee 1` avoids it, and is what these tests run. Every launch
gets free ports (not 29500) and a deadline.
"""

import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.skipif(
    'KOLO_COORDINATOR' in os.environ,
    reason='starts torchrun itself (tests/python/run.sh 1 ...)')

DEADLINE = 150  # s for one torchrun job (torch imports slowly on 2 cores)

JOB = textwrap.dedent('''\
    import datetime, os, sys, time
    import torch
    import torch.distributed as dist
    import kolo.torch as hvd
    rank = int(os.environ['RANK'])
    def compact(t):
        return str(t.tolist()).replace(' ', '')
    mode = sys.argv[1]
    if mode == 'no-store':
        os.environ['MASTER_PORT'] = sys.argv[2]  # nothing listens there
    if mode == 'rank0-absent' and rank == 0:
        sys.exit(0)  # never publishes
    restart = os.environ['TORCHELASTIC_RESTART_COUNT']
    given = os.environ.get('KOLO_COORDINATOR')
    hvd.init()
    if mode == 'restart' and restart == '0' and rank == 1:
        os._exit(3)  # torchrun restarts the job: a new attempt
    r, n = hvd.rank(), hvd.size()
    x = torch.arange(4, dtype=torch.float32) + 10 * r
    total = hvd.allreduce(x, op=hvd.Sum, name='x')
    model = torch.nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.fill_(r + 1)
        model.bias.fill_(r + 5)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    # torch.distributed's own process group on MASTER_PORT, beside kolo
    dist.init_process_group('gloo', timeout=datetime.timedelta(seconds=60))
    g = torch.tensor([r + 1])
    dist.all_reduce(g)
    # What kolo put in torchrun's store (or did not).
    store = dist.TCPStore(os.environ['MASTER_ADDR'],
                          int(os.environ['MASTER_PORT']), n, False,
                          datetime.timedelta(seconds=30))
    prefix = 'kolo/%s/%s/' % (os.environ['TORCHELASTIC_RUN_ID'],
                              os.environ['TORCHELASTIC_RESTART_COUNT'])
    agent = os.environ['TORCHELASTIC_USE_AGENT_STORE'] == 'True'
    published = False
    if agent:
        try:  # torch 1.13's TCPStore has no check()
            store.wait([prefix + 'secret'], datetime.timedelta(seconds=1))
            published = True
        except RuntimeError:
            pass
    on_cmdline = False
    if published:
        secret = store.get(prefix + 'secret')
        for pid in os.listdir('/proc'):
            try:
                with open('/proc/%s/cmdline' % pid, 'rb') as f:
                    on_cmdline |= secret in f.read()
            except OSError:
                pass
    print('RESULT rank=%d size=%d restart=%s sum=%s w=%s b=%s gloo=%d '
          'given=%s published=%s secret_in_env=%s secret_on_cmdline=%s' % (
              r, n, restart, compact(total), compact(model.weight),
              compact(model.bias), int(g), given, published,
              'KOLO_SECRET' in os.environ, on_cmdline), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    if r == 0:
        # Rank 0 (the coordinator's host) shuts down last: the others'
        # second init() reaches the coordinator it is about to stop.
        time.sleep(1.5)
    hvd.shutdown()
    hvd.init()  # again: what the store gave is kept, the secret too
    again = hvd.allreduce(torch.ones(2) * (r + 1), op=hvd.Sum, name='y')
    print('AGAIN rank=%d sum=%s' % (r, compact(again)), flush=True)
    hvd.shutdown()
    ''')


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def torchrun_argv(tmp_path, launch, mode='plain', args=(), nproc=2,
                  restarts=0):
    script = tmp_path / 'job.py'
    script.write_text(JOB)
    return [sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node',
            str(nproc), '--redirects', '1', '--tee', '1', '--max_restarts',
            str(restarts), *launch, str(script), mode, *args]


def job_env(env):
    full_env = dict(os.environ, **(env or {}))
    for name in ('KOLO_SECRET', 'KOLO_SECRET_FILE', 'KOLO_COORDINATOR'):
        if env is None or name not in env:
            full_env.pop(name, None)
    full_env.setdefault('KOLO_START_TIMEOUT', '60')
    return full_env


def torchrun(tmp_path, launch, mode='plain', args=(), env=None,
             timeout=DEADLINE, restarts=0):
    """Runs JOB under torchrun; returns (exit code, output, seconds, argv)."""
    argv = torchrun_argv(tmp_path, launch, mode, args, restarts=restarts)
    start = time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True,
                         env=job_env(env), timeout=timeout, check=False)
    return (out.returncode, out.stdout + out.stderr,
            time.monotonic() - start, argv)


def results(text):
    """rank -> its RESULT line's fields (torchrun prefixes '[default<n>]:')."""
    found = {}
    for line in text.splitlines():
        if 'RESULT ' not in line or not line.startswith('[default'):
            continue
        fields = dict(w.split('=', 1)
                      for w in line.split('RESULT ', 1)[1].split(' '))
        found[int(fields['rank'])] = fields
    return found


def expected(rank, given='None', published='True', restart='0'):
    return {'rank': str(rank), 'size': '2', 'restart': restart, 'sum': '[10.0,12.0,14.0,16.0]',
            'w': '[[1.0,1.0]]', 'b': '[5.0]', 'gloo': '3', 'given': given,
            'published': published, 'secret_in_env': 'False',
            'secret_on_cmdline': 'False'}


def check(text, code, **want):
    got = results(text)
    assert sorted(got) == [0, 1], text
    for rank in (0, 1):
        assert got[rank] == expected(rank, **want), text
    again = [l for l in text.splitlines()
             if l.startswith('[default') and 'AGAIN ' in l]
    assert sorted(l.split('AGAIN ', 1)[1] for l in again) == [
        'rank=0 sum=[3.0,3.0]', 'rank=1 sum=[3.0,3.0]'], text
    assert code == 0, text


def test_plain_launch_takes_port_and_secret_from_torchruns_store(tmp_path):
    code, text, _, argv = torchrun(
        tmp_path, ['--master_addr', '127.0.0.1', '--master_port',
                   str(free_port())])
    check(text, code)
    assert not any('SECRET' in a for a in argv)


def test_two_agents_as_two_nodes(tmp_path):
    # --nnodes 2 on one host: node 0's agent hosts the store at
    # --master_addr, global rank 0 runs there and hosts kolo's coordinator.
    port = free_port()
    jobs = []
    for node in (0, 1):
        argv = torchrun_argv(
            tmp_path, ['--nnodes', '2', '--node_rank', str(node),
                       '--master_addr', '127.0.0.1', '--master_port',
                       str(port)], nproc=1)
        jobs.append(subprocess.Popen(argv, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True,
                                     env=job_env(None)))
    texts, codes = [], []
    try:
        for job in jobs:
            texts.append(job.communicate(timeout=DEADLINE)[0])
            codes.append(job.returncode)
    finally:
        for job in jobs:
            if job.poll() is None:
                job.kill()
                job.wait()
    text = '\n'.join(texts)
    check(text, max(codes))


def test_restarted_attempt_takes_fresh_values(tmp_path):
    # Rank 1 dies after init() in attempt 0; torchrun restarts both, and
    # attempt 1 reads its own keys, not attempt 0's.
    code, text, _, _ = torchrun(
        tmp_path, ['--master_addr', '127.0.0.1', '--master_port',
                   str(free_port())], mode='restart', restarts=1)
    check(text, code, restart='1')


def test_standalone_launch(tmp_path):
    # c10d rendezvous: no agent store on MASTER_PORT; rank 0 hosts one
    # there only while the others read, and gloo then finds it free.
    code, text, _, _ = torchrun(tmp_path, ['--standalone'])
    check(text, code, published='False')


def test_user_coordinator_and_secret_file_are_respected(tmp_path):
    secret = tmp_path / 'secret'
    secret.write_text('ab' * 32 + '\n')
    secret.chmod(0o600)
    coordinator = f'127.0.0.1:{free_port()}'
    code, text, _, _ = torchrun(
        tmp_path, ['--master_addr', '127.0.0.1', '--master_port',
                   str(free_port())],
        env={'KOLO_COORDINATOR': coordinator,
             'KOLO_SECRET_FILE': str(secret)})
    check(text, code, given=coordinator, published='False')


def test_unreachable_store_is_a_clear_error(tmp_path):
    dead = free_port()
    code, text, seconds, _ = torchrun(
        tmp_path, ['--master_addr', '127.0.0.1', '--master_port',
                   str(free_port())], mode='no-store', args=[str(dead)],
        env={'KOLO_START_TIMEOUT': '3'}, timeout=90)
    assert code != 0, text
    assert (f"could not reach torchrun's store at "
            f'MASTER_ADDR:MASTER_PORT=127.0.0.1:{dead} within 3 s') in text, \
        text
    assert 'KOLO_SECRET_FILE' in text, text
    assert seconds < 80, text


def test_rank0_that_never_publishes_is_a_clear_error(tmp_path):
    code, text, seconds, _ = torchrun(
        tmp_path, ['--master_addr', '127.0.0.1', '--master_port',
                   str(free_port())], mode='rank0-absent',
        env={'KOLO_START_TIMEOUT': '3'}, timeout=90)
    assert code != 0, text
    assert ('rank 1 waited 3 s in torchrun\'s store at '
            'MASTER_ADDR:MASTER_PORT=') in text, text
    assert 'for rank 0 to publish kolo\'s coordinator address' in text, text
    assert seconds < 80, text


def test_user_secret_file_stays_out_of_the_store(tmp_path):
    # Only the coordinator's address goes through the store.
    secret = tmp_path / 'secret'
    secret.write_text('cd' * 32 + '\n')
    secret.chmod(0o600)
    code, text, _, _ = torchrun(
        tmp_path, ['--master_addr', '127.0.0.1', '--master_port',
                   str(free_port())], env={'KOLO_SECRET_FILE': str(secret)})
    check(text, code, published='False')


# kolo.common.torchrun.prepare() on given environments, in this process.

def torchrun_env(**extra):
    env = {'RANK': '0', 'WORLD_SIZE': '1', 'LOCAL_RANK': '0',
           'MASTER_ADDR': '127.0.0.1', 'MASTER_PORT': '29500',
           'TORCHELASTIC_RUN_ID': f'unit-{time.monotonic_ns()}',
           'TORCHELASTIC_RESTART_COUNT': '0',
           'TORCHELASTIC_USE_AGENT_STORE': 'True'}
    env.update(extra)
    return env


def test_prepare_one_worker_needs_no_store():
    from kolo.common import torchrun as tr  # pylint: disable=import-outside-toplevel
    env = torchrun_env()
    tr.prepare(env)
    assert env['KOLO_COORDINATOR'] == '127.0.0.1:0'
    assert len(env['KOLO_SECRET']) == 64
    first = env.pop('KOLO_SECRET')  # as init() removes it
    tr.prepare(env)  # a later init() of the same attempt
    assert env['KOLO_SECRET'] == first


def test_prepare_leaves_other_launches_and_given_values_alone():
    from kolo.common import torchrun as tr  # pylint: disable=import-outside-toplevel
    for env in (torchrun_env(KOLO_LAUNCHER='kolorun'),
                {'RANK': '0', 'WORLD_SIZE': '2', 'MASTER_ADDR': 'h',
                 'MASTER_PORT': '1'},  # not torchrun's agent
                torchrun_env(KOLO_COORDINATOR='h:2', KOLO_SECRET_FILE='/s')):
        before = dict(env)
        tr.prepare(env)
        assert env == before
    # The user's KOLO_SECRET stays theirs across init()s, which remove it.
    env = torchrun_env(KOLO_COORDINATOR='h:2', KOLO_SECRET='x' * 32)
    tr.prepare(env)
    del env['KOLO_SECRET']
    tr.prepare(env)
    assert 'KOLO_SECRET' not in env


def test_prepare_rejects_a_bad_start_timeout():
    from kolo.common import torchrun as tr  # pylint: disable=import-outside-toplevel
    env = torchrun_env(WORLD_SIZE='2', KOLO_START_TIMEOUT='soon')
    with pytest.raises(tr.TorchrunStoreError,
                       match="KOLO_START_TIMEOUT='soon' is not a number"):
        tr.prepare(env)
