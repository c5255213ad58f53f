#!/usr/bin/env bash
# Builds the documentation site, strictly: Doxygen over the public headers
# (include/kolo/*.h; an undocumented public declaration fails), then Sphinx
# over docs/ (any warning fails: a broken link or cross-reference, a page
# missing from the table of contents, an autodoc or Breathe problem), then
# tests/docs/check_reference.py (every variable, kolorun flag, C++
# declaration and kolo.torch name has its entry) and tests/docs/check_links.py
# (README's and the other top-level pages' links). Needs no compiled kolo.
#
# Usage: scripts/docs.sh [BUILD_DIR]     (default: build)
#   BUILD_DIR/doxygen/xml   Doxygen's XML (Breathe reads it)
#   BUILD_DIR/site/         the site: open BUILD_DIR/site/index.html
# A relative BUILD_DIR is taken from the repository root. Packages:
# scripts/install-deps.sh --test (doxygen, python3-sphinx,
# python3-myst-parser, python3-breathe, furo).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${1:-build}
case "$build" in
  /*) ;;
  *) build="$root/$build" ;;
esac
start=$(date +%s%N)
python=/usr/bin/python3

for tool in doxygen "$python"; do
  if ! command -v "$tool" >/dev/null; then
    echo "docs: $tool is missing; run scripts/install-deps.sh --test" >&2
    exit 1
  fi
done

# Doxygen, from the repository root (docs/Doxyfile names the headers and the
# filter relative to it); only the output directory is given here.
rm -rf "$build/doxygen"
mkdir -p "$build/doxygen"
echo "docs: doxygen include/kolo/*.h -> $build/doxygen/xml"
# A failure is reported at the end, after Sphinx and the checks have had
# their say too.
failed=()
{ cat docs/Doxyfile; echo "OUTPUT_DIRECTORY = $build/doxygen"; } | doxygen - ||
  failed+=(doxygen)

# Sphinx: -W warnings are errors, --keep-going reports them all first, -n
# checks every cross-reference. conf.py reads the XML's place from
# DOXYGEN_XML_DIR. A fresh environment each time (-E): no page read in an
# earlier build hides a warning.
echo "docs: sphinx-build docs -> $build/site"
DOXYGEN_XML_DIR="$build/doxygen/xml" \
  "$python" -m sphinx -W --keep-going -n -E -q -b html \
  -d "$build/site-doctrees" docs "$build/site" || failed+=(sphinx-build)

# The reference pages against the code; kolorun's flags too when this
# build has a kolorun (CTest's docs_reference_test always checks them).
echo "docs: checking the reference pages against the code"
check=(--doxygen-xml "$build/doxygen/xml")
if [ -x "$build/bin/kolorun" ]; then check+=(--kolorun "$build/bin/kolorun"); fi
"$python" tests/docs/check_reference.py "${check[@]}" ||
  failed+=(check_reference.py)

# The pages outside the site (README, CONTRIBUTING, CHANGELOG, the test
# catalogue): their relative links and anchors.
echo "docs: checking the links of the pages outside the site"
"$python" tests/docs/check_links.py "$root" || failed+=(check_links.py)

ms=$(( ($(date +%s%N) - start) / 1000000 ))
took=$(printf '%d.%01d s' $((ms / 1000)) $((ms % 1000 / 100)))
if [ ${#failed[@]} -gt 0 ]; then
  echo "docs: FAILED (${failed[*]}; see above) in $took" >&2
  exit 1
fi
echo "docs: built $build/site/index.html in $took"
