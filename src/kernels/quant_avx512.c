/* AVX-512 VNNI matvec of MLX 4-bit weights for one quantized token (the
 * integer path, quant_internal.h's quant_qx: x as two int8 digits per column,
 * x ~ d_k * (128 h + l) per block k of 32 columns).
 *
 * 64 packed bytes are 128 columns (4 blocks): their low nibbles are the even
 * columns, their high nibbles the odd ones, and h and l come permuted to
 * match (per 128 columns: the 64 even ones, then the 64 odd ones; quant.c).
 * vpdpbusd (u8 q x s8 digit, 4 products per int32 lane, no saturation) sums
 * each digit; int32 lane i then holds columns of block i / 4, so
 *   128 * H + L  ->  f32, times d of its block (x->dexp), times the scale of
 * its group, accumulated per lane (for groups of 32 and 64, d, the same for
 * the two blocks of a pair, x->dp, is folded into the scales of 16 groups
 * at a time per row: one multiply fewer per 128 weights and row, 0.88x the time
 * per call for groups of 64, L2-resident); the bias terms, b * the group sums of x,
 * as one FMA per 16 groups. The scales and biases of 16 groups at a time
 * stay in registers (a row's scale for each lane comes by a permute of them
 * with a running index): no store and reload per row. The same integers as
 * the AVX2 and generic kernels: only the f32 summation order differs.
 * Needs cols % 128 == 0. Called only when lmc_cpu_has_avx512(). */
#include "kernels/quant_internal.h"

#if defined(__AVX512F__) && defined(__AVX512VNNI__) && defined(__AVX512BW__)
#include "kernels/scales_avx512.h"

#define PREFETCH_ROWS 8 /* rows ahead for the scales and biases */
#define ROWS 4          /* rows at a time: each load of x serves all of them */

/* Rows r0 + i * stride, i < nr, into y[i * stride]. */
static inline __attribute__((always_inline)) void rows_q4(const lmc_qweight *w, int64_t r0,
                                                          int64_t stride, const int nr,
                                                          const bool fold, const quant_qx *x,
                                                          float *y) {
    const int g = w->group_size;
    const int64_t ng = quant_groups(w), row_bytes = quant_row_words(w) * 4;
    const size_t ss = quant_scale_size(w->scale_dtype);
    const int gpc = 128 / g; /* groups per 128 columns: 4, 2 or 1 */
    /* lane i of a chunk's accumulators -> its group within the chunk */
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i sidx = g == 32   ? _mm512_srli_epi32(lane, 2)
                         : g == 64 ? _mm512_srli_epi32(lane, 3)
                                   : _mm512_setzero_si512();
    const __m512i step = _mm512_set1_epi32(gpc);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const uint8_t *rp[ROWS];
    __m512 acc[ROWS];
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++) {
        rp[i] = (const uint8_t *)w->packed + (r0 + i * stride) * row_bytes;
        acc[i] = _mm512_setzero_ps();
    }
    /* the scales and biases of the rows a few calls ahead */
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++)
        if (r0 + i * stride + PREFETCH_ROWS < w->rows) {
            size_t off = (size_t)((r0 + i * stride + PREFETCH_ROWS) * ng) * ss;
            for (size_t b = 0; b < (size_t)ng * ss; b += 64) {
                _mm_prefetch((const char *)w->scales + off + b, _MM_HINT_T0);
                _mm_prefetch((const char *)w->biases + off + b, _MM_HINT_T0);
            }
        }
    const int8_t *xh = x->h, *xl = x->l;
    const float *dexp = x->dexp;
    for (int64_t j0 = 0; j0 < ng; j0 += 16) {
        const int n = (int)(ng - j0 < 16 ? ng - j0 : 16);
        const __m512 gs = _mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), x->gsum + j0);
        /* fold: a group's x scale, the d of its pair of blocks (x->dp),
         * comes with the group's scale (groups of 64: one pair; of 32: half
         * of one), so the lanes need no multiply by dexp */
        __m512 dg = _mm512_setzero_ps();
        if (fold)
            dg = g == 64 ? _mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), x->dp + j0)
                         : _mm512_permutexvar_ps(
                               _mm512_srli_epi32(lane, 1),
                               _mm512_maskz_loadu_ps((__mmask16)((1u << ((n + 1) / 2)) - 1),
                                                     x->dp + j0 / 2));
        __m512 sc[ROWS];
