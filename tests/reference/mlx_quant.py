"""numpy reference for MLX affine quantization (mx.quantize / mx.dequantize, mode "affine").

Follows ml-explore/mlx (checked against commit 846d176, 2026-08):

- quantize(..., backend="cpu") follows the CPU kernel `quantize<T, U>` in
  mlx/backend/cpu/quantized.cpp (run by `fast::Quantize::eval_cpu`), which
  computes the same thing as the graph fallback `affine_quantize` in
  mlx/ops.cpp: per group of `group_size` consecutive elements of the last axis
    w_min, w_max  = min and max of the group (as float32)
    scale         = max((w_max - w_min) / n_bins, 1e-7), n_bins = 2^bits - 1
    side          = |w_min| > |w_max|;  scale = side ? scale : -scale
    edge          = side ? w_min : w_max
    q0            = rint(edge / scale)            (round half to even)
    if q0 != 0:     scale = edge / q0;  bias = edge   else bias = 0
    q             = clip(rint((w - bias) / scale), 0, n_bins)   (unrounded float32 scale, bias)
    scales, biases stored as T(scale), T(bias), T = dtype of w (f16 / bf16 / f32)
  All arithmetic is float32, as in the C++ (`float` locals).

- quantize(..., backend="gpu") follows the Metal kernel `affine_quantize` in
  mlx/backend/metal/kernels/quantized.h (the CUDA kernel in
  mlx/backend/cuda/quantized/affine_quantize.cu is the same). It differs from
  the CPU kernel in two places: the reduction starts from w_max = 0 (so
  w_max = max(0, max(group))) and w_min = Limits<T>::max, and it rounds with
  Metal/CUDA `round` (half away from zero) instead of rint, with only an upper
  clip. This variant is written from the source only; it has not been checked
  against Apple hardware.

- Packing (both): the q of a row form a little-endian bit stream, element i in
  bits [bits*i, bits*i + bits), stored as uint32 words. For bits 2/4/8 this is
  `out_el |= q << (k * bits)` per uint32; for 3/5/6 bits mlx writes 3/5/3 bytes
  per pack of 8/8/4 elements (`extract_bits` in the CPU file is the inverse),
  which read as little-endian uint32 words is the same bit stream.

- dequantize follows `affine_dequantize` (mlx/ops.cpp fallback and the Metal
  `affine_dequantize`): w = scale * q + bias with scale/bias in the storage dtype.

Storage dtypes in numpy: "float16" -> np.float16 arrays, "float32" ->
np.float32, "bfloat16" -> np.uint16 arrays holding the raw bfloat16 bits
(numpy has no bfloat16).
"""

import numpy as np

SUPPORTED_BITS = (2, 3, 4, 5, 6, 8)
SUPPORTED_GROUPS = (32, 64, 128)


# ---- dtype helpers (mlx/types/fp16.h, mlx/types/bf16.h) ----------------------

def f32_to_bf16_bits(x):
    """_MLX_BFloat16(float): round to nearest even, NaN -> 0x7FC0."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    r = ((u + ((u >> 16) & 1) + 0x7FFF) >> 16).astype(np.uint16)
    r[np.isnan(x)] = 0x7FC0
    return r


def bf16_bits_to_f32(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def to_storage(x, dtype):
    """float32 values -> storage array of `dtype` (as static_cast<T>(float) in mlx)."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "float16":
        return x.astype(np.float16)  # IEEE round to nearest even, as fp16.h
    if dtype == "bfloat16":
        return f32_to_bf16_bits(x)
    if dtype == "float32":
        return x.copy()
    raise ValueError("unsupported dtype %r" % dtype)


def from_storage(s, dtype):
    """storage array -> float32 values."""
    if dtype == "bfloat16":
        return bf16_bits_to_f32(s)
    return np.asarray(s).astype(np.float32)


def round_to_dtype(x, dtype):
    """float32 values rounded to `dtype` and back: what `w.astype(dtype)` holds."""
    return from_storage(to_storage(x, dtype), dtype)


# ---- packing -------------------------------------------------------------------

