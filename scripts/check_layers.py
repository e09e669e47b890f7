#!/usr/bin/env python3
"""Lists the include edges between the layers of src/ and fails on an upward one.

The layers, lowest first, are those of CMakeLists.txt (CLLM_LAYERS) with cli
on top. A file may include headers of its own layer and of layers below it;
the build enforces the same rule (each layer's include path holds only its
own and lower folders), and this check names every offending line at once.

    python3 scripts/check_layers.py [--edges]

--edges prints the edge counts between layers (e.g. "engine -> kv: 4").
Exit status 1 when an upward or unknown include is found.
"""
import argparse
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layers_from_cmake():
    text = open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8").read()
    m = re.search(r"set\(CLLM_LAYERS ([^)]*)\)", text)
    if not m:
        sys.exit("check_layers: CMakeLists.txt has no set(CLLM_LAYERS ...)")
    return m.group(1).split() + ["cli"]


def edges(src_dir, layers):
    """(from_layer, to_layer, file, line, header) for every quoted include
    that names a folder."""
    out = []
    for layer in sorted(os.listdir(src_dir)):
        folder = os.path.join(src_dir, layer)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(folder, name)
            text = open(path, encoding="utf-8").read()
            for m in INCLUDE.finditer(text):
                header = m.group(1)
                line = text.count("\n", 0, m.start()) + 1
                target = header.split("/")[0] if "/" in header else layer
                out.append((layer, target, os.path.relpath(path, ROOT), line, header))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", action="store_true", help="print edge counts between layers")
    ap.add_argument("--src", default=os.path.join(ROOT, "src"), help="source tree (default: src/)")
    args = ap.parse_args()
    layers = layers_from_cmake()
    rank = {name: i for i, name in enumerate(layers)}
    found = edges(args.src, layers)
    bad = []
    counts = {}
    for frm, to, path, line, header in found:
        if frm not in rank:
            bad.append(f"{path}: folder src/{frm} is not a layer in CMakeLists.txt")
            continue
        if to == "cllm.h":
            continue
        if to not in rank:
            bad.append(f"{path}:{line}: #include \"{header}\": {to}/ is not a layer")
        elif rank[to] > rank[frm]:
            bad.append(f"{path}:{line}: #include \"{header}\": {frm} may not include {to} (a higher layer)")
        if to != frm:
            counts[(frm, to)] = counts.get((frm, to), 0) + 1
    if args.edges:
        for (frm, to), n in sorted(counts.items(), key=lambda kv: (rank.get(kv[0][0], 99), rank.get(kv[0][1], 99))):
            print(f"{frm} -> {to}: {n}")
    for b in sorted(set(bad)):
        print(b, file=sys.stderr)
    if bad:
        print(f"check_layers: {len(set(bad))} include(s) break the layer order {' < '.join(layers)}", file=sys.stderr)
        return 1
    print(f"check_layers: {len(found)} includes in src/ follow the layer order {' < '.join(layers)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