#pragma GCC unroll 4
        for (int i = 0; i < nr; i++) {
            const int64_t off = (r0 + i * stride) * ng + j0;
            sc[i] = scales16(w->scales, w->scale_dtype, off, n);
            if (fold) sc[i] = _mm512_mul_ps(sc[i], dg);
            /* biases times the quantized group sums */
            acc[i] = _mm512_fmadd_ps(scales16(w->biases, w->scale_dtype, off, n), gs, acc[i]);
        }
        const int64_t c0 = j0 * g, nch = (int64_t)n * g / 128;
        __m512i idx = sidx;
        for (int64_t c = 0; c < nch; c++) {
            const __m512i h0 = _mm512_loadu_si512(xh), h1 = _mm512_loadu_si512(xh + 64);
            const __m512i l0 = _mm512_loadu_si512(xl), l1 = _mm512_loadu_si512(xl + 64);
            const __m512 de = fold ? _mm512_setzero_ps() : _mm512_loadu_ps(dexp);
            const int64_t off = c0 / 2 + c * 64;
#pragma GCC unroll 4
            for (int i = 0; i < nr; i++) {
                /* an integer sum: past the weight's end it is a hint only, never read */
                _mm_prefetch((const char *)((uintptr_t)(rp[i] + off) + QUANT_DECODE_PREFETCH),
                             _MM_HINT_T0);
                __m512i v = _mm512_loadu_si512(rp[i] + off);
                __m512i lo = _mm512_and_si512(v, m4);
                __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
                __m512i h = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, h0);
                __m512i l = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, l0);
                h = _mm512_dpbusd_epi32(h, hi, h1);
                l = _mm512_dpbusd_epi32(l, hi, l1);
                /* 128 h + l, exact: |.| <= 8 * 15 * 16320 per lane */
                __m512i s = _mm512_add_epi32(_mm512_slli_epi32(h, 7), l);
                __m512 t = _mm512_cvtepi32_ps(s);
                if (!fold) t = _mm512_mul_ps(t, de);
                acc[i] = _mm512_fmadd_ps(t, _mm512_permutexvar_ps(idx, sc[i]), acc[i]);
            }
            idx = _mm512_add_epi32(idx, step);
            xh += 128, xl += 128, dexp += 16;
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++) y[i * stride] = _mm512_reduce_add_ps(acc[i]);
}

/* The ROWS rows of a step are a quarter of the range apart: each is a
 * sequential stream of its own (adjacent rows of 1 KB, four in a page,
 * defeated the hardware prefetcher: 0.6x the one-row kernel from DRAM). */
static inline __attribute__((always_inline)) void rows_range(const lmc_qweight *w, int64_t r0,
                                                             int64_t r1, const bool fold,
                                                             const quant_qx *x, float *y) {
    const int64_t q = (r1 - r0) / ROWS;
    for (int64_t k = 0; k < q; k++) rows_q4(w, r0 + k, q, ROWS, fold, x, y + k);
    for (int64_t r = r0 + q * ROWS; r < r1; r++) rows_q4(w, r, 1, 1, fold, x, y + (r - r0));
}

void quant_matvec_q4_avx512(const lmc_qweight *w, int64_t r0, int64_t r1, const quant_qx *x,
                            float *y) {
    /* fold is a constant in each copy */
    if (w->group_size <= 64)
        rows_range(w, r0, r1, true, x, y);
    else
        rows_range(w, r0, r1, false, x, y);
}

#else
void quant_matvec_q4_avx512(const lmc_qweight *w, int64_t r0, int64_t r1, const quant_qx *x,
                            float *y) {
    (void)w, (void)r0, (void)r1, (void)x, (void)y;
}
#endif
