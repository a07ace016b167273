/* Internal to the blocked prefill GEMMs (qgemm*.c for MLX-quantized weights,
 * gemm*.c for bf16/f16/f32 weights): the shared types, the per-ISA tile
 * functions and the switch that tests use to run every path.
 *
 * Both GEMMs work the way BLIS does: a tile of MR weight rows x KC columns is
 * unpacked once into a small buffer laid out for the SIMD kernel ("packed":
 * for each k-step, the MR rows side by side, so one vector holds one k-step
 * of MR rows), then every token of the call streams over it. The kernel is an
 * outer product: each accumulator lane is one weight row, each token's
 * activation is broadcast, so no horizontal sums are needed until the end. */
#ifndef LMC_KERNELS_GEMM_INTERNAL_H
#define LMC_KERNELS_GEMM_INTERNAL_H

#include "kernels/quant_internal.h"

/* Columns packed at a time (a multiple of every group size). */
#define GEMM_KC 256

/* ---- quantized weights x int16 activations ----
 * x quantized per token and weight group j (g columns) to int16:
 * x_c ~ d_j * v_c, v in [-32767, 32767], d_j = max|x| / 32767, and
 * gsum_j = d_j * sum_{c in j} v_c. Then for weight row r:
 *   y = sum_j [ s_rj * d_j * dot(q_j, v_j) + b_rj * gsum_j ]
 * with exact int32 group dots (q <= 255 times |v| <= 32767, 64 pairs at
 * most: < 2^31): vpdpwssd, or vpmaddwd + vpaddd. int8 activations (as
 * llama.cpp's Q8) were tried first: 1-3% relative L2 on the fixtures, over
 * the 1e-2 the fast path must meet. */
typedef struct qgemm_x {
    const int16_t *v;  /* [T][ldv] */
    const float *d;    /* [T][ldg] */
    const float *gsum; /* [T][ldg] */
    int64_t ldv, ldg;
} qgemm_x;

/* One token's x (cols, a multiple of g in 32, 64, 128) to v, d and gsum per
 * group of g as above; false when x has a NaN or infinity. Generic C
 * (qgemm.c) and AVX2 (qgemm_avx2.c): the same values (test_gemm). */
bool qgemm_quantize_row_generic(const float *x, int64_t cols, int g, int16_t *v, float *d,
                                float *gsum);
bool qgemm_quantize_row_avx2(const float *x, int64_t cols, int g, int16_t *v, float *d,
                             float *gsum);

/* Rows [r0, r0 + nr) of w (nr <= the ISA's QGEMM_MR_*) times all T tokens:
 * y[t*ldy + i] = row r0+i of the product (written, not accumulated).
 * scratch: qgemm_scratch_bytes(T) bytes, owned by the caller's thread.
 * bits 4 or 8. */
typedef void (*qgemm_tile_fn)(const lmc_qweight *w, int64_t r0, int nr, const qgemm_x *x, int64_t T,
                              float *y, int64_t ldy, void *scratch);
#define QGEMM_MR_GENERIC 4
#define QGEMM_MR_AVX2 16
#define QGEMM_MR_AVX512 32
void qgemm_tile_generic(const lmc_qweight *w, int64_t r0, int nr, const qgemm_x *x, int64_t T,
                        float *y, int64_t ldy, void *scratch);
void qgemm_tile_avx2(const lmc_qweight *w, int64_t r0, int nr, const qgemm_x *x, int64_t T,
                     float *y, int64_t ldy, void *scratch);
void qgemm_tile_avx512(const lmc_qweight *w, int64_t r0, int nr, const qgemm_x *x, int64_t T,
                       float *y, int64_t ldy, void *scratch);
/* Decode (T <= 8), AVX-512: rows [r0, r0+nr) straight from the packed
 * weights (no tile), x permuted for 4 bits (qgemv_avx512.c). Groups 64/128. */
void qgemv_rows_avx512(const lmc_qweight *w, int64_t r0, int nr, const qgemm_x *x, int64_t T,
                       float *y, int64_t ldy, void *scratch);
#define QGEMV_ROWS 8 /* rows per work item */
/* 8 bits only: for 4 bits the two-digit AVX2 matvec of quant_avx2.c measured
 * faster (1B q4 tg32, 1 core: 20 vs 16 t/s; q8: 11.6 vs 13.9). */
static inline bool qgemv_avx512_ok(const lmc_qweight *w) {
    return w->bits == 8 && (w->group_size == 64 || w->group_size == 128);
}
/* Scratch of one tile call: packed int16 weights, scales and biases of one
 * KC chunk and the [T][MR] f32 accumulators (+ alignment slack). */
static inline size_t qgemm_scratch_bytes(int mr, int64_t T) {
    return (size_t)mr * GEMM_KC * 2 + (size_t)mr * (GEMM_KC / 32) * 2 * sizeof(float) +
           (size_t)T * (size_t)mr * sizeof(float) + 256;
}

/* The SIMD level the GEMMs use. */
typedef enum gemm_isa { GEMM_GENERIC = 0, GEMM_AVX2 = 1, GEMM_AVX512 = 2 } gemm_isa;
/* The best the CPU supports and the kernel table allows (generic when
 * lmc_kernels() is the generic table). */
gemm_isa gemm_isa_active(void);
/* Tests: forces a level (-1 = back to automatic). Returns false when the CPU
 * lacks it. Not to be called while a GEMM runs. */
