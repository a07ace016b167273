/* Attention's inner loops in AVX-512 (head_dim a multiple of 16; others go
 * to the generic C). Scores: 16 / G keys against G <= 4 queries of the group
 * in 16 accumulators, summed across lanes together by a 4-step transpose
 * (reduce16), so no horizontal sum per key, and each key row loaded (and
 * widened from f16) once for the G queries: at 2048 positions, 2 threads,
 * 18% less time per layer from an f16 cache than 16 keys x 1 query
 * (bench_attention, hot 82-84 -> 68-74 us, cold 110-113 -> 88-95; the f32
 * cache is bound by memory either way). Values: up to 4 queries x 64
 * columns of the output in 16 registers over all keys. exp: Cephes' expf
 * polynomial after range reduction by ln 2, scaled by 2^n with vscalefps
 * (within 2 ulp). Called only when lmc_cpu_has_avx512(). */
#include "kernels/kernels.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__)
#include <immintrin.h>

/* Sums of the 16 vectors v[0..15], in order, as one vector. */
static inline __m512 reduce16(const __m512 *v) {
    __m512 u[8], w[4], x[2];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++)
        u[k] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * k], v[2 * k + 1]),
                             _mm512_unpackhi_ps(v[2 * k], v[2 * k + 1]));
/* per 128-bit lane: [v0 02, v1 02, v0 13, v1 13] */
#pragma GCC unroll 8
    for (int k = 0; k < 4; k++) {
        __m512d a = _mm512_castps_pd(u[2 * k]), b = _mm512_castps_pd(u[2 * k + 1]);
        w[k] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
/* w[k], per lane: the lane's sums of v[4k .. 4k+3] */
#pragma GCC unroll 8
    for (int k = 0; k < 2; k++)
        x[k] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * k], w[2 * k + 1], 0x88),
                             _mm512_shuffle_f32x4(w[2 * k], w[2 * k + 1], 0xDD));
    return _mm512_add_ps(_mm512_shuffle_f32x4(x[0], x[1], 0x88),
                         _mm512_shuffle_f32x4(x[0], x[1], 0xDD));
}

/* 16 floats of a row from element i on: f32, or f16 widened */
static inline __attribute__((always_inline)) __m512 ld16(const void *p, int64_t i, const int f16) {
    if (f16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i)));
    return _mm512_loadu_ps((const float *)p + i);
}

/* Scores of KB = 16 / G keys from row i on against G <= 4 queries (qg, hd
 * apart): one accumulator per pair in 16 registers, so each 16 columns of a
 * key are loaded (and, from f16, widened) once for all G queries; one
 * reduce16 gives all G * KB sums, accumulator g * KB + k -> lane g * KB + k. */
static inline __attribute__((always_inline)) void scores_tile(const float *qg, int64_t hd,
                                                              const void *keys, int64_t i, float *s,
                                                              int64_t lds, const int G,
                                                              const int f16) {
    const int KB = 16 / G;
    __m512 acc[16], kv[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) acc[j] = _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int64_t d = 0; d < hd; d += 16) {
#pragma GCC unroll 16
        for (int k = 0; k < KB; k++) kv[k] = ld16(keys, (i + k) * hd + d, f16);
#pragma GCC unroll 4
        for (int g = 0; g < G; g++) {
            __m512 qv = _mm512_loadu_ps(qg + g * hd + d);
#pragma GCC unroll 16
            for (int k = 0; k < KB; k++)
                acc[g * KB + k] = _mm512_fmadd_ps(kv[k], qv, acc[g * KB + k]);
        }
    }
    __m512 r = reduce16(acc);
    if (G == 1) {
        _mm512_storeu_ps(s + i, r);
        return;
    }
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#pragma GCC unroll 4
    for (int g = 0; g < G; g++)
        _mm512_mask_storeu_ps(
            s + g * lds + i, (__mmask16)((1u << KB) - 1),
            _mm512_permutexvar_ps(_mm512_add_epi32(lane, _mm512_set1_epi32(g * KB)), r));
}

