#!/usr/bin/env python3
"""Checks that kiln's folders include each other in one direction only, and prints who includes whom.

    python3 tools/layers.py            # check: every #include "FOLDER/..." must point down a layer
    python3 tools/layers.py --graph    # the folder dependency graph (edges with include counts)

The layers, bottom to top (a folder may include its own layer and any layer below it):

    base <- serializer <- vm <- jit, external (run sides) <- compiler
         <- external/<vendor>/compile (compile sides of vendors) <- embed <- python, tools, examples

tests/ may include anything. Exit status 1 lists every include that points up or sideways.
"""
import os
import re
import sys

# Longest prefix wins. The number is the layer; a folder may include folders of a lower number,
# and folders of its own number only when it is the same folder (jit and external are siblings).
LAYERS = [
    ("base/", 0),
    ("serializer/", 1),
    ("vm/", 2),
    ("jit/", 3),
    ("external/", 3),
    ("compiler/", 4),
    ("external/onednn/compile/", 5),
    ("embed/", 6),
    ("python/", 7),
    ("tools/", 7),
    ("examples/", 7),
    ("tests/", 8),
]
# Edges the layer numbers would allow but the design forbids: the compiler knows vendors only
# through compiler/external_compiler.h; tools, servers and the Python module wire nothing
# themselves (embed/ is the one composition root), so they reach neither the JIT's engine nor
# a vendor runtime directly.
FORBIDDEN = [
    ("compiler/", "external/"),
    ("tools/", "jit/engine.h"),
    ("tools/", "jit/kernel_provider.h"),
    ("tools/", "external/onednn/"),
    ("python/", "jit/engine.h"),
    ("python/", "jit/kernel_provider.h"),
    ("python/", "external/onednn/"),
    ("examples/serving/", "jit/engine.h"),
    ("examples/serving/", "jit/kernel_provider.h"),
    ("examples/serving/", "external/onednn/"),
]
SOURCE_SUFFIXES = (".h", ".cc", ".c", ".def")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    """(prefix, layer) of the longest matching prefix, or None outside kiln's folders."""
    best = None
    for prefix, layer in LAYERS:
        if path.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, layer)
    return best


def compile_side(prefix):
    return prefix.endswith("/compile/")


def why_not(path, inc, src, dst):
    """None if `path` (in folder `src`) may include `inc` (in folder `dst`; both (prefix,
    layer)), else the reason."""
    for a, b in FORBIDDEN:
        if path.startswith(a) and inc.startswith(b):
            return f"{a} may not include {b}* (embed/ wires; the compiler sees vendors only " \
                   "through compiler/external_compiler.h)"
    if src[0] == dst[0]:
        return None
    # A vendor's compile side may use its own run side's shared pieces (the blob format).
    if compile_side(src[0]) and src[0].startswith(dst[0]):
        return None
    if dst[1] < src[1]:
        return None
    return f"{src[0]} may not depend on {dst[0]}"


def sources(root):
    for top in sorted({p.split("/")[0] for p, _ in LAYERS}):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(SOURCE_SUFFIXES):
                    full = os.path.join(dirpath, name)
                    yield os.path.relpath(full, root)


def includes(root, path):
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield lineno, m.group(1)


def folder(path, depth=2):
    parts = path.split("/")[:-1]
    return "/".join(parts[:depth]) if parts else "."


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    graph = "--graph" in argv
    violations = []
    edges = {}
    for path in sources(root):
        src = layer_of(path)
        if src is None:
            continue
        for lineno, inc in includes(root, path):
            dst = layer_of(inc)
            if dst is None:
                continue  # system or generated header outside kiln's folders
            if folder(path) != folder(inc):
                key = (folder(path), folder(inc))
                edges[key] = edges.get(key, 0) + 1
            reason = why_not(path, inc, src, dst)
            if reason:
                violations.append(f"{path}:{lineno}: includes \"{inc}\": {reason}")
    if graph:
        for (a, b), n in sorted(edges.items()):
            if not a.startswith("tests"):
                print(f"{a} -> {b} ({n})")
    for v in violations:
        print(v, file=sys.stderr)
    if violations:
        print(f"layers: {len(violations)} includes point the wrong way", file=sys.stderr)
        return 1
    if not graph:
        print("layers: every include points down (base <- serializer <- vm <- jit, external "
              "<- compiler <- vendor compile sides <- embed <- python, tools, examples)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
