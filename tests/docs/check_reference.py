#!/usr/bin/python3
"""Checks the documentation's reference pages against the code.

- docs/configuration.md: every variable of kVariables
  (common/variables.cc) that is not internal has a row (its name
  in the first column of a table), and so has every Horovod variable kolo
  reads or sets (the aliases of common/knobs.h's kKnobTable and every
  "HOROVOD_..." string in the worker library, kolorun, kolo-coordinator and
  the Python package); and every KOLO_* or HOROVOD_* name the page mentions
  is one kolo knows.
- docs/running.md (with --kolorun): every flag `kolorun --help` lists has a
  row in the page's kolorun section, and every flag that section names
  exists.
- docs/api/python.md: every public name of kolo.torch, kolo.torch.elastic
  and kolo (their __init__.py files) has an autodoc entry (or, for
  constants, a row).
- docs/api/cpp.md (with --doxygen-xml, as scripts/docs.sh runs it): every
  public function, type and constant Doxygen found in include/kolo/*.h has
  a Breathe directive.

Usage: check_reference.py [--kolorun PATH] [--doxygen-xml DIR] [--root DIR]
Exit status 0 when every check passes, 1 with one line per problem.
CTest runs it as docs_reference_test (tests/docs.cmake).
"""

import argparse
import ast
import collections
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

NAME = re.compile(r'\b(?:KOLO|HOROVOD)_[A-Z0-9_]*[A-Z0-9]\b')
CODE_SPAN = re.compile(r'`([^`]+)`')
FLAG = re.compile(r'(?<![\w-])(--?[A-Za-z][A-Za-z0-9-]*)')


def read(root, path):
    with open(os.path.join(root, path), encoding='utf-8') as f:
        return f.read()


# ---- What the code knows -----------------------------------------------------

def known_variables(root):
    """{name: internal} of the KOLO_* rows of kVariables."""
    text = read(root, 'common/variables.cc')
    table = text[text.index('kVariables[]'):]
    table = table[:table.index('\n};')]
    rows = re.split(r'\n\s*\{\.name = ', table)[1:]
    known = {}
    for row in rows:
        name = re.match(r'"([A-Z0-9_, ]+)"', row)
        if name is None:
            raise SystemExit('check_reference: cannot read a row of '
                             'kVariables in common/variables.cc')
        if name.group(1).startswith('KOLO_'):
            known[name.group(1)] = '.internal = true' in row
    if not known:
        raise SystemExit('check_reference: cannot read kVariables in '
                         'common/variables.cc')
    return known


def horovod_variables(root):
    """Every HOROVOD_* variable kolo reads or sets, with where."""
    found = {}
    for alias in re.findall(r'\.alias\s*=\s*"(HOROVOD_[A-Z0-9_]+)"',
                            read(root, 'common/knobs.h')):
        found.setdefault(alias, 'common/knobs.h')
    literal = re.compile(r'["\'](HOROVOD_[A-Z0-9_]+)["\']')
    for top in ('worker_lib', 'launcher', 'coordinator', 'python/kolo'):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith(('.cc', '.h', '.py')):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding='utf-8') as f:
                    for var in literal.findall(f.read()):
                        found.setdefault(var, os.path.relpath(path, root))
    return found


def horovod_table(root):
    """{name: use} from kolorun's table of Horovod's variables
    (launcher/horovod_variables.cc: {"HOROVOD_X", Use::kNotUsed, ...})."""
    path = 'launcher/horovod_variables.cc'
    text = read(root, path)
    entries = dict(re.findall(
        r'\{\s*"(HOROVOD_[A-Z0-9_]+)"\s*,\s*Use::k(\w+)', text))
    if not entries:
        raise SystemExit(f'check_reference: no table in {path}')
    return entries


