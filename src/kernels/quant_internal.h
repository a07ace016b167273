/* Internal to the quantization kernels (quant.c, quant_avx2.c,
 * quant_quantize.c): exact mlx dtype conversions and the SIMD entry points. */
#ifndef LMC_KERNELS_QUANT_INTERNAL_H
#define LMC_KERNELS_QUANT_INTERNAL_H

#include "kernels/quant.h"

#include <math.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the MLX packed layout is read as little-endian bytes"
#endif

/* Columns of a row decoded at a time by the T > 1 (dequantize-then-dense)
 * path; a multiple of every group size. */
#define QUANT_CHUNK_COLS 512
/* Rows decoded together by the T > 1 path. */
#define QUANT_TILE_ROWS 4
/* Bytes ahead that the decode kernels prefetch each of their row streams
 * (4-bit AVX2 and AVX-512, 8-bit and bf16 AVX-512; past a row's end: the
 * same stream's next row, which the next call reads). On Zen 5 the hardware
 * alone kept 16-17 GB/s from DRAM on one core; 2 KB ahead gives 28-33
 * (bench_qmatvec, cold; 512 B: 20-22, 4 KB: 24-32); for bf16, 1 KB measured
 * the same and 3-4 KB 2-7% slower. On the Zen 4 machine before it,
 * prefetching a plain read of such streams measured slower: bench/RESULTS.md,
 * 2026-12-04, has both; re-measure on a new kind. */
#define QUANT_DECODE_PREFETCH 2048

/* Element g of a scales/biases array of dtype dt, as float. */
static inline float quant_load_scale(const void *p, lmc_dtype dt, int64_t g) {
    switch (dt) {
    case LMC_DTYPE_F16:
        return lmc_f16_to_f32(((const uint16_t *)p)[g]);
    case LMC_DTYPE_BF16:
        return lmc_bf16_to_f32(((const uint16_t *)p)[g]);
    default:
        return ((const float *)p)[g];
    }
}

static inline size_t quant_scale_size(lmc_dtype dt) {
    return dt == LMC_DTYPE_F32 ? 4 : 2;
}

/* Words of packed data per row. */
static inline int64_t quant_row_words(const lmc_qweight *w) {
    return w->cols * w->bits / 32;
}
static inline int64_t quant_groups(const lmc_qweight *w) {
    return w->cols / w->group_size;
}

/* ---- generic C kernels (quant_generic.c) ---- */

/* q of columns [c0, c0 + n) of a packed row; c0 and n multiples of 32. */
void quant_unpack_range(const uint32_t *row, int bits, int64_t c0, int64_t n, uint8_t *q);
/* Columns [c0, c0 + nc) of `row`, dequantized (scale*q + bias, no FMA). */
void quant_dequant_range(const lmc_qweight *w, int64_t row, int64_t c0, int64_t nc, float *out);
/* Matvec over rows [r0, r1) in natural column order; gsum: group sums of x. */
void quant_matvec_generic(const lmc_qweight *w, int64_t r0, int64_t r1, const float *x,
                          const float *gsum, float *y);
/* y[t*ldy + i] += dot(buf[i*nc ...], x[t*ldx + ...]) for i < nr, t < T. */
void quant_dense_tile_generic(const float *buf, int nr, int64_t nc, const float *x, int64_t ldx,
                              int64_t T, float *y, int64_t ldy);

/* ---- AVX2 kernels (quant_avx2.c); quant.c calls them only when the AVX2
 * kernel table is selected and the CPU has AVX2, FMA and F16C ---- */

/* Matvec (one token) over rows [r0, r1): y[r - r0]. x is permuted as
 * quant.c's x_permutation(bits) says (xp), gsum holds the per-group sums of x. */
void quant_matvec_avx2(const lmc_qweight *w, int64_t r0, int64_t r1, const float *xp,
                       const float *gsum, float *y);
/* Dequantizes rows [r0, r0+nr) x columns [c0, c0+nc) into buf[i*nc + c]
 * (scale*q + bias, no FMA). c0 and nc are multiples of group_size. */
void quant_dequant_tile_avx2(const lmc_qweight *w, int64_t r0, int nr, int64_t c0, int64_t nc,
                             float *buf);
/* y[t*ldy + i] += dot(buf[i*nc ...], x[t*ldx + ...]) for i < nr (nr <= 4), t < T. */
void quant_dense_tile_avx2(const float *buf, int nr, int64_t nc, const float *x, int64_t ldx,
                           int64_t T, float *y, int64_t ldy);

/* ---- integer activations (the fast path; lmc_get_exact() == 0) ----
 * One token's x quantized per block of QUANT_QBLOCK columns to 15-bit
 * integers held as two int8 digits: x_c ~ d_k * (128 * h_c + l_c), h in
 * [-127, 127], l in [-64, 64], so that vpmaddubsw (u8 x s8) and vpdpbusd
 * serve both digits and the two sums combine by a shift (every integer up
 * to QUANT_QMAX is a pair of digits: no value is moved).
 *  The blocks
 * 2p and 2p + 1 share one scale, d_2p = d_2p+1 = max|x| / QUANT_QMAX over
 * their 64 columns (a last, unpaired block: over its own 32), so that a
 * kernel can fold d into the scale of a group of 64 (the AVX2 4-bit one).
 * Offered for bits 4 and 8 (quant_fast_bits). */
