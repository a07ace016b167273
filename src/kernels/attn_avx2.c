/* Attention's inner loops in AVX2 + FMA (head_dim a multiple of 8; others go
 * to the generic C), as attn_avx512.c with 8 lanes: scores for 8 keys
 * against one query summed across lanes together (reduce8), values in tiles
 * of up to 4 queries x 16 columns, exp with the same polynomial and 2^n
 * built in the exponent bits. Called only when the CPU has AVX2, FMA and
 * F16C. */
#include "kernels/kernels.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include "kernels/avx2_inline.h"

/* Sums of the 8 vectors v[0..7], in order, as one vector. */
static inline __m256 reduce8(const __m256 *v) {
    __m256 u[4], w[2];
#pragma GCC unroll 8
    for (int k = 0; k < 4; k++)
        u[k] = _mm256_add_ps(_mm256_unpacklo_ps(v[2 * k], v[2 * k + 1]),
                             _mm256_unpackhi_ps(v[2 * k], v[2 * k + 1]));
#pragma GCC unroll 8
    for (int k = 0; k < 2; k++) {
        __m256d a = _mm256_castps_pd(u[2 * k]), b = _mm256_castps_pd(u[2 * k + 1]);
        w[k] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(a, b)),
                             _mm256_castpd_ps(_mm256_unpackhi_pd(a, b)));
    }
    /* w[k], per 128-bit lane: the lane's sums of v[4k .. 4k+3] */
    return _mm256_add_ps(_mm256_permute2f128_ps(w[0], w[1], 0x20),
                         _mm256_permute2f128_ps(w[0], w[1], 0x31));
}

static inline float hsum8(__m256 v) {
    __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

/* 8 floats of a row from element i on: f32, or f16 widened */
static inline __attribute__((always_inline)) __m256 ld8(const void *p, int64_t i, const int f16) {
    if (f16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
    return _mm256_loadu_ps((const float *)p + i);
}

static inline __attribute__((always_inline)) void scores_impl(const float *q, int64_t group,
                                                              int64_t hd, const void *keys,
                                                              int64_t m, float *s, int64_t lds,
                                                              const int f16) {
    const int64_t row = hd * (f16 ? 2 : 4);
    int64_t i = 0;
    for (; i + 8 <= m; i += 8) {
        /* the next rows, LMC_ATTN_PREFETCH bytes on, a line at a time */
        lmc_prefetch_lines(keys, i * row + LMC_ATTN_PREFETCH, 8 * row, m * row);
        const void *blk = (const char *)keys + i * row;
        for (int64_t g = 0; g < group; g++) {
            const float *qg = q + g * hd;
            __m256 acc[8];
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) acc[j] = _mm256_setzero_ps();
#pragma GCC unroll 16
            for (int64_t d = 0; d < hd; d += 8) {
                __m256 qv = _mm256_loadu_ps(qg + d);
#pragma GCC unroll 8
                for (int j = 0; j < 8; j++)
                    acc[j] = _mm256_fmadd_ps(ld8(blk, j * hd + d, f16), qv, acc[j]);
            }
            _mm256_storeu_ps(s + g * lds + i, reduce8(acc));
        }
    }
    for (; i < m; i++)
        for (int64_t g = 0; g < group; g++) {
            const float *qg = q + g * hd;
            __m256 acc = _mm256_setzero_ps();
            for (int64_t d = 0; d < hd; d += 8)
                acc = _mm256_fmadd_ps(ld8(keys, i * hd + d, f16), _mm256_loadu_ps(qg + d), acc);
            s[g * lds + i] = hsum8(acc);
        }
}

static void scores(const float *q, int64_t group, int64_t hd, const float *keys, int64_t m,
                   float *s, int64_t lds) {
    if (hd == 64)
        scores_impl(q, group, 64, keys, m, s, lds, 0);
    else if (hd == 128)
        scores_impl(q, group, 128, keys, m, s, lds, 0);
    else if (hd % 8)
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
    else if (hd % 8)
        lmc_attn_kernels_generic()->scores_f16(q, group, hd, keys, m, s, lds);
    else
        scores_impl(q, group, hd, keys, m, s, lds, 1);
}

static float exp_sum(float *x, int64_t n) {
    __m256 mx = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(x + i));
    float m = -INFINITY;
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    float hm = _mm_cvtss_f32(h);
    m = hm > m ? hm : m;
    __m256 mv = _mm256_set1_ps(m), sum = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 e = lmc_exp8_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
        _mm256_storeu_ps(x + i, e);
        sum = _mm256_add_ps(sum, e);
    }
    if (i < n) {
        float t[8] = {0};
        for (int64_t k = i; k < n; k++) t[k - i] = x[k] - m;
        __m256 e = lmc_exp8_avx2(_mm256_loadu_ps(t));
        _mm256_storeu_ps(t, e);
        for (int64_t k = i; k < n; k++) x[k] = t[k - i];
        /* lanes past n hold exp(0) = 1: only the first n - i count */
        for (int64_t k = n - i; k < 8; k++) t[k] = 0;
        sum = _mm256_add_ps(sum, _mm256_loadu_ps(t));
    }
    return hsum8(sum);
}