def kolorun_flags(kolorun):
    """The flags `kolorun --help` lists (each spelling of each option)."""
    out = subprocess.run([kolorun, '--help'], check=True, capture_output=True,
                         text=True, timeout=60).stdout
    flags = set()
    for line in out.splitlines():
        m = re.match(r'^  (-\S.*)$', line)
        if not m:
            continue
        # The option column ends at the first run of two spaces.
        column = re.split(r'\s{2,}', m.group(1))[0]
        flags.update(FLAG.findall(column))
    if not flags:
        raise SystemExit(f'check_reference: no flags in {kolorun} --help')
    return flags


# ---- What the pages say ------------------------------------------------------

def table_rows(text):
    """(line number, header cells, cells) of every table body row."""
    rows = []
    header = None
    previous = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith('|'):
            header = None
            previous = None
            continue
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if all(re.fullmatch(r':?-+:?', c) for c in cells if c):
            header = previous
        elif header is not None:
            rows.append((number, header, cells))
        previous = cells
    return rows


def code_names(cell, pattern):
    names = set()
    for span in CODE_SPAN.findall(cell):
        names.update(pattern.findall(span))
    return names


def section(text, title_prefix):
    """The text of the ## section whose title starts with title_prefix."""
    lines = text.splitlines()
    start = None
    for i, line in enumerate(lines):
        if start is None:
            if re.match(r'^## ', line) and \
                    line[3:].strip().strip('`').startswith(title_prefix):
                start = i
        elif re.match(r'^## ', line):
            return '\n'.join(lines[start:i])
    return None if start is None else '\n'.join(lines[start:])


def check_configuration(root, problems):
    page = 'docs/configuration.md'
    text = read(root, page)
    known = known_variables(root)
    horovod = horovod_variables(root)
    documented = set()
    for _, header, cells in table_rows(text):
        alias_columns = [i for i, h in enumerate(header)
                         if 'horovod' in h.lower()]
        documented |= code_names(cells[0], NAME)
        for i in alias_columns:
            if i < len(cells):
                documented |= {n for n in code_names(cells[i], NAME)
                               if n.startswith('HOROVOD_')}
    for name, internal in sorted(known.items()):
        if not internal and name not in documented:
            problems.append(
                f'{page}: {name} (common/variables.cc) has no row')
    table = horovod_table(root)
    for name in table:
        horovod.setdefault(name, 'launcher/horovod_variables.cc')
    for name, where in sorted(horovod.items()):
        if name not in documented:
            problems.append(f'{page}: {name} ({where}) has no row')
    # A variable kolorun gives a notice for is documented as "Not used".
    for _, _, cells in table_rows(text):
        for name in code_names(cells[0], NAME):
            if table.get(name) == 'NotUsed' and \
                    'not used' not in ' '.join(cells[1:]).lower():
                problems.append(f'{page}: {name} is not used by kolo '
                                '(launcher/horovod_variables.cc) but its row '
                                'does not say "Not used"')
    for number, line in enumerate(text.splitlines(), 1):
        for name in NAME.findall(line):
            if name not in known and name not in horovod:
                problems.append(
                    f'{page}:{number}: {name} is not a variable kolo knows '
                    '(common/variables.cc, common/knobs.h)')


def check_running(root, kolorun, problems):
    page = 'docs/running.md'
    text = section(read(root, page), 'kolorun')
    if text is None:
        problems.append(f'{page}: no "## kolorun" section')
        return
    flags = kolorun_flags(kolorun)
    documented = set()
    for _, _, cells in table_rows(text):
        documented |= code_names(cells[0], FLAG)
    for flag in sorted(flags - documented):
        problems.append(f'{page}: kolorun {flag} (kolorun --help) has no row '
                        'in the kolorun section')
    named = set(documented)
    prose = re.sub(r'^```.*?^```', '', text, flags=re.S | re.M)
    for span in CODE_SPAN.findall(prose):
        if span.startswith('-'):
            named |= set(FLAG.findall(span))
    for flag in sorted(named - flags):
        problems.append(f'{page}: the kolorun section names {flag}, which '
                        'kolorun --help does not list')