static inline __attribute__((always_inline)) void scores_impl(const float *q, int64_t group,
                                                              int64_t hd, const void *keys,
                                                              int64_t m, float *s, int64_t lds,
                                                              const int f16) {
    const int64_t row = hd * (f16 ? 2 : 4);
    for (int64_t g0 = 0; g0 < group; g0 += 4) {
        const int G = group - g0 < 4 ? (int)(group - g0) : 4, KB = 16 / G;
        const float *qg = q + g0 * hd;
        float *sg = s + g0 * lds;
        int64_t i = 0;
        for (; i + KB <= m; i += KB) {
            /* the next rows, LMC_ATTN_PREFETCH bytes on, a line at a time */
            lmc_prefetch_lines(keys, i * row + LMC_ATTN_PREFETCH, KB * row, m * row);
            switch (G) {
            case 1:
                scores_tile(qg, hd, keys, i, sg, lds, 1, f16);
                break;
            case 2:
                scores_tile(qg, hd, keys, i, sg, lds, 2, f16);
                break;
            case 3:
                scores_tile(qg, hd, keys, i, sg, lds, 3, f16);
                break;
            default:
                scores_tile(qg, hd, keys, i, sg, lds, 4, f16);
                break;
            }
        }
        for (; i < m; i++)
            for (int g = 0; g < G; g++) {
                __m512 acc = _mm512_setzero_ps();
                for (int64_t d = 0; d < hd; d += 16)
                    acc = _mm512_fmadd_ps(ld16(keys, i * hd + d, f16),
                                          _mm512_loadu_ps(qg + g * hd + d), acc);
                sg[g * lds + i] = _mm512_reduce_add_ps(acc);
            }
    }
}

/* The common head sizes are constants in their copies: the rows' offsets
 * become immediates instead of 16 row pointers spilled to the stack (hot
 * decode attention 1.2-1.3x). */
static void scores(const float *q, int64_t group, int64_t hd, const float *keys, int64_t m,
                   float *s, int64_t lds) {
    if (hd == 64)
        scores_impl(q, group, 64, keys, m, s, lds, 0);
    else if (hd == 128)
        scores_impl(q, group, 128, keys, m, s, lds, 0);
    else if (hd % 16)
        lmc_attn_kernels_generic()->scores(q, group, hd, keys, m, s, lds);
    else
        scores_impl(q, group, hd, keys, m, s, lds, 0);
}

static void scores_f16(const float *q, int64_t group, int64_t hd, const uint16_t *keys, int64_t m,
                       float *s, int64_t lds) {
    if (hd == 64)
        scores_impl(q, group, 64, keys, m, s, lds, 1);
    else if (hd == 128)
        scores_impl(q, group, 128, keys, m, s, lds, 1);
    else if (hd % 16)
        lmc_attn_kernels_generic()->scores_f16(q, group, hd, keys, m, s, lds);
    else
        scores_impl(q, group, hd, keys, m, s, lds, 1);
}

static inline __m512 exp16(__m512 x) {
    /* min and max return their second operand when one is NaN: NaN stays */
    x = _mm512_max_ps(_mm512_set1_ps(-88.3762626647949f),
                      _mm512_min_ps(_mm512_set1_ps(88.3762626647949f), x));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500E-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

static float exp_sum(float *x, int64_t n) {
    __m512 mx = _mm512_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(x + i));
    __mmask16 tail = (__mmask16)((1u << (n - i)) - 1);
    mx = _mm512_mask_max_ps(mx, tail, mx, _mm512_maskz_loadu_ps(tail, x + i));
    __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mx)), sum = _mm512_setzero_ps();
    for (i = 0; i + 16 <= n; i += 16) {
        __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
        _mm512_storeu_ps(x + i, e);
        sum = _mm512_add_ps(sum, e);
    }
    if (tail) {
        __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + i), m));
        _mm512_mask_storeu_ps(x + i, tail, e);
        sum = _mm512_mask_add_ps(sum, tail, sum, e);
    }
    return _mm512_reduce_add_ps(sum);
}

/* o[g][0 .. 16 * DN) += sum_i p[g][i] v[i][0 .. 16 * DN) for g < G, in
 * registers; G, DN and f16 are constants at each call. pf_end > 0: the
 * rows' bytes from vals to the end of the run, whole rows prefetched
 * LMC_ATTN_PREFETCH bytes on (the first tile of a block of rows). */