/* o[g][0 .. 8 * DN) += sum_i p[g][i] v[i][0 .. 8 * DN) for g < G, in
 * registers; G, DN and f16 are constants at each call. pf_end > 0: the
 * rows' bytes from vals to the end of the run, whole rows prefetched
 * LMC_ATTN_PREFETCH bytes on (the first tile of a block of rows). */
static inline __attribute__((always_inline)) void
values_tile(const float *p, int64_t lds, const void *vals, int64_t d0, int64_t m, int64_t hd,
            float *o, int64_t pf_end, const int G, const int DN, const int f16) {
    __m256 acc[4][2], v[2];
#pragma GCC unroll 4
    for (int g = 0; g < G; g++)
#pragma GCC unroll 4
        for (int d = 0; d < DN; d++) acc[g][d] = _mm256_loadu_ps(o + g * hd + 8 * d);
    const int64_t es = f16 ? 2 : 4;
    for (int64_t i = 0; i < m; i++) {
        if (pf_end) lmc_prefetch_lines(vals, i * hd * es + LMC_ATTN_PREFETCH, hd * es, pf_end);
#pragma GCC unroll 4
        for (int d = 0; d < DN; d++) v[d] = ld8(vals, i * hd + d0 + 8 * d, f16);
#pragma GCC unroll 4
        for (int g = 0; g < G; g++) {
            __m256 a = _mm256_broadcast_ss(p + g * lds + i);
#pragma GCC unroll 4
            for (int d = 0; d < DN; d++) acc[g][d] = _mm256_fmadd_ps(a, v[d], acc[g][d]);
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < G; g++)
#pragma GCC unroll 4
        for (int d = 0; d < DN; d++) _mm256_storeu_ps(o + g * hd + 8 * d, acc[g][d]);
}

#define TILE(G, DN)                                                                                \
    case (G)*4 + (DN):                                                                             \
        values_tile(pp, lds, vb, d0, mb, hd, oo, pf, G, DN, f16);                                  \
        break;

/* By blocks of rows that stay in L1 (lmc_attn_value_rows) with every tile
 * of the group and the columns over each block: the values are read once,
 * row after row (tile by tile over all rows read each row's columns in a
 * separate pass, 4 strided passes from memory for head_dim 64). 2 threads,
 * 2048 positions, cold, us per layer: f16 203-239 -> 167-176, f32 280-311
 * -> 248-301, head_dim 128 f32 565-728 -> 527-660. A tile is 4 queries x
 * 16 columns. */
static inline __attribute__((always_inline)) void values_impl(const float *p, int64_t lds,
                                                              int64_t group, const void *vals,
                                                              int64_t m, int64_t hd, float *o,
                                                              const int f16) {
    const int64_t es = f16 ? 2 : 4;
    const int64_t rows = lmc_attn_value_rows(m, hd * es, (group + 3) / 4 * ((hd + 15) / 16));
    for (int64_t i0 = 0; i0 < m; i0 += rows) {
        const int64_t mb = m - i0 < rows ? m - i0 : rows;
        const void *vb = (const char *)vals + i0 * hd * es;
        for (int64_t g0 = 0; g0 < group; g0 += 4) {
            int G = group - g0 < 4 ? (int)(group - g0) : 4;
            for (int64_t d0 = 0; d0 < hd; d0 += 16) {
                int DN = hd - d0 < 16 ? 1 : 2;
                const float *pp = p + g0 * lds + i0;
                float *oo = o + g0 * hd + d0;
                const int64_t pf = g0 == 0 && d0 == 0 ? (m - i0) * hd * es : 0;
                switch (G * 4 + DN) {
                    TILE(1, 1)
                    TILE(1, 2) TILE(2, 1) TILE(2, 2) TILE(3, 1) TILE(3, 2) TILE(4, 1) TILE(4, 2)
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
    else if (hd % 8)
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
    else if (hd % 8)
        lmc_attn_kernels_generic()->values_f16(p, lds, group, vals, m, hd, o);
    else
        values_impl(p, lds, group, vals, m, hd, o, 1);
}

static const lmc_attn_kernels avx2_table = {"avx2", scores,     exp_sum,
                                            values, scores_f16, values_f16};

const lmc_attn_kernels *lmc_attn_kernels_avx2(void) {
    return lmc_cpu_has_avx2_fma_f16c() ? &avx2_table : NULL;
}
#else
const lmc_attn_kernels *lmc_attn_kernels_avx2(void) {
    return NULL;
}
#endif