def public_names(root, init_path):
    """The names a package's __init__.py makes public."""
    tree = ast.parse(read(root, init_path))
    package_dir = os.path.dirname(os.path.join(root, init_path))
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                name = alias.asname or alias.name
                sub = os.path.join(package_dir, name)
                if os.path.isdir(sub) or os.path.exists(sub + '.py'):
                    continue  # a submodule
                names.add(name)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
    return {n for n in names if not n.startswith('_')}


def check_python(root, problems):
    page = 'docs/api/python.md'
    text = read(root, page)
    targets = set(re.findall(r'\.\. auto\w+:: ([\w.]+)', text))
    targets |= set(re.findall(r'```\{auto\w+\} ([\w.]+)', text))
    rows = set()
    for _, _, cells in table_rows(text):
        rows |= set(CODE_SPAN.findall(cells[0]))
    numpy_section = section(text, 'kolo (NumPy)') or ''
    mentioned = set(CODE_SPAN.findall(numpy_section))
    for module, init, fallback in (
            ('kolo.torch', 'python/kolo/torch/__init__.py', rows),
            ('kolo.torch.elastic', 'python/kolo/torch/elastic/__init__.py',
             set()),
            ('kolo', 'python/kolo/__init__.py', mentioned)):
        for name in sorted(public_names(root, init)):
            if f'{module}.{name}' not in targets and name not in fallback:
                problems.append(f'{page}: {module}.{name} ({init}) has no '
                                'autodoc entry')


def check_cpp(root, xml_dir, problems):
    page = 'docs/api/cpp.md'
    text = read(root, page)
    directives = collections.Counter()
    for kind, target in re.findall(r'```\{doxygen(\w+)\}\s+([^\n]+)', text):
        directives[target.split('(')[0].strip()] += 1
    declared = collections.Counter()
    private = set()
    compounds = []
    for name in sorted(os.listdir(xml_dir)):
        if not name.endswith('.xml') or name == 'index.xml':
            continue
        root_el = ET.parse(os.path.join(xml_dir, name)).getroot()
        for cd in root_el.iter('compounddef'):
            for inner in cd.findall('innerclass'):
                if inner.get('prot') != 'public':
                    private.add(inner.text)
            compounds.append(cd)
    for cd in compounds:
        kind = cd.get('kind')
        qualified = cd.findtext('compoundname')
        if kind == 'namespace' and qualified.startswith('kolo'):
            for md in cd.iter('memberdef'):
                if md.get('prot') == 'public':
                    declared[f'{qualified}::{md.findtext("name")}'] += 1
        elif kind in ('struct', 'class') and qualified not in private:
            declared[qualified] += 1
    if not declared:
        problems.append(f'{xml_dir}: no declarations of kolo found')
    for name, count in sorted(declared.items()):
        if directives[name] < count:
            problems.append(
                f'{page}: {name} has {directives[name]} Breathe directive(s) '
                f'for {count} declaration(s) in include/kolo/')


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--root', default=os.path.dirname(os.path.dirname(here)),
                        help='the repository (default: this file\'s)')
    parser.add_argument('--kolorun', help='a built kolorun, for its --help')
    parser.add_argument('--doxygen-xml',
                        help='Doxygen\'s XML of include/kolo (scripts/docs.sh)')
    args = parser.parse_args()
    problems = []
    check_configuration(args.root, problems)
    if args.kolorun:
        check_running(args.root, args.kolorun, problems)
    check_python(args.root, problems)
    if args.doxygen_xml:
        check_cpp(args.root, args.doxygen_xml, problems)
    for p in problems:
        print(p)
    checked = ['configuration', 'python'] + \
        (['running'] if args.kolorun else []) + \
        (['cpp'] if args.doxygen_xml else [])
    if problems:
        print(f'check_reference: {len(problems)} problem(s) '
              f'(checked: {", ".join(checked)})')
        return 1
    print(f'check_reference: ok (checked: {", ".join(checked)})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
