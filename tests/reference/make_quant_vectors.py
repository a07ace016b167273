#!/usr/bin/env python3
"""Writes tests/fixtures/quant/vectors.bin: MLX affine quantization test vectors
from the numpy reference (mlx_quant.py), read by tests/test_quant.c.

Run with a python that has numpy (Debian: apt-get install python3-numpy,
then /usr/bin/python3 tests/reference/make_quant_vectors.py).

Cases: bits 2,3,4,5,6,8 x group 32,64,128 x scale dtype f16, bf16, for the
"cpu" variant (with the float32 dequantization) and the "gpu" variant (no
dequantization). Each weight is ROWS x COLS float32 whose rows exercise awkward
groups: gaussian, constant, all zero, negative only, positive only, large
range, exact ties, tiny values below eps / subnormal, single outliers, mixed.

File format (little-endian):
  "LMCQVEC1" then uint32 count, then per record:
  uint32 bits, group_size, scale_dtype (lmc_dtype: 0 F32, 1 F16, 2 BF16),
         variant (0 cpu, 1 gpu), rows, cols, has_dequant
  float32 w[rows*cols]
  uint32  packed[rows*cols*bits/32]
  scales[rows*cols/group], biases[rows*cols/group]  (uint16 bits or float32)
  float32 dequant[rows*cols] if has_dequant
"""

import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mlx_quant as mq  # noqa: E402

ROWS, COLS = 10, 256
DTYPES = {"float32": 0, "float16": 1, "bfloat16": 2}


def awkward_matrix(rng, group):
    w = np.zeros((ROWS, COLS), dtype=np.float32)
    ng = COLS // group
    w[0] = rng.standard_normal(COLS) * 0.05                     # typical weights
    w[1] = 0.37                                                 # constant row
    w[2] = 0.0                                                  # all zero
    w[3] = -np.abs(rng.standard_normal(COLS)) - 0.01            # negative only
    w[4] = np.abs(rng.standard_normal(COLS)) * 3 + 0.5          # positive only
    w[5] = rng.uniform(-3000.0, 60000.0, COLS)                  # large range (f16-safe)
    # exact ties: multiples of 1/8 so (w - bias) / scale lands on .5 often
    w[6] = rng.integers(-40, 40, COLS).astype(np.float32) * 0.125
    # tiny values: below eps * n_bins, f16 subnormals
    w[7] = rng.standard_normal(COLS) * 1e-7
    # mixed per group: zero, constant negative, outlier, small normal
    for k in range(ng):
        seg = slice(k * group, (k + 1) * group)
        kind = k % 4
        if kind == 0:
            w[8, seg] = 0.0
        elif kind == 1:
            w[8, seg] = -1.25
        elif kind == 2:
            w[8, seg] = rng.standard_normal(group) * 0.01
            w[8, seg.start + 5] = 7.5
        else:
            w[8, seg] = rng.standard_normal(group) * 1e-3
    # constant positive groups and one negative outlier in otherwise positive
    w[9] = 2.0
    w[9, 3] = -0.5
    if ng > 1:
        w[9, group:2 * group] = rng.uniform(0.1, 0.2, group)
    return w


def scales_bytes(a, dtype):
    if dtype == "float32":
        return np.asarray(a, dtype="<f4").tobytes()
    if dtype == "float16":
        return np.asarray(a, dtype="<f2").view("<u2").tobytes()
    return np.asarray(a, dtype="<u2").tobytes()


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    outdir = os.path.join(root, "fixtures", "quant")
    os.makedirs(outdir, exist_ok=True)
    rng = np.random.default_rng(1234)
    records = []
    for bits in mq.SUPPORTED_BITS:
        for group in mq.SUPPORTED_GROUPS:
            for dtype in ("float16", "bfloat16"):
                w = awkward_matrix(rng, group)
                for variant, vid in (("cpu", 0), ("gpu", 1)):
                    packed, s, b = mq.quantize(w, group, bits, dtype, backend=variant)
                    rec = struct.pack("<7I", bits, group, DTYPES[dtype], vid, ROWS, COLS,
                                      1 if variant == "cpu" else 0)
                    rec += w.astype("<f4").tobytes()
                    rec += packed.astype("<u4").tobytes()
                    rec += scales_bytes(s, dtype) + scales_bytes(b, dtype)
                    if variant == "cpu":
                        d = mq.dequantize(packed, s, b, group, bits, dtype)
                        rec += d.astype("<f4").tobytes()
                        # self-check: unpack(pack(q)) round trip
                        q = mq.unpack(packed, bits, COLS)
                        assert (mq.pack(q, bits) == packed).all()
                        assert q.max() < (1 << bits)
                    records.append(rec)
    path = os.path.join(outdir, "vectors.bin")
    with open(path, "wb") as f:
        f.write(b"LMCQVEC1" + struct.pack("<I", len(records)))
        for r in records:
            f.write(r)
    print("wrote %s: %d records, %d bytes" % (path, len(records), os.path.getsize(path)))


if __name__ == "__main__":
    main()
