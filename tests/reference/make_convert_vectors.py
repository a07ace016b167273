#!/usr/bin/env python3
"""Writes tests/fixtures/quant/convert_expect.json: what `lmc convert -q` must
write for the project's dense fixtures, computed independently with the numpy
reference of mlx's quantizer (mlx_quant.py, the "cpu" variant that mlx-lm runs
on a CPU) the way mlx_lm.convert applies it:

- every 2D `*.weight` of the llama fixtures is a Linear or Embedding weight
  (norms are 1D); lm_head is absent when tied;
- the weight is cast to the conversion dtype first (--dtype, else the config's
  dtype: float32 for llama-f32, bfloat16 for llama-bf16), and the scales and
  biases are stored in that dtype;
- a module is quantized when its input dimension divides the group size.

For each case and module the file holds FNV-1a 64 hashes of the bytes of
`<m>.weight` (uint32 words), `<m>.scales` and `<m>.biases` as stored in the
safetensors file, and the list of tensors left dense. tests/test_convert.c
converts the same folders and compares.

Needs numpy only: /usr/bin/python3 tests/reference/make_convert_vectors.py
"""
import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import mlx_quant as mq  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "models")
OUT = os.path.join(ROOT, "tests", "fixtures", "quant", "convert_expect.json")

NP = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "U32": np.uint32}
NAME = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def load_safetensors(path):
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        out[k] = (v["dtype"], np.frombuffer(b[8 + n + s:8 + n + e], dtype=NP[v["dtype"]]).reshape(v["shape"]))
    return out


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for byte in data:
        h ^= byte
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def fnv1a64_np(a):
    # byte-wise FNV over a numpy buffer, vectorised by chunks is not possible
    # (sequential); the tensors are small (<= 32k elements).
    return fnv1a64(np.ascontiguousarray(a).tobytes())


def case(model, bits, group, dtype):
    d = os.path.join(FIXTURES, model)
    cfg = json.load(open(os.path.join(d, "config.json")))
    tensors = load_safetensors(os.path.join(d, "model.safetensors"))
    tied = cfg.get("tie_word_embeddings", False)
    target = dtype or cfg.get("torch_dtype") or cfg.get("dtype")
    modules, dense = {}, []
    for k in sorted(tensors):
        dt, a = tensors[k]
        if tied and k.startswith("lm_head."):
            continue
        w = mq.from_storage(a, NAME[dt])
        if k.endswith(".weight") and a.ndim == 2 and a.shape[-1] % group == 0:
            packed, s, b = mq.quantize(w, group, bits, target, backend="cpu")
            modules[k[:-7]] = {"weight": fnv1a64_np(packed), "scales": fnv1a64_np(s),
                               "biases": fnv1a64_np(b)}
        else:
            dense.append(k)
    return {"model": model, "bits": bits, "group_size": group, "dtype": dtype,
            "scales_dtype": target, "modules": modules, "dense": dense}


def main():
    cases = []
    for bits in (2, 3, 4, 5, 6, 8):
        for group in (32, 64):
            cases.append(case("llama-f32", bits, group, None))
    for bits, group in ((4, 64), (3, 32), (8, 128)):
        cases.append(case("llama-f32", bits, group, "float16"))
        cases.append(case("llama-f32", bits, group, "bfloat16"))
    for model in ("llama-bf16", "llama-f32-tied", "llama-bf16-tied", "mistral-bf16", "llama-f16"):
        cases.append(case(model, 4, 64, None))
        cases.append(case(model, 6, 32, None))
    with open(OUT, "w") as f:
        json.dump({"generator": "tests/reference/make_convert_vectors.py (mlx_quant.py, cpu)",
                   "hash": "fnv1a64 of the stored bytes", "cases": cases}, f, indent=1)
    print("wrote", OUT, len(cases), "cases")


if __name__ == "__main__":
    main()
