/* MLX affine quantization: quantized matmul / matvec, dequantization and the
 * quantizer that mlx-lm `convert -q` runs (mx.quantize, mode "affine").
 *
 * Layout (mlx/ops.cpp affine_quantize, mlx/backend/cpu/quantized.cpp):
 * a weight [rows, cols] is stored as
 *   packed  uint32 [rows, cols*bits/32]: the q values of a row form a
 *           little-endian bit stream, element i in bits [bits*i, bits*i+bits)
 *           (for 3, 5 and 6 bits values straddle uint32 words);
 *   scales, biases [rows, cols/group_size] in F16, BF16 or F32;
 * and dequantizes per group of group_size consecutive columns as
 *   w = scale * q + bias,  q in [0, 2^bits - 1].
 */
#ifndef LMC_KERNELS_QUANT_H
#define LMC_KERNELS_QUANT_H

#include "tensor/tensor.h"

typedef struct lmc_qweight {
    const uint32_t *packed;      /* [rows, cols*bits/32] */
    const void *scales, *biases; /* [rows, cols/group_size], dtype scale_dtype */
    lmc_dtype scale_dtype;       /* F16, BF16 or F32 */
    int bits;                    /* 2, 3, 4, 5, 6, 8 */
    int group_size;              /* 32, 64, 128 */
    int64_t rows, cols;          /* the logical (dequantized) shape [out, in] */
} lmc_qweight;

/* Checks bits (2,3,4,5,6,8), group_size (32,64,128), scale dtype, shape
 * (rows > 0, cols > 0, cols % group_size == 0) and non-NULL pointers.
 * LMC_ERR_UNSUPPORTED for bits/group/dtype, LMC_ERR_SHAPE for shapes,
 * LMC_ERR_INVALID_ARG for NULL pointers; the message starts with `name`
 * (may be NULL). */
lmc_status lmc_qweight_check(const lmc_qweight *w, const char *name);

/* Builds a view of a quantized module from its three tensors as an MLX file
 * stores them: weight U32 [..., out, in*bits/32], scales and biases
 * [..., out, in/group_size] (same float dtype). Leading dimensions are folded
 * into rows (stacked MoE experts [E, out, in] give rows = E*out; take one
 * expert with lmc_qweight_rows). The logical cols are derived from the packed
 * width and checked against the scales' width; errors as lmc_qweight_check,
 * plus LMC_ERR_SHAPE / LMC_ERR_FORMAT when the tensors disagree. `name`
 * (may be NULL) prefixes messages. */
lmc_status lmc_qweight_from_tensors(const lmc_tensor *weight, const lmc_tensor *scales,
                                    const lmc_tensor *biases, int bits, int group_size,
                                    const char *name, lmc_qweight *out);

/* A view of rows [r0, r0 + n) of w (e.g. expert e of a stacked [E, out, in]
 * weight: r0 = e*out, n = out). No checks beyond what the caller guarantees. */
lmc_qweight lmc_qweight_rows(const lmc_qweight *w, int64_t r0, int64_t n);

/* Bytes of packed data, scales and biases together (what a matvec reads). */
uint64_t lmc_qweight_nbytes(const lmc_qweight *w);

/* y[t*rows + r] = sum_c x[t*cols + c] * (scale*q + bias) for t < T and all
 * rows. f32 accumulation. x and y must not overlap. w must have passed
 * lmc_qweight_check. Multithreaded over rows with lmc_parallel_for, so not to
 * be called from inside a parallel_for body. T == 1 uses the per-group
 * identity s*dot(q, x) + b*sum(x); T > 1 dequantizes 4 rows x 512 columns at
 * a time into a buffer reused by every token. */
void lmc_qmatmul(const lmc_qweight *w, const float *x, int64_t T, float *y);

/* Rows [r0, r1) only: y[t*ldy + (r - r0)] for t < T (ldy >= r1 - r0). For
 * MoE experts, vocabulary shards of a tied head, or writing into a wider
 * buffer. 0 <= r0 <= r1 <= rows. */
