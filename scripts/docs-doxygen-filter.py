#!/usr/bin/python3
"""Doxygen's INPUT_FILTER for kolo's public headers (docs/Doxyfile).

The headers document their declarations in plain `//` comments, written for
people reading the header. Doxygen reads only `///` (and `/** */`) as
documentation, so this filter turns the comments that document a declaration
into Doxygen's form as Doxygen reads the file; the headers stay as they are.

- A run of whole-line `//` comments directly above a declaration (no blank
  line between them) documents that declaration: each line becomes `///`.
  A section banner in the run (`// ---- Join ----`) stays a plain comment.
- A run followed by a blank line (the file's opening comment, a section's
  introduction) stays a plain comment: docs/api/cpp.md says those things in
  its own words.
- A trailing `// text` after a member, enumerator or function declaration
  (a line ending in `;` or `,`) documents it: it becomes `///< text`.

Usage (what Doxygen runs): docs-doxygen-filter.py FILE; writes to stdout.
"""

import re
import sys

WHOLE_LINE = re.compile(r'^(\s*)//(?!/)(.*)$')
BANNER = re.compile(r'^\s*//\s*-{2,}.*-{2,}\s*$')
TRAILING = re.compile(r'^(\s*[^/\s#}][^"]*?[;,])(\s+)//(?!/)(.*)$')


def documents_next(line):
    """Whether a comment run directly above `line` documents it."""
    stripped = line.strip()
    if not stripped:
        return False
    # Preprocessor lines, closing braces and access specifiers are not
    # declarations.
    return not (stripped.startswith('#') or stripped.startswith('}') or
                stripped in ('public:', 'private:', 'protected:'))


def filter_lines(lines):
    out = list(lines)
    i = 0
    n = len(lines)
    while i < n:
        if not WHOLE_LINE.match(lines[i]):
            m = TRAILING.match(lines[i])
            if m:
                out[i] = f'{m.group(1)}{m.group(2)}///<{m.group(3)}\n'
            i += 1
            continue
        start = i
        while i < n and WHOLE_LINE.match(lines[i]):
            i += 1
        if i < n and documents_next(lines[i]):
            for j in range(start, i):
                if BANNER.match(lines[j]):
                    continue
                m = WHOLE_LINE.match(lines[j])
                out[j] = f'{m.group(1)}///{m.group(2)}\n'
    return out


def main():
    with open(sys.argv[1], encoding='utf-8') as f:
        lines = f.readlines()
    sys.stdout.write(''.join(filter_lines(lines)))


if __name__ == '__main__':
    main()
