"""setup.py: builds the kolo-collectives wheel (import name ``kolo``) with
CMake, for setuptools.build_meta (pyproject.toml):

    pip install --no-build-isolation .
    pip wheel --no-build-isolation -w dist .

build_ext configures CMake in <build_temp>/cmake (Python package, no tests,
examples or benchmarks, for the interpreter running this build), builds only
the Python package and the programs, then copies <build>/python/kolo into
the wheel and the programs into kolo/_bin/, their debug info stripped. The
console scripts (kolo/_programs.py) exec those programs.

Environment:
  KOLO_CMAKE_BUILD_DIR  reuse this configured kolo build folder (CI: the
                        wheel takes what the build has already compiled);
                        it is built, never reconfigured.
  KOLO_CMAKE_ARGS       extra arguments for a fresh configure (shell words),
                        e.g. "-DKOLO_WITH_CUDA=OFF".
  KOLO_WHEEL_KEEP_DEBUG=1  keep the debug info (about 190 MB, not 10 MB).
  CMAKE_BUILD_PARALLEL_LEVEL, CMAKE_GENERATOR: as CMake reads them.
"""

import importlib.machinery
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
PROGRAMS = ('kolorun', 'kolo-ctl', 'kolo-coordinator')
TARGETS = ('kolo_python', 'kolo_python_files') + PROGRAMS


def project_version():
    """The x.y.z of project(kolo VERSION x.y.z) in CMakeLists.txt."""
    text = (ROOT / 'CMakeLists.txt').read_text()
    m = re.search(r'project\(\s*kolo\s+VERSION\s+([0-9][0-9.]*)', text)
    if not m:
        sys.exit('setup.py: no "project(kolo VERSION x.y.z" in CMakeLists.txt')
    return m.group(1)


def read_cache(build_dir):
    """CMakeCache.txt of build_dir as {name: value}; {} when there is none."""
    cache = Path(build_dir) / 'CMakeCache.txt'
    if not cache.is_file():
        return {}
    entries = {}
    for line in cache.read_text().splitlines():
        m = re.match(r'([^#/][^:=]*):[A-Z]+=(.*)', line)
        if m:
            entries[m.group(1)] = m.group(2)
    return entries


def check_no_build_rpath(binaries, build_dir):
    """Fails when a binary would load a library from the build folder (an
    RPATH into it): the wheel would break once that folder is gone. The
    wheel carries no shared library of kolo's own."""
    readelf = shutil.which('readelf')
    if not readelf:
        return
    for binary in binaries:
        dynamic = subprocess.run([readelf, '-d', str(binary)], check=True,
                                 capture_output=True, text=True).stdout
        for paths in re.findall(r'\((?:RPATH|RUNPATH)\).*\[(.*)\]', dynamic):
            for path in paths.split(':'):
                if (path and '$' not in path and
                        Path(path).resolve().is_relative_to(build_dir)):
                    sys.exit(f'setup.py: {binary.name} loads libraries from '
                             f'the build folder ({path}): the wheel cannot '
                             f'carry that')


class BinaryDistribution(Distribution):
    """The wheel holds a native module and programs: never a pure wheel."""

    def has_ext_modules(self):
        return True