def pack(q, bits):
    """q: uint [rows, cols] in [0, 2^bits) -> uint32 [rows, cols*bits/32].
    Element i of a row in bits [bits*i, bits*i+bits) of the row's little-endian
    bit stream (quantize<T, U> in mlx/backend/cpu/quantized.cpp)."""
    q = np.asarray(q, dtype=np.uint64)
    rows, cols = q.shape
    assert (cols * bits) % 32 == 0
    # bit b of element i -> stream bit bits*i + b
    bitplanes = ((q[:, :, None] >> np.arange(bits, dtype=np.uint64)) & 1).astype(np.uint8)
    stream = bitplanes.reshape(rows, cols * bits)          # stream bit order, LSB first
    stream = stream.reshape(rows, -1, 32).astype(np.uint64)
    words = (stream << np.arange(32, dtype=np.uint64)).sum(axis=2)
    return words.astype(np.uint32)


def unpack(packed, bits, cols):
    """Inverse of pack: uint32 [rows, cols*bits/32] -> uint32 [rows, cols]."""
    packed = np.asarray(packed, dtype=np.uint32)
    rows = packed.shape[0]
    stream = ((packed[:, :, None].astype(np.uint64) >> np.arange(32, dtype=np.uint64)) & 1)
    stream = stream.reshape(rows, -1)[:, : cols * bits].reshape(rows, cols, bits)
    q = (stream << np.arange(bits, dtype=np.uint64)).sum(axis=2)
    return q.astype(np.uint32)


# ---- quantize / dequantize ---------------------------------------------------------

def _round_half_away(x):
    """Metal / CUDA round(): halfway cases away from zero."""
    x = np.asarray(x, dtype=np.float32)
    t = np.trunc(x)
    tie = np.abs(x - t) == np.float32(0.5)
    return np.where(tie, t + np.sign(x), np.rint(x)).astype(np.float32)


def quantize(w, group_size=64, bits=4, dtype="float16", backend="cpu"):
    """mx.quantize(w.astype(dtype), group_size, bits) -> (packed uint32, scales, biases).

    w: float array [rows, cols]; it is first rounded to `dtype` (the dtype of
    the mlx array being quantized, which is also the dtype of scales/biases).
    """
    if bits not in SUPPORTED_BITS or group_size not in SUPPORTED_GROUPS:
        raise ValueError("unsupported bits/group_size")
    w = np.asarray(w, dtype=np.float32)
    rows, cols = w.shape
    if cols % group_size:
        raise ValueError("cols not divisible by group_size")
    w = round_to_dtype(w, dtype)
    g = w.reshape(rows, cols // group_size, group_size)
    n_bins = np.float32((1 << bits) - 1)
    eps = np.float32(1e-7)
    zero = np.float32(0)

    w_min = g.min(axis=2)
    w_max = g.max(axis=2)
    if backend == "gpu":
        w_max = np.maximum(w_max, zero)   # reduction starts at w_max = 0
    elif backend != "cpu":
        raise ValueError("backend must be 'cpu' or 'gpu'")
    rnd = np.rint if backend == "cpu" else _round_half_away

    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.maximum((w_max - w_min) / n_bins, eps).astype(np.float32)
        side = np.abs(w_min) > np.abs(w_max)
        scale = np.where(side, scale, -scale).astype(np.float32)
        edge = np.where(side, w_min, w_max).astype(np.float32)
        q0 = rnd((edge / scale).astype(np.float32)).astype(np.float32)
        nz = q0 != 0
        scale = np.where(nz, (edge / q0).astype(np.float32), scale).astype(np.float32)
        bias = np.where(nz, edge, zero).astype(np.float32)

        q = rnd(((g - bias[:, :, None]) / scale[:, :, None]).astype(np.float32))
    q = np.minimum(np.maximum(q, zero), n_bins)
    q = q.astype(np.uint32).reshape(rows, cols)
    return pack(q, bits), to_storage(scale, dtype), to_storage(bias, dtype)


def dequantize(packed, scales, biases, group_size=64, bits=4, dtype="float16"):
    """scale * q + bias per group, in float32 from the stored scales/biases
    (float64 accumulation is left to the caller)."""
    s = from_storage(scales, dtype)
    b = from_storage(biases, dtype)
    rows, ngroups = s.shape
    cols = ngroups * group_size
    q = unpack(packed, bits, cols).astype(np.float32).reshape(rows, ngroups, group_size)
    w = q * s[:, :, None] + b[:, :, None]
    return w.reshape(rows, cols).astype(np.float32)
