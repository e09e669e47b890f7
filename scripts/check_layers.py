#!/usr/bin/env python3
"""Lists the include edges between the layers of src/ and fails on one the layers do not declare.

The layers are those of CMakeLists.txt (CLLM_LAYERS, lowest first) with cli
on top, and each declares the layers it uses (CLLM_USES_<layer>): a DAG, not
a line. A file may include headers of its own layer and of the layers its
layer declares; cli may include any. The build enforces nearly the same rule
(each layer's include path holds its own folder and those of what it uses,
directly or through them); this check is the stricter one (the direct uses
only) and names every offending line at once. It also checks that the
declared uses point only at lower layers, so they stay a DAG.

    python3 scripts/check_layers.py [--edges]

--edges prints the edge counts between layers (e.g. "engine -> kv: 4").
Exit status 1 when an undeclared, upward or unknown include is found.
"""
import argparse
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layers_from_cmake():
    """The layers, lowest first, and what each declares it uses (cli: everything)."""
    text = open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8").read()
    m = re.search(r"set\(CLLM_LAYERS ([^)]*)\)", text)
    if not m:
        sys.exit("check_layers: CMakeLists.txt has no set(CLLM_LAYERS ...)")
    layers = m.group(1).split()
    uses = {}
    for layer in layers:
        u = re.search(r"set\(CLLM_USES_%s([^)]*)\)" % re.escape(layer), text)
        if not u:
            sys.exit(f"check_layers: CMakeLists.txt declares no CLLM_USES_{layer}")
        uses[layer] = set(u.group(1).replace('""', "").split())
    uses["cli"] = set(layers)
    return layers + ["cli"], uses


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
    layers, uses = layers_from_cmake()
    rank = {name: i for i, name in enumerate(layers)}
    found = edges(args.src, layers)
    bad = []
    for layer, used in uses.items():
        for u in sorted(used):
            if u not in rank or rank[u] >= rank[layer]:
                bad.append(f"CMakeLists.txt: CLLM_USES_{layer} names {u}, which is not a lower layer")
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
        elif to != frm and to not in uses[frm]:
            bad.append(f"{path}:{line}: #include \"{header}\": {frm} does not declare that it uses {to} "
                       f"(CLLM_USES_{frm} in CMakeLists.txt)")
        if to != frm:
            counts[(frm, to)] = counts.get((frm, to), 0) + 1
    if args.edges:
        for (frm, to), n in sorted(counts.items(), key=lambda kv: (rank.get(kv[0][0], 99), rank.get(kv[0][1], 99))):
            print(f"{frm} -> {to}: {n}")
    for b in sorted(set(bad)):
        print(b, file=sys.stderr)
    if bad:
        print(f"check_layers: {len(set(bad))} problem(s) with the layers' declared uses", file=sys.stderr)
        return 1
    print(f"check_layers: {len(found)} includes in src/ follow the declared uses of {len(layers)} layers "
          f"({sum(len(u) for k, u in uses.items() if k != 'cli')} edges, lowest first: {' < '.join(layers)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