class CMakeBuild(build_ext):
    """Builds kolo with CMake and lays the package out in build_lib."""

    def run(self):
        build_dir, cache = self._configure()
        self._run(['cmake', '--build', str(build_dir), '--target', *TARGETS])
        self._outputs = self._copy_package(build_dir, cache)

    def _configure(self):
        reuse = os.environ.get('KOLO_CMAKE_BUILD_DIR')
        if reuse:
            build_dir = Path(reuse).resolve()
            cache = read_cache(build_dir)
            if cache.get('CMAKE_PROJECT_NAME') != 'kolo':
                sys.exit(f'setup.py: KOLO_CMAKE_BUILD_DIR={reuse} is not a '
                         f'configured kolo build folder (no CMakeCache.txt '
                         f'of project kolo)')
            if cache.get('KOLO_WITH_PYTHON') == 'OFF':
                sys.exit(f'setup.py: {build_dir} was configured with '
                         f'KOLO_WITH_PYTHON=OFF: it has no Python package')
            source = cache.get('kolo_SOURCE_DIR', '')
            if source and Path(source).resolve() != ROOT:
                print(f'setup.py: warning: {build_dir} builds {source}, '
                      f'not {ROOT}', file=sys.stderr)
            if os.environ.get('KOLO_CMAKE_ARGS'):
                print('setup.py: KOLO_CMAKE_ARGS ignored: '
                      'KOLO_CMAKE_BUILD_DIR is reused as configured',
                      file=sys.stderr)
            return build_dir, cache
        build_dir = Path(self.build_temp).resolve() / 'cmake'
        build_dir.mkdir(parents=True, exist_ok=True)
        args = ['cmake', '-S', str(ROOT), '-B', str(build_dir),
                '-DKOLO_BUILD_TESTS=OFF', '-DKOLO_BUILD_EXAMPLES=OFF',
                '-DKOLO_BUILD_BENCH=OFF', '-DKOLO_WITH_PYTHON=ON',
                f'-DKOLO_PYTHON_EXECUTABLE={sys.executable}']
        if ('CMAKE_GENERATOR' not in os.environ and shutil.which('ninja')
                and not (build_dir / 'CMakeCache.txt').exists()):
            args += ['-G', 'Ninja']
        args += shlex.split(os.environ.get('KOLO_CMAKE_ARGS', ''))
        self._run(args)
        return build_dir, read_cache(build_dir)

    def _copy_package(self, build_dir, cache):
        source = build_dir / 'python' / 'kolo'
        modules = list(source.glob('_kolo.*'))
        if not any(m.name.endswith(s) for m in modules
                   for s in importlib.machinery.EXTENSION_SUFFIXES):
            sys.exit(f'setup.py: {source} has no kolo._kolo module for '
                     f'{sys.executable} (found: '
                     f'{[m.name for m in modules] or "none"})')
        version_file = (source / '_version.py').read_text()
        if f'"{project_version()}"' not in version_file:
            sys.exit(f'setup.py: {source}/_version.py is not version '
                     f'{project_version()}: reconfigure {build_dir}')
        dest = Path(self.build_lib) / 'kolo'
        if dest.exists():
            shutil.rmtree(dest)  # nothing stale from an earlier build
        # _kolo_c10d (the torch.distributed backend), where the build has
        # it: it links the system's libtorch of the torch version
        # kolo/_version.py names, and kolo.torch.distributed says so when
        # the interpreter's torch is another.
        shutil.copytree(source, dest, ignore=shutil.ignore_patterns(
            '__pycache__', '*.pyc'))
        (dest / '_bin').mkdir()
        for program in PROGRAMS:
            shutil.copy2(build_dir / 'bin' / program, dest / '_bin' / program)
        binaries = [dest / '_bin' / p for p in PROGRAMS]
        binaries += [dest / m.name for m in modules]
        binaries += list(dest.glob('_kolo_c10d.*.so'))
        check_no_build_rpath(binaries, build_dir)
        strip = cache.get('CMAKE_STRIP') or shutil.which('strip')
        if strip and os.environ.get('KOLO_WHEEL_KEEP_DEBUG') != '1':
            self._run([strip, '--strip-debug', *map(str, binaries)])
        return [str(p) for p in dest.rglob('*') if p.is_file()]

    def _run(self, args):
        print('setup.py:', shlex.join(args), flush=True)
        subprocess.run(args, check=True)

    def get_outputs(self):
        return getattr(self, '_outputs', [])

    def get_output_mapping(self):
        return {}

    def get_source_files(self):
        return []


setup(
    version=project_version(),
    distclass=BinaryDistribution,
    cmdclass={'build_ext': CMakeBuild},
    packages=[],
    zip_safe=False,
)
