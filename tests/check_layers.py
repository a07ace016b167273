#!/usr/bin/env python3
"""The #include graph of src/ goes one way:

    base <- tensor <- kernels <- nn <- models <- generate <- api
                                 nn <- tokenizer, template (beside models)
    base <- vision (beside models; images and the image processor)

A file may include its own folder, any folder below it, and the public
lmc.h; nothing includes upward or sideways (models, tokenizer and template
do not include each other). Prints every offending line; exit 1 if any.
usage: check_layers.py SRC_DIR"""
import os
import re
import sys

RANK = {"base": 0, "tensor": 1, "kernels": 2, "nn": 3, "models": 4, "tokenizer": 4,
        "template": 4, "vision": 4, "generate": 5, "api": 6}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def main(src):
    bad, edges = [], 0
    for root, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(root, name)
            layer = os.path.relpath(path, src).split(os.sep)[0]
            if layer not in RANK:
                bad.append(f"{path}: folder '{layer}' has no place in the layer order")
                continue
            with open(path, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m or m.group(1) == "lmc.h":
                        continue
                    target = m.group(1).split("/")[0] if "/" in m.group(1) else layer
                    edges += 1
                    if target == layer:
                        continue
                    if target not in RANK:
                        bad.append(f"{path}:{n}: includes {m.group(1)} (unknown folder)")
                    elif RANK[target] >= RANK[layer]:
                        how = "sideways" if RANK[target] == RANK[layer] else "upward"
                        bad.append(f"{path}:{n}: {layer} includes {m.group(1)} ({how})")
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} include(s) break the layer order")
        return 1
    print(f"ok: {edges} includes follow base <- tensor <- kernels <- nn <- models/tokenizer/template <- generate <- api")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "src"))
