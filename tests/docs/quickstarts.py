#!/usr/bin/env python3
"""Runs the README's quick starts exactly as written, against an install.

Usage: quickstarts.py README BUILD_DIR

BUILD_DIR (a built kolo tree) is installed with `cmake --install` into a
temporary prefix; the quick starts then run as a user who installed kolo
would run them: the prefix's bin/ first on PATH (and `python3` meaning
Debian's /usr/bin/python3, which has torch), its pkg-config file, library and
Python package found through PKG_CONFIG_PATH, LD_LIBRARY_PATH and PYTHONPATH.

The README's "## Quick starts" section is read in order. In it:
  - a fenced block whose info string names a file (```cpp file=sum.cc) is
    written to the working folder (shared by every quick start, so a later
    one may reuse an earlier one's file);
  - a ```sh block is run by bash (-e -u -o pipefail) in that folder and
    must exit 0;
  - a ```text block after an sh block is output it must print: every line
    must equal some line of the command's stdout and stderr, where `...`
    stands for any text.
Fails when a block fails, when an expected line is missing, or when the
section holds fewer than MIN_COMMANDS commands (a README reshaped so that
nothing runs must not pass).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

MIN_COMMANDS = 4
TIMEOUT_S = 300
FENCE = re.compile(r"^```(\S*)[ \t]*(.*?)\n(.*?)^```[ \t]*$", re.M | re.S)


def quickstart_section(readme):
    """The text of the '## Quick starts' section."""
    m = re.search(r"^## Quick starts\n(.*?)(?=^## |\Z)", readme, re.M | re.S)
    if not m:
        sys.exit("quickstarts.py: FAIL: README has no '## Quick starts' section")
    return m.group(1)


def blocks(section):
    """(heading, language, info, body) for each fenced block, in order."""
    heading = None
    pos = 0
    for m in FENCE.finditer(section):
        for h in re.findall(r"^### (.*)$", section[pos:m.start()], re.M):
            heading = h
        pos = m.end()
        yield heading, m.group(1), m.group(2), m.group(3)


def line_pattern(expected):
    parts = [re.escape(p) for p in expected.split("...")]
    return re.compile(".*".join(parts) + r"\Z")


def install(build, prefix):
    subprocess.run(["cmake", "--install", build, "--prefix", prefix],
                   check=True, stdout=subprocess.DEVNULL)
    libdir = pydir = None
    for dirpath, _, files in os.walk(prefix):
        if "libkolo.so" in files:
            libdir = dirpath
        if "__init__.py" in files and os.path.basename(dirpath) == "kolo":
            pydir = os.path.dirname(dirpath)
    if not libdir or not pydir:
        sys.exit(f"quickstarts.py: FAIL: no libkolo.so or kolo package under {prefix}")
    return libdir, pydir


def user_env(prefix, libdir, pydir, shim):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KOLO_", "HOROVOD_"))}
    env["PATH"] = os.pathsep.join([os.path.join(prefix, "bin"), shim,
                                   env.get("PATH", "/usr/bin:/bin")])
    env["PKG_CONFIG_PATH"] = os.path.join(libdir, "pkgconfig")
    env["LD_LIBRARY_PATH"] = libdir
    env["PYTHONPATH"] = pydir
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    readme, build = sys.argv[1], os.path.abspath(sys.argv[2])
    with open(readme, encoding="utf-8") as f:
        section = quickstart_section(f.read())
    tmp = tempfile.mkdtemp(prefix="kolo-quickstarts.")
    try:
        prefix = os.path.join(tmp, "prefix")
        work = os.path.join(tmp, "work")
        shim = os.path.join(tmp, "shim")
        os.makedirs(work)
        os.makedirs(shim)
        os.symlink(os.environ.get("KOLO_PYTHON", "/usr/bin/python3"),
                   os.path.join(shim, "python3"))
        libdir, pydir = install(build, prefix)
        env = user_env(prefix, libdir, pydir, shim)
        commands = 0
        output = None
        for heading, lang, info, body in blocks(section):
            where = f"quick start '{heading}'"
            name = re.match(r"file=(\S+)", info)
            if name:
                with open(os.path.join(work, name.group(1)), "w") as f:
                    f.write(body)
                output = None
            elif lang == "sh":
                commands += 1
                print(f"--- {where}: {body.strip()}", flush=True)
                run = subprocess.run(
                    ["bash", "-euo", "pipefail", "-c", body], cwd=work,
                    env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                    text=True, timeout=TIMEOUT_S)
                output = run.stdout
                if run.returncode != 0:
                    print(output)
                    sys.exit(f"quickstarts.py: FAIL: {where}: exit {run.returncode}")
            elif lang == "text":
                if output is None:
                    sys.exit(f"quickstarts.py: FAIL: {where}: an output block "
                             "with no command before it")
                lines = output.splitlines()
                for want in body.splitlines():
                    if not any(line_pattern(want).match(line) for line in lines):
                        print(output)
                        sys.exit(f"quickstarts.py: FAIL: {where}: no output line "
                                 f"matches {want!r}")
                print(f"    {len(body.splitlines())} expected line(s) found")
        if commands < MIN_COMMANDS:
            sys.exit(f"quickstarts.py: FAIL: {commands} command block(s) in the "
                     f"quick starts, expected at least {MIN_COMMANDS}")
        print(f"quickstarts.py: {commands} quick-start commands ran as written")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
