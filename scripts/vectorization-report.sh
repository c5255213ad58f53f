#!/usr/bin/env bash
# Prints which reduction-kernel loops of allreduce/kernels.cc the compiler
# vectorised, per dtype x op, from the compiler's own optimisation record
# (GCC: -fsave-optimization-record, the JSON behind -fopt-info-vec; clang:
# -fsave-optimization-record, the YAML behind -Rpass=loop-vectorize), and
# the same for the in-place maps (MapEachInPlace: the average's division and
# the scales, in place). Each function the record calls vectorised must also
# hold packed instructions in the object code (objdump): a record once said
# "vectorised" of a loop GCC ran as a scalar fallback.
#
# Usage: scripts/vectorization-report.sh [BUILD_DIR]   (default: build)
# BUILD_DIR must be configured (it has compile_commands.json); the file is
# compiled again with exactly its flags, into a temporary directory.
# Exit status: 0, or 1 if a ReduceInto/Reduce loop or a float/double
# in-place map that should vectorise did not, or has no packed instruction
# (int64 min/max/product are expected to stay scalar at the SSE2 baseline).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
db="$build/compile_commands.json"
[ -f "$db" ] || { echo "no $db: configure $build with cmake first" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmd=$(python3 - "$db" <<'EOF'
import json, sys
for e in json.load(open(sys.argv[1])):
    if e["file"].endswith("allreduce/kernels.cc"):
        print(e["command"]); break
else:
    sys.exit("allreduce/kernels.cc is not in compile_commands.json")
EOF
)
dir=$(python3 - "$db" <<'EOF'
import json, sys
print(next(e["directory"] for e in json.load(open(sys.argv[1]))
           if e["file"].endswith("allreduce/kernels.cc")))
EOF
)
# Same flags, our own output; -fsave-optimization-record writes next to it.
cmd=$(sed -E "s# -o [^ ]+# -o $tmp/kernels.o#" <<<"$cmd")
(cd "$dir" && eval "$cmd -fsave-optimization-record")
compiler=$(awk '{print $1}' <<<"$cmd")
echo "compiler: $("$compiler" --version | head -1)"
echo "flags:    $(grep -oE ' -O[0-3s]| -march=[^ ]+| -m[a-z0-9.]+' <<<"$cmd" | tr -d '\n')"
nm --defined-only "$tmp/kernels.o" | awk '{print $3}' | sort -u >"$tmp/symbols"
# Address and size per function: two functions may share one body (GCC
# folds identical ones), and objdump names such a body once.
objdump -t "$tmp/kernels.o" | awk '$3 == "F" {print $6, $4, $1, $5}' >"$tmp/extents"

python3 - "$tmp" <<'EOF'
import glob, gzip, json, re, subprocess, sys
tmp = sys.argv[1]

def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), text=True,
                         capture_output=True, check=True).stdout.splitlines()
    return dict(zip(names, out))

# mangled function -> vector widths (bytes for GCC, lanes for clang)
vectorised = {}
for path in glob.glob(tmp + "/*.opt-record.json.gz"):  # GCC
    for r in json.load(gzip.open(path))[2]:
        msg = "".join(m for m in r.get("message", []) if isinstance(m, str))
        m = re.match(r"loop vectorized using (\d+) byte vectors", msg)
        if r.get("kind") == "success" and m:
            vectorised.setdefault(r["function"], set()).add(m.group(1) + "B")
for path in glob.glob(tmp + "/*.opt.yaml"):  # clang
    for doc in open(path).read().split("--- !")[1:]:
        if (doc.startswith("Passed") and "Pass:            loop-vectorize" in doc
                and re.search(r"Name:\s+Vectorized\n", doc)):
            fn = re.search(r"Function:\s+(\S+)", doc).group(1).strip("'")
            w = re.search(r"VectorizationFactor:\s+'?(\d+)", doc)
            vectorised.setdefault(fn, set()).add("x" + (w.group(1) if w else "?"))

symbols = [s for s in open(tmp + "/symbols").read().split()
           if "Loop" in s or "MapEachInPlace" in s]
names = demangle(symbols + list(vectorised))

# What the object code holds: per function, how many packed (vector)
# arithmetic, compare or logic instructions. The record says what the
# vectoriser did; the code says whether it survived (GCC 12 once kept an
# inlined in-place loop as a scalar fallback of a vectorised one).
PACKED = re.compile(r"\s(v?(add|sub|mul|div|min|max|and|andn|or|xor|cmp\w*)p[sd]|"
                    r"v?p(add|sub|mul|min|max|and|andn|or|xor|cmp|sra|srl|sll|shuf|unpck)\w*)\s")
extents = {n: (sec, int(a, 16), int(z, 16)) for n, sec, a, z in
           (l.split() for l in open(tmp + "/extents"))}
def packed_count(sym):
    section, start, size = extents[sym]
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-j", section,
                          f"--start-address={start:#x}",
                          f"--stop-address={start + size:#x}",
                          tmp + "/kernels.o"],
                         text=True, capture_output=True, check=True).stdout
    return sum(1 for line in out.splitlines() if PACKED.search(line + " "))
