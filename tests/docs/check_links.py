#!/usr/bin/env python3
"""Checks the relative links of the Markdown pages outside the site.

Usage: check_links.py ROOT [PAGE...]  (default pages: README.md,
CONTRIBUTING.md, CHANGELOG.md, tests/README.md)

The site under docs/ is checked by Sphinx's strict build; the pages a
repository's visitor reads first are not part of it. Every relative link
`[text](path)` or `![alt](path)` of these pages must name a file or folder
that exists, and a `path.md#anchor` (or `#anchor`) must name a heading of
that page (GitHub's slugs: lower case, punctuation dropped, spaces to
hyphens); code blocks and code spans are skipped. Links with a scheme (https:, mailto:) are not followed: the check
runs offline. Exits 1 listing every broken link.
"""

import os
import re
import sys

DEFAULT_PAGES = ["README.md", "CONTRIBUTING.md", "CHANGELOG.md", "tests/README.md"]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    with open(path, encoding="utf-8") as f:
        text = FENCE.sub("", f.read())
    return {slug(h) for h in re.findall(r"^#{1,6} (.*)$", text, re.M)}


def broken_links(root, page):
    path = os.path.join(root, page)
    with open(path, encoding="utf-8") as f:
        text = CODE_SPAN.sub("", FENCE.sub("", f.read()))
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
            if file_part else path
        if not os.path.exists(dest):
            yield f"{page}: {target}: no such file"
        elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
            yield f"{page}: {target}: no heading #{anchor} there"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    pages = sys.argv[2:] or DEFAULT_PAGES
    broken = [b for p in pages for b in broken_links(root, p)]
    for b in broken:
        print(f"check_links.py: broken link: {b}")
    if broken:
        sys.exit(1)
    print(f"check_links.py: the links of {len(pages)} page(s) resolve")


if __name__ == "__main__":
    main()
