#!/usr/bin/python3
"""Packs what a GPU machine needs to build kolo's Python module (kolo._kolo)
for *its own* Python and torch (issue 23: kolo.torch with CUDA tensors; the
machine's python3 is another version than Debian's, so the module cannot be
carried prebuilt): the static kolo libraries (debug info stripped) and the
shared libraries of the module's link line, the headers of Debian's
libraries it includes (Abseil, protobuf), and the compile flags and link
line with those paths made relative to the kit. scripts/gpu-check.sh builds
the module from it (--prebuilt DIR, DIR/pykit) with the machine's pybind11.

Usage: scripts/gpu-pykit.py BUILD_DIR KIT_DIR (BUILD_DIR configured with
CUDA and Python, kolo_python built); the shared libraries go to KIT_DIR/../lib
(the pack's lib/). Called by scripts/gpu-pack.sh.
"""

import os
import shlex
import shutil
import subprocess
import sys

build, kit = sys.argv[1], sys.argv[2]
objs = ['python/CMakeFiles/kolo_python.dir/' + f + '.cc.o'
        for f in ('_kolo', 'elastic_binding', 'device_buffer',
                  'torch_fast_path')]


def ninja(*args):
    return subprocess.run(['ninja', '-C', build, *args], check=True,
                          capture_output=True, text=True).stdout


shutil.rmtree(kit, ignore_errors=True)
os.makedirs(f'{kit}/lib')
os.makedirs(f'{kit}/include')

# Headers of Debian's libraries that the module's sources include, and the
# generated ones (protobuf's, relative to the build folder).
for line in ninja('-t', 'deps', *objs).splitlines():
    path = line.strip()
    rel = None
    if path.startswith(('/usr/include/absl/', '/usr/include/google/')):
        rel = path[len('/usr/include/'):]
    elif path.endswith('.h') and not path.startswith('/') and ':' not in path:
        rel, path = path, os.path.join(build, path)
    if rel is not None:
        dest = f'{kit}/include/{rel}'
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(path, dest)

# The compile flags of _kolo.cc (defines and language options).
module = [t for t in ninja('-t', 'targets', 'all').splitlines()
          if t.startswith('python/kolo/_kolo.') and '.so:' in t]
module = module[0].split(':')[0]
commands = ninja('-t', 'commands', module).splitlines()
compile_cmd = next(c for c in commands if '_kolo.cc.o -c' in c)
flags = [t for t in shlex.split(compile_cmd)
         if t.startswith(('-D', '-std', '-f', '-pthread', '-O'))]
with open(f'{kit}/compile.args', 'w') as f:
    f.write(' '.join(flags) + '\n')

# The link line, after the objects: kolo's static libraries and Debian's
# shared ones copied into the kit; CUDA and NCCL from the machine itself.
link = shlex.split(next(part for part in commands[-1].split('&&')
                        if '-shared' in part))
last_obj = max(i for i, t in enumerate(link) if t.endswith('.o'))
out = []
for t in link[last_obj + 1:]:
    if t.startswith('-Wl,-rpath') or t == '-L/usr/lib/x86_64-linux-gnu' \
            or t == ':':
        continue
    if t.endswith('.a'):
        name = os.path.basename(t)
        subprocess.run(['strip', '--strip-debug', '-o', f'{kit}/lib/{name}',
                        os.path.join(build, t)], check=True)
        out.append(f'KIT/lib/{name}')
    elif 'libnccl' in t:
        out.append('-lnccl')
    elif 'libcudart' in t:
        out += ['-L/usr/local/cuda/lib64', '-lcudart']
    elif t.startswith('/usr/lib/') or t == '-lre2':
        # By soname, into the pack's lib/ (gpu-pack.sh copies the
        # binaries' libraries there under the same names).
        src = ('/usr/lib/x86_64-linux-gnu/libre2.so' if t == '-lre2' else t)
        dump = subprocess.run(['objdump', '-p', src], check=True,
                              capture_output=True, text=True).stdout
        name = next((ln.split()[1] for ln in dump.splitlines()
                     if ln.strip().startswith('SONAME')),
                    os.path.basename(src))
        if not os.path.exists(f'{kit}/../lib/{name}'):
            shutil.copyfile(os.path.realpath(src), f'{kit}/../lib/{name}')
        out.append(f'KIT/../lib/{name}')
    else:
        out.append(t)
with open(f'{kit}/link.args', 'w') as f:
    f.write(' '.join(out) + '\n')
print(f'pykit: {len(out)} link arguments, flags: {" ".join(flags)}')
