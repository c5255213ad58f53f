"""The console scripts of the kolo-collectives wheel: kolorun, kolo-ctl and
kolo-coordinator on the environment's PATH.

The wheel carries the programs in kolo/_bin/ (setup.py puts them there);
each entry point here replaces this Python process with its program
(os.execv, argv passed through), so the caller sees the program's own
signals and exit code, and the program sees itself in /proc/self/exe.

kolorun also puts this interpreter's folder (the venv's bin/) first on PATH
when it is not on PATH yet, as activating the venv would: ``kolorun -np 2
python train.py`` then starts the workers with the Python this kolo is
installed for, even when kolorun was called by its full path.

In a CMake build (PYTHONPATH=build/python) there is no _bin/: use the
build's bin/ folder instead.
"""

import os
import signal
import sys

_BIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), '_bin')


def _exec(name, prepend_python_dir=False):
    program = os.path.join(_BIN_DIR, name)
    if not os.access(program, os.X_OK):
        sys.stderr.write(
            f'{name}: {program} is missing: this kolo package was not '
            f'installed from the kolo-collectives wheel (in a CMake build, '
            f'run {name} from the build\'s bin/ folder)\n')
        sys.exit(127)
    if prepend_python_dir and sys.executable:
        python_dir = os.path.dirname(os.path.abspath(sys.executable))
        path = os.environ.get('PATH', '')
        if python_dir not in path.split(os.pathsep):
            os.environ['PATH'] = (python_dir + os.pathsep + path
                                  if path else python_dir)
    # Python starts with SIGPIPE and SIGXFSZ ignored, and an ignored signal
    # stays ignored across exec (and into kolorun's workers): restore them.
    for sig in ('SIGPIPE', 'SIGXFSZ'):
        if hasattr(signal, sig):
            signal.signal(getattr(signal, sig), signal.SIG_DFL)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(program, [sys.argv[0]] + sys.argv[1:])


def kolorun():
    _exec('kolorun', prepend_python_dir=True)


def kolo_ctl():
    _exec('kolo-ctl')


def kolo_coordinator():
    _exec('kolo-coordinator')