packed = {s: packed_count(s) for s in symbols}
claimed_only = []  # vectorised by the record, no packed code
loops = {}  # (kind, T, Op) -> widths or None
maps = []  # (T, symbol) of the in-place maps
for s in symbols:
    m = re.search(r"MapEachInPlace<([^,]+),", names[s])
    if m:
        maps.append((m.group(1), s))
        continue
    m = re.search(r"(\w+Loop)<(.+)>\(", names[s])
    if not m:
        continue
    args = m.group(2).replace("kolo::(anonymous namespace)::", "")
    t, op = (a.strip() for a in args.split(", ", 1))
    loops[(m.group(1), t, op)] = vectorised.get(s)
    if vectorised.get(s) and not packed[s]:
        claimed_only.append(names[s])

u8, s8, u16, s16 = "unsigned char", "signed char", "unsigned short", "short"
u32, s32, u64, s64 = "unsigned int", "int", "unsigned long", "long"
def row(dtype, kinds):  # kinds: op name -> (T, Op)
    return [(dtype, op, t, o) for op, (t, o) in kinds.items()]
def integer(dtype, u, s):
    return row(dtype, {"sum": (u, f"AddOp<{u}>"), "min": (s, f"MinOp<{s}>"),
                       "max": (s, f"MaxOp<{s}>"),
                       "product": (u, f"MulOp<{u}>")})
def floating(dtype, f):
    return row(dtype, {op: (f, f"{n}<{f}>") for op, n in
                       [("sum", "AddOp"), ("min", "MinOp"), ("max", "MaxOp"),
                        ("product", "MulOp")]})
def half(dtype, codec):
    return row(dtype, {op: (u16, f"ViaFloat<{codec}, {n}>") for op, n in
                       [("sum", "AddOp"), ("min", "MinOp"), ("max", "MaxOp"),
                        ("product", "MulOp")]})
table = (integer("uint8", u8, u8) + integer("int8", u8, s8) +
         integer("int16", u16, s16) + integer("int32", u32, s32) +
         integer("int64", u64, s64) + half("float16", "HalfCodec") +
         half("bfloat16", "BFloat16Codec") + floating("float32", "float") +
         floating("float64", "double") +
         row("bool", {"sum/max": (u8, "OrOp"), "product/min": (u8, "AndOp")}))

def norm(t):  # GCC and clang spell some types differently
    return (t.replace("short unsigned int", "unsigned short")
             .replace("long unsigned int", "unsigned long")
             .replace("short int", "short").replace("long int", "long"))
loops = {(k, norm(t), norm(o)): v for (k, t, o), v in loops.items()}

# x86-64 baseline (SSE2) has no 64-bit vector compare (SSE4.2) nor 64-bit
# multiply (AVX-512DQ): GCC keeps these scalar (clang emulates the multiply).
# A scalar cmov loop runs int64 min as fast as a hand-vectorised SSE2
# emulation (measured), so they stay plain.
expected_scalar = {("int64", "min"), ("int64", "max"), ("int64", "product")}

kinds = ["InPlaceLoop", "OutOfPlaceLoop", "SwappedInPlaceLoop", "SelfLoop"]
print("\nReduction loops (average reduces as sum). Columns: ReduceInto /"
      " Reduce out of place / Reduce with out==b / all operands equal")
print(f"{'dtype':9} {'op':12} " + " ".join(f"{k[:-4]:>16}" for k in kinds))
failed = []
for dtype, op, t, o in table:
    cells = []
    for k in kinds:
        if (k, t, o) not in loops:
            cells.append("absent")
            if k != "SelfLoop":
                failed.append(f"{dtype} {op} {k} (no such function)")
            continue
        w = loops[(k, t, o)]
        cells.append("vec " + ",".join(sorted(w)) if w else "NOT vectorised")
        if not w and k != "SelfLoop" and (dtype, op) not in expected_scalar:
            failed.append(f"{dtype} {op} {k}")
    print(f"{dtype:9} {op:12} " + " ".join(f"{c:>16}" for c in cells))
print("\n(GCC: vector width in bytes, the second one is the epilogue;"
      " clang: lanes. 'absent': the compiler removed the loop, e.g."
      " min(x, x) = x.\nSelf loops (all operands the same buffer) are rare"
      " and not required to vectorise.)")
# The in-place maps (DivideBy, Scale, the average's finish; MapInto calls
# them when in == out): float and double must vectorise.
print("\nIn-place maps (the average's division, pre- and postscale, in place):")
for t in ("float", "double"):
    got = [(s, vectorised.get(s)) for tt, s in maps if norm(tt) == t]
    if not got:
        print(f"  {t:7} absent")
        failed.append(f"{t} MapEachInPlace (no such function: inlined?)")
        continue
    for s, w in got:
        what = re.sub(r"kolo::|\(anonymous namespace\)::", "",
                      names[s].split(", ", 1)[1])[:60]
        print(f"  {t:7} {'vec ' + ','.join(sorted(w)) if w else 'NOT vectorised':16}"
              f" {packed[s]:3} packed  {what}")
        if not w:
            failed.append(f"{t} MapEachInPlace ({names[s][:80]}...)")
        elif not packed[s]:
            claimed_only.append(names[s])
if claimed_only:
    print("vectorised by the compiler's record but with no packed instruction"
          " in the code: " + "; ".join(claimed_only))
    failed += claimed_only
if failed:
    print("not vectorised: " + "; ".join(failed))
    sys.exit(1)
print("every reduction loop vectorised except the expected scalar ones: " +
      ", ".join(sorted(" ".join(x) for x in expected_scalar)))
EOF
