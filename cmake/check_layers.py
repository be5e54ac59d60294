#!/usr/bin/env python3
"""Fails when a file of one src/dsa layer includes a header of a layer that is not below it.

Usage: check_layers.py SRC_DSA_DIR LAYER:DEP1,DEP2 ...   (the table of src/CMakeLists.txt)
A layer may include itself and every layer reachable through its deps. Each violation is printed
as FILE:LINE with the offending include, and the allowed layers.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"dsa/([a-z_0-9]+)/')


def main():
    root, table = sys.argv[1], sys.argv[2:]
    deps = {}
    for entry in table:
        layer, _, rest = entry.partition(":")
        deps[layer] = [d for d in rest.split(",") if d]
    allowed = {}

    def closure(layer, seen=()):
        if layer in allowed:
            return allowed[layer]
        if layer in seen:
            sys.exit(f"check_layers: the layer table has a cycle through {layer}")
        out = {layer}
        for d in deps.get(layer, []):
            if d not in deps:
                sys.exit(f"check_layers: layer {layer} depends on unknown layer {d}")
            out |= closure(d, seen + (layer,))
        allowed[layer] = out
        return out

    for layer in deps:
        closure(layer)
    bad = []
    for layer in sorted(deps):
        base = os.path.join(root, layer)
        for dirpath, _, files in os.walk(base):
            for name in sorted(files):
                if not name.endswith((".h", ".cpp", ".cu", ".cuh")):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if m and m.group(1) not in allowed[layer]:
                            bad.append(f"{path}:{n}: layer '{layer}' includes {line.strip()} "
                                       f"(allowed: {', '.join(sorted(allowed[layer]))})")
    if bad:
        print("\n".join(bad), file=sys.stderr)
        print(f"check_layers: {len(bad)} upward include(s): a layer may include only the layers "
              "below it (src/CMakeLists.txt)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
