#!/usr/bin/env python3
"""Re-quantizes the float32 weights of each /work/shared/conformance/<arch>-hf
model with mlx_quant.quantize (after rounding to float16, as mlx-lm convert
does with the model dtype) and compares packed words, scales and biases with
the tensors stored in <arch>-mlx-4bit-g64, for both variants ("cpu" is what
lmc_quantize_affine reproduces). Stacked MoE experts are skipped (their HF
names differ). Needs numpy: /usr/bin/python3 tests/reference/check_conformance_quant.py [dir]
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mlx_quant as mq  # noqa: E402

DT = {"F32": np.float32, "F16": np.float16, "U32": np.uint32, "BF16": np.uint16}


def load(path):
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        out[k] = np.frombuffer(b[8 + n + s:8 + n + e], dtype=DT[v["dtype"]]).reshape(v["shape"])
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/conformance"
    ok = True
    for arch in ("llama", "qwen2", "phi3", "mixtral", "gemma"):
        hf = load(os.path.join(root, arch + "-hf", "model.safetensors"))
        mx = load(os.path.join(root, arch + "-mlx-4bit-g64", "model.safetensors"))
        diffs = {"cpu": [0, 0, 0], "gpu": [0, 0, 0]}
        n = 0
        for k in mx:
            if not k.endswith(".scales") or k[:-7] + ".weight" not in hf:
                continue
            p = k[:-7]
            w = hf[p + ".weight"].astype(np.float32)
            w = w.reshape(-1, w.shape[-1])
            n += 1
            for be in diffs:
                pk, s, b = mq.quantize(w, 64, 4, "float16", backend=be)
                d = diffs[be]
                d[0] += int((pk.reshape(-1) != mx[p + ".weight"].reshape(-1)).sum())
                d[1] += int((s.view(np.uint16).reshape(-1) != mx[k].view(np.uint16).reshape(-1)).sum())
                d[2] += int((b.view(np.uint16).reshape(-1) != mx[p + ".biases"].view(np.uint16).reshape(-1)).sum())
        print("%-8s %2d tensors  differing words/scales/biases: cpu %s  gpu %s" % (arch, n, diffs["cpu"], diffs["gpu"]))
        ok = ok and diffs["cpu"] == [0, 0, 0]
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