void lmc_qmatmul_rows(const lmc_qweight *w, int64_t r0, int64_t r1, const float *x, int64_t T,
                      float *y, int64_t ldy);

/* ys[i] = x times ws[i] for i < n (n <= 4) as n lmc_qmatmul calls would,
 * for weights that read the same x (q/k/v, gate/up): on the fast path x is
 * quantized once and one parallel loop runs over all their rows. Weights of
 * different cols, bits or group sizes are run one by one. */
void lmc_qmatmul_multi(const lmc_qweight *const *ws, int n, const float *x, int64_t T,
                       float *const *ys);

/* out[c] = scale*q + bias for one row (out has cols floats); the product and
 * the sum are each rounded to f32 (no FMA), the same values as
 * `scales * q + biases` in float32 numpy / mlx. For embedding lookups. */
void lmc_qdequant_row(const lmc_qweight *w, int64_t row, float *out);

/* The unpacked q values of one row (cols bytes, each in [0, 2^bits)). */
void lmc_qunpack_row(const lmc_qweight *w, int64_t row, uint8_t *q);

/* The quantized kernels follow the active kernel table (kernels.h): AVX2
 * unless lmc_kernels() is the generic table (LMC_NO_SIMD=1, or
 * lmc_kernels_use(lmc_kernels_generic())). This sets the table: true = the
 * AVX2 one when the CPU has it, false = generic. Returns whether AVX2 is now
 * used. For tests and benchmarks; not to be called while a matmul runs. */
bool lmc_quant_use_simd(bool enable);

/* Which mlx kernel lmc_quantize_affine_ex reproduces. */
typedef enum lmc_quant_variant {
    /* mlx/backend/cpu/quantized.cpp quantize<T, U> (= the mlx/ops.cpp
     * fallback): min/max of the group, rint. What mlx on a CPU writes. */
    LMC_QUANT_MLX_CPU = 0,
    /* mlx/backend/metal/kernels/quantized.h affine_quantize (and the CUDA
     * kernel): w_max starts at 0 (max(0, max w)), round half away from zero.
     * Written from the source; not verified against Apple hardware. */
    LMC_QUANT_MLX_GPU = 1,
} lmc_quant_variant;

/* Quantizes w [rows, cols] (row-major f32) exactly as
 * mx.quantize(mx.array(w).astype(scale_dtype), group_size, bits) on the mlx
 * CPU backend: w is first rounded to scale_dtype (a no-op for values already
 * in it), then per group (mlx/backend/cpu/quantized.cpp quantize<T, U>)
 *   scale = max((max - min) / (2^bits - 1), 1e-7), negated unless
 *   |min| > |max|; edge = |min| > |max| ? min : max; q0 = rint(edge / scale);
 *   if q0 != 0 { scale = edge / q0; bias = edge } else bias = 0;
 *   q = clamp(rint((w - bias) / scale), 0, 2^bits - 1)
 * with the unrounded f32 scale/bias, which are then rounded to scale_dtype.
 * Outputs: packed [rows, cols*bits/32] uint32, scales and biases
 * [rows, cols/group_size] of scale_dtype (F16, BF16 or F32).
 * LMC_ERR_UNSUPPORTED for bits/group/dtype, LMC_ERR_SHAPE when cols is not a
 * multiple of group_size, LMC_ERR_INVALID_ARG for NULL pointers. */
lmc_status lmc_quantize_affine(const float *w, int64_t rows, int64_t cols, int bits, int group_size,
                               lmc_dtype scale_dtype, uint32_t *packed, void *scales, void *biases);
lmc_status lmc_quantize_affine_ex(const float *w, int64_t rows, int64_t cols, int bits,
                                  int group_size, lmc_dtype scale_dtype, lmc_quant_variant variant,
                                  uint32_t *packed, void *scales, void *biases);

#endif