bool gemm_isa_force(int isa);

/* Quantized GEMM of rows [r0, r1) for T tokens, fast (int8 activations):
 * y[t*ldy + r - r0]. false (nothing written) when x holds a non-finite value
 * or memory runs out; the caller then takes the exact path. bits 4 or 8. */
bool qgemm_run(const lmc_qweight *w, int64_t r0, int64_t r1, const float *x, int64_t T, float *y,
               int64_t ldy);
/* The same for n <= 4 weights of equal cols, bits and group size over one x
 * (quantized once): rows [0, r1[i]) of ws[i] into ys[i] (stride ldy[i]). */
bool qgemm_run_multi(const lmc_qweight *const *ws, int n, const int64_t *r1, const float *x,
                     int64_t T, float *const *ys, const int64_t *ldy);
/* The decode matvec the same way (qgemv_rows_avx512); false also when the
 * CPU lacks AVX-512 or the group size is not 64/128: the caller takes its
 * own integer path. */
bool qgemv_run_multi(const lmc_qweight *const *ws, int n, const int64_t *r1, const float *x,
                     int64_t T, float *const *ys, const int64_t *ldy);

/* ---- dense weights (bf16 / f16 / f32) ----
 * Rows [r0, r0 + nr) (nr <= the ISA's GEMM_MR_*) of a dense weight of dtype
 * dt and row length cols at w, times T tokens; y[t*ldy + i] written.
 * f32 kernels: x [T][cols] f32, the tile converted to f32 (FMA).
 * bf16 kernel (AVX-512 BF16, bf16 weights, fast path only): xb [T][cols]
 * holds x rounded to bf16, vdpbf16ps sums pairs into f32. */
#define GEMM_MR_AVX2 16
#define GEMM_MR_AVX512 32
void gemm_tile_f32_avx2(const void *w, lmc_dtype dt, int64_t cols, int64_t r0, int nr,
                        const float *x, int64_t T, float *y, int64_t ldy, void *scratch);
void gemm_tile_f32_avx512(const void *w, lmc_dtype dt, int64_t cols, int64_t r0, int nr,
                          const float *x, int64_t T, float *y, int64_t ldy, void *scratch);
void gemm_tile_bf16_avx512(const uint16_t *w, int64_t cols, int64_t r0, int nr, const uint16_t *xb,
                           int64_t T, float *y, int64_t ldy, void *scratch);
/* Two or three tokens with bf16 weights (AVX-512 BF16, fast path): rows
 * [r0, r0+nr) times T tokens of bf16 x straight from the weights,
 * vdpbf16ps. */
void gemv_bf16_avx512(const uint16_t *w, int64_t cols, int64_t r0, int nr, const uint16_t *xb,
                      int64_t T, float *y, int64_t ldy);
/* Decode with dense weights in AVX2 (exact: f32 x, f32 sums): rows
 * [r0, r0+nr) of w (dtype dt, row length cols) times one token,
 * y[i] for row r0 + i. */
void gemv_dense_avx2(const void *w, lmc_dtype dt, int64_t cols, int64_t r0, int nr, const float *x,
                     float *y);
/* Dense GEMM of rows [r0, r1) of w (2D F32/F16/BF16) for T tokens:
 * y[t*ldy + r - r0]. bf16 weights on AVX-512 take the bf16 kernel unless
 * lmc_get_exact(). false (nothing written) on the generic path or when
 * memory runs out; the caller then takes the dot-product path. */
bool gemm_dense_run(const lmc_tensor *w, int64_t r0, int64_t r1, const float *x, int64_t T,
                    float *y, int64_t ldy);
/* T < 4 tokens (decode): one token takes gemv_dense_avx2 (AVX2 or
 * AVX-512); two or three with bf16 weights on AVX-512 and lmc_get_exact()
 * == 0 take gemv_bf16_avx512; false otherwise (the caller's dot products). */
bool gemv_dense_run(const lmc_tensor *w, int64_t r0, int64_t r1, const float *x, int64_t T,
                    float *y, int64_t ldy);
/* While a dense tile computes on one chunk of its rows [r0, r0 + nr) (es
 * bytes a weight, row length cols), the next chunk's columns come into L2:
 * the packing reads short strided runs of rows, which the hardware
 * prefetcher does not follow. At the last chunk, the first of the next mr
 * rows (the tile this thread most likely takes next). A hint only: the
 * addresses are never read, so none past the weight's end matters. */
static inline void gemm_prefetch_next(const void *w, size_t es, int64_t cols, int64_t r0, int nr,
                                      int mr, int64_t k0, int64_t kc) {
    const uintptr_t base = (uintptr_t)w;
    int64_t c0 = k0 + kc, n = kc;
    if (c0 >= cols) c0 = 0, r0 += mr, nr = mr; /* the next rows' first chunk */
    if (c0 + n > cols) n = cols - c0;
    const size_t bytes = (size_t)n * es;
    for (int i = 0; i < nr; i++) {
        const uintptr_t row = base + ((size_t)(r0 + i) * (size_t)cols + (size_t)c0) * es;
        for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch((const void *)(row + b), 0, 2);
    }
}

/* Scratch of one tile call: the packed f32 tile and the [T][MR] accumulators. */
static inline size_t gemm_scratch_bytes(int mr, int64_t T) {
    return (size_t)mr * GEMM_KC * sizeof(float) + (size_t)T * (size_t)mr * sizeof(float) + 256;
}

#endif