static inline __attribute__((always_inline)) void
values_tile(const float *p, int64_t lds, const void *vals, int64_t d0, int64_t m, int64_t hd,
            float *o, int64_t pf_end, const int G, const int DN, const int f16) {
    __m512 acc[4][4], v[4];
#pragma GCC unroll 4
    for (int g = 0; g < G; g++)
#pragma GCC unroll 4
        for (int d = 0; d < DN; d++) acc[g][d] = _mm512_loadu_ps(o + g * hd + 16 * d);
    const int64_t es = f16 ? 2 : 4;
    for (int64_t i = 0; i < m; i++) {
        if (pf_end) lmc_prefetch_lines(vals, i * hd * es + LMC_ATTN_PREFETCH, hd * es, pf_end);
#pragma GCC unroll 4
        for (int d = 0; d < DN; d++) v[d] = ld16(vals, i * hd + d0 + 16 * d, f16);
#pragma GCC unroll 4
        for (int g = 0; g < G; g++) {
            __m512 a = _mm512_set1_ps(p[g * lds + i]);
#pragma GCC unroll 4
            for (int d = 0; d < DN; d++) acc[g][d] = _mm512_fmadd_ps(a, v[d], acc[g][d]);
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < G; g++)
#pragma GCC unroll 4
        for (int d = 0; d < DN; d++) _mm512_storeu_ps(o + g * hd + 16 * d, acc[g][d]);
}

#define TILE(G, DN)                                                                                \
    case (G)*8 + (DN):                                                                             \
        values_tile(pp, lds, vb, d0, mb, hd, oo, pf, G, DN, f16);                                  \
        break;

/* By blocks of rows that stay in L1 (lmc_attn_value_rows), every tile over
 * each block, as attn_avx2.c: the values are read once, row after row
 * (head_dim 128, 2 threads, 2048 positions, cold: 320-346 -> 297-301 us per
 * layer from f32, 232-263 -> 176-194 from f16). A tile is 4 queries x 64
 * columns. */
static inline __attribute__((always_inline)) void values_impl(const float *p, int64_t lds,
                                                              int64_t group, const void *vals,
                                                              int64_t m, int64_t hd, float *o,
                                                              const int f16) {
    const int64_t es = f16 ? 2 : 4;
    const int64_t rows = lmc_attn_value_rows(m, hd * es, (group + 3) / 4 * ((hd + 63) / 64));
    for (int64_t i0 = 0; i0 < m; i0 += rows) {
        const int64_t mb = m - i0 < rows ? m - i0 : rows;
        const void *vb = (const char *)vals + i0 * hd * es;
        for (int64_t g0 = 0; g0 < group; g0 += 4) {
            int G = group - g0 < 4 ? (int)(group - g0) : 4;
            for (int64_t d0 = 0; d0 < hd; d0 += 64) {
                int DN = hd - d0 < 64 ? (int)((hd - d0) / 16) : 4;
                const float *pp = p + g0 * lds + i0;
                float *oo = o + g0 * hd + d0;
                const int64_t pf = g0 == 0 && d0 == 0 ? (m - i0) * hd * es : 0;
                switch (G * 8 + DN) {
                    TILE(1, 1)
                    TILE(1, 2)
                    TILE(1, 3)
                    TILE(1, 4)
                    TILE(2, 1)
                    TILE(2, 2)
                    TILE(2, 3)
                    TILE(2, 4)
                    TILE(3, 1)
                    TILE(3, 2) TILE(3, 3) TILE(3, 4) TILE(4, 1) TILE(4, 2) TILE(4, 3) TILE(4, 4)
                }
            }
        }
    }
}

static void values(const float *p, int64_t lds, int64_t group, const float *vals, int64_t m,
                   int64_t hd, float *o) {
    if (hd == 64)
        values_impl(p, lds, group, vals, m, 64, o, 0);
    else if (hd == 128)
        values_impl(p, lds, group, vals, m, 128, o, 0);
    else if (hd % 16)
        lmc_attn_kernels_generic()->values(p, lds, group, vals, m, hd, o);
    else
        values_impl(p, lds, group, vals, m, hd, o, 0);
}

static void values_f16(const float *p, int64_t lds, int64_t group, const uint16_t *vals, int64_t m,
                       int64_t hd, float *o) {
    if (hd == 64)
        values_impl(p, lds, group, vals, m, 64, o, 1);
    else if (hd == 128)
        values_impl(p, lds, group, vals, m, 128, o, 1);
    else if (hd % 16)
        lmc_attn_kernels_generic()->values_f16(p, lds, group, vals, m, hd, o);
    else
        values_impl(p, lds, group, vals, m, hd, o, 1);
}

static const lmc_attn_kernels avx512_table = {"avx512", scores,     exp_sum,
                                              values,   scores_f16, values_f16};

const lmc_attn_kernels *lmc_attn_kernels_avx512(void) {
    return lmc_cpu_has_avx512() ? &avx512_table : NULL;
}
#else
const lmc_attn_kernels *lmc_attn_kernels_avx512(void) {
    return NULL;
}
#endif