#define QUANT_QBLOCK 32
#define QUANT_QMAX 16320 /* 127 * 128 + 64 */
#define QUANT_QRADIX 128
typedef struct quant_qx {
    const int8_t *h, *l; /* [cols] each; for the AVX2 4-bit kernel permuted (quantize_token) */
    const float *d;      /* [cols/32] */
    const float *dexp;   /* [cols/64][8]: d of block 2p in lanes 0-3, of 2p+1 in 4-7 */
    const float *dp;     /* [cols/64]: d of the pair of blocks 2p, 2p + 1 */
    const float *gsum;   /* [groups]: sum_k d_k * sum_c v_c, the quantized sums of x */
    const float *corr;   /* [groups]: 128 * gsum (the AVX2 8-bit kernel's offset term) */
} quant_qx;

/* max |x[i]| over n floats, or -1 when one is NaN or infinite: the block
 * scale of the activation quantizers' generic C (quant_generic.c, qgemm.c;
 * avx2_inline.h has the AVX2 one). */
static inline float quant_absmax(const float *x, int n) {
    float amax = 0.0f;
    bool finite = true;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        finite &= a <= 3.4028234663852886e38f; /* false for NaN and inf */
        amax = a > amax ? a : amax;
    }
    return finite ? amax : -1.0f;
}

/* Where block k (of nb in a token) of h and l goes: its 16 even columns at
 * *even and its 16 odd ones at *odd, or (span 0) all 32 in order at *even
 * (*odd = -1). span > 0: the 4-bit SIMD kernels' order (quant.c,
 * quantize_token): per span blocks, the even columns of each, then the odd
 * ones; the blocks of a last, incomplete span their evens then odds each. */
static inline void quant_qblock_place(int64_t k, int64_t nb, int span, int64_t *even,
                                      int64_t *odd) {
    if (!span) {
        *even = k * QUANT_QBLOCK, *odd = -1;
    } else if ((k / span + 1) * span <= nb) {
        *even = k / span * span * QUANT_QBLOCK + k % span * 16, *odd = *even + span * 16;
    } else {
        *even = k * QUANT_QBLOCK, *odd = *even + 16;
    }
}

/* The columns whose max|x| gives block j's d, of blocks [0, n) at x that
 * begin at an even block of the token and end at an even block or the
 * token's end: its pair's 64 from *start, or its own 32 when it is the last
 * block and unpaired. */
static inline int quant_qblock_span(const float *x, int64_t j, int64_t n, const float **start) {
    const int64_t p = j & ~(int64_t)1;
    *start = x + p * QUANT_QBLOCK;
    return p + 1 < n ? 2 * QUANT_QBLOCK : QUANT_QBLOCK;
}

/* Quantizes blocks [k0, k0 + n) of a token of nb blocks (x: block k0's
 * first column; k0 even, and n even unless the blocks end the token) to
 * their digits h and l (placed as
 * quant_qblock_place says), d[k - k0] = max|x| / QUANT_QMAX over the pair
 * of k (quant_qblock_span) and sums[k - k0], the sum of the block's
 * integer values v = 128 h + l. false when a value is NaN or infinite (what
 * was written is then garbage). Generic C (quant_generic.c) and AVX2
 * (quant_avx2.c): the same bytes and floats (test_quant checks). */
bool quant_qblocks_generic(const float *x, int64_t k0, int64_t n, int64_t nb, int span, int8_t *h,
                           int8_t *l, float *d, int32_t *sums);
bool quant_qblocks_avx2(const float *x, int64_t k0, int64_t n, int64_t nb, int span, int8_t *h,
                        int8_t *l, float *d, int32_t *sums);

/* Tokens up to which lmc_qmatmul_rows takes the integer path. It runs one
 * row x one token at a time; beyond ~10 tokens the T > 1 f32 path
 * (dequantize a tile once, register-blocked FMAs over 4 rows x 2 tokens) is
 * faster, and prefill takes it. */
#define QUANT_FAST_MAX_T 8

static inline bool quant_fast_bits(int bits) {
    return bits == 4 || bits == 8;
}

/* Integer matvec over rows [r0, r1) for one quantized token: y[r - r0]. */
/* Integer matvec, generic C (quant_generic.c), natural column order. */
void quant_matvec_q8_generic(const lmc_qweight *w, int64_t r0, int64_t r1, const quant_qx *x,
                             float *y);
void quant_matvec_q8_avx2(const lmc_qweight *w, int64_t r0, int64_t r1, const quant_qx *x,
                          float *y);
/* 4 bits, cols % 64 == 0, AVX2, one token: four rows at a time, a quarter
 * of the range apart (quant_avx2.c); h and l as for quant_matvec_q8_avx2. */
void quant_matvec_q4_rows_avx2(const lmc_qweight *w, int64_t r0, int64_t r1, const quant_qx *x,
                               float *y);
/* 8 bits, AVX2, one token: the same four rows a quarter apart. */
void quant_matvec_q8_rows_avx2(const lmc_qweight *w, int64_t r0, int64_t r1, const quant_qx *x,
                               float *y);
/* The same two with AVX-VNNI (quant_avxvnni.c; lmc_cpu_has_avxvnni()). */
void quant_matvec_q4_rows_avxvnni(const lmc_qweight *w, int64_t r0, int64_t r1, const quant_qx *x,
                                  float *y);
void quant_matvec_q8_rows_avxvnni(const lmc_qweight *w, int64_t r0, int64_t r1, const quant_qx *x,
                                  float *y);
/* 4 bits, cols % 128 == 0, AVX-512 VNNI (quant_avx512.c): h and l permuted
 * per 128 columns (quantize_token's span of 4 blocks). */
void quant_matvec_q4_avx512(const lmc_qweight *w, int64_t r0, int64_t r1, const quant_qx *x,
                            float *y);

/* The T = 1 AVX2 kernels read x permuted within each block of
 * QUANT_PERM_BLOCK columns (quant.c's x_permutation says how). */
#define QUANT_PERM_BLOCK 16

#endif
