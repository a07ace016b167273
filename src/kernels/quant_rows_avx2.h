/* The one-token AVX2 decode kernels of MLX 4- and 8-bit weights over the
 * integer activations (quant_internal.h's quant_qx), and the helpers they
 * share with the rest of quant_avx2.c. Included by two files, each with its
 * own integer dot products (defined before the include):
 * - quant_avx2.c: vpmaddubsw + vpmaddwd (AVX2);
 * - quant_avxvnni.c: vpdpbusd of AVX-VNNI (Alder Lake, Zen 5 and later
 *   without AVX-512), which fuses those two and their sum.
 *   qr_q4_dot(lo, hi, h0, h1, l0, l1): 128 H + L per int32 lane, H (L) the
 *     sums of lo * h0 + hi * h1 (l0, l1) over 4 adjacent bytes each;
 *   qr_q8_dot(v, xh, xl): the same over 32 packed 8-bit q (v), of q - 128
 *     when QR_Q8_OFFSET is 1 (the offset term then comes from x->corr), of
 *     q itself when it is 0;
 *   QR_NAME(f): the exported name of f for that file.
 * The integer sums are exact in both, so a 4-bit row gives the same bits
 * either way. */
#ifndef LMC_KERNELS_QUANT_ROWS_AVX2_H
#define LMC_KERNELS_QUANT_ROWS_AVX2_H

#include <immintrin.h>

#include "kernels/quant_internal.h"

static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* n scales from element `offset` of p (dtype dt) into out as f32. */
static inline void load_scales(const void *p, lmc_dtype dt, int64_t offset, int64_t n, float *out) {
    int64_t i = 0;
    if (dt == LMC_DTYPE_F16) {
        const uint16_t *s = (const uint16_t *)p + offset;
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
        for (; i < n; i++) out[i] = lmc_f16_to_f32(s[i]);
    } else if (dt == LMC_DTYPE_BF16) {
        const uint16_t *s = (const uint16_t *)p + offset;
        for (; i + 8 <= n; i += 8) {
            __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
            _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
        }
        for (; i < n; i++) out[i] = lmc_bf16_to_f32(s[i]);
    } else {
        memcpy(out, (const float *)p + offset, (size_t)n * sizeof(float));
    }
}

#define SEG_GROUPS 64 /* scales converted per segment of a row */

#ifndef Q8_PREFETCH_ROWS
#define Q8_PREFETCH_ROWS 8
#endif

/* The scale vector of pair pp (blocks 2pp, 2pp + 1) of a segment, from
 * row_segment's or pair_scales' sd: lanes 0-3 block 2pp's, 4-7 block
 * 2pp + 1's. */
static inline __m256 pair_scale(const float *sd, int64_t pp, int g) {
    if (g == 32)
        return _mm256_set_m128(_mm_broadcast_ss(sd + 2 * pp + 1), _mm_broadcast_ss(sd + 2 * pp));
    return _mm256_broadcast_ss(sd + pp);
}

/* 8 scales (or biases) from element i of p, dtype dt, as f32. */
static inline __m256 scales8(const void *p, lmc_dtype dt, int64_t i) {
    if (dt == LMC_DTYPE_F16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
    if (dt == LMC_DTYPE_BF16) {
        __m256i v =
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    }
    return _mm256_loadu_ps((const float *)p + i);
}
/* A row of the four-row kernels (rows_q4, rows_q8): its packed data, after
 * a prefetch of the scales and biases of the row Q8_PREFETCH_ROWS on (two
 * more streams). */
static inline const uint8_t *row_begin(const lmc_qweight *w, int64_t r) {
    const int64_t ng = quant_groups(w);
    const size_t ss = quant_scale_size(w->scale_dtype);
    if (r + Q8_PREFETCH_ROWS < w->rows) {
        size_t off = (size_t)((r + Q8_PREFETCH_ROWS) * ng) * ss;
        for (size_t b = 0; b < (size_t)ng * ss; b += 64) {
            _mm_prefetch((const char *)w->scales + off + b, _MM_HINT_T0);
            _mm_prefetch((const char *)w->biases + off + b, _MM_HINT_T0);
        }
    }
    return (const uint8_t *)w->packed + r * quant_row_words(w) * 4;
}

/* One row's groups [gi, gi + n) of a segment: their scales as f32 into sc,
 * where mul is not NULL each times mul[j] (x's d folded in) or, with dup
 * (groups of 128, two pairs of blocks each), times mul[2j] and mul[2j + 1]
 * into sc[2j] and sc[2j + 1]; and the bias terms, each bias times gs[j]
 * (the quantized group sums of x) plus, where corr is not NULL, the
 * unscaled scale times corr[j], added into *bt (8 lanes) and *tail. */
static inline __attribute__((always_inline)) void
row_segment(const lmc_qweight *w, int64_t gi, int n, const float *mul, const bool dup,
            const float *gs, const float *corr, float *sc, __m256 *bt, float *tail) {
    const lmc_dtype dt = w->scale_dtype;
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 s = scales8(w->scales, dt, gi + j);
        if (dup) {
            const __m256i i0 = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
            const __m256i i1 = _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7);
            _mm256_storeu_ps(sc + 2 * j, _mm256_mul_ps(_mm256_permutevar8x32_ps(s, i0),
                                                       _mm256_loadu_ps(mul + 2 * j)));
            _mm256_storeu_ps(sc + 2 * j + 8, _mm256_mul_ps(_mm256_permutevar8x32_ps(s, i1),
                                                           _mm256_loadu_ps(mul + 2 * j + 8)));
        } else {
            _mm256_storeu_ps(sc + j, mul ? _mm256_mul_ps(s, _mm256_loadu_ps(mul + j)) : s);
        }
        __m256 b = _mm256_fmadd_ps(scales8(w->biases, dt, gi + j), _mm256_loadu_ps(gs + j), *bt);
        *bt = corr ? _mm256_fmadd_ps(s, _mm256_loadu_ps(corr + j), b) : b;
    }
    for (; j < n; j++) {
        const float s = quant_load_scale(w->scales, dt, gi + j);
        if (dup)
            sc[2 * j] = s * mul[2 * j], sc[2 * j + 1] = s * mul[2 * j + 1];
        else
            sc[j] = mul ? s * mul[j] : s;
        *tail += quant_load_scale(w->biases, dt, gi + j) * gs[j] + (corr ? s * corr[j] : 0.0f);
    }
}

/* A row's scales of the n groups of a segment (sc) times the d of x over
 * them (a pair of blocks shares one, quant_qx), into sd: one per block for
 * g = 32 (its group's), one per pair of blocks (64 columns) otherwise. */
static inline void pair_scales(const float *sc, int n, int g, const quant_qx *x, int64_t j0,
                               float *sd) {
    if (g == 128) {
        const float *dp = x->dp + 2 * j0;
        for (int j = 0; j < n; j++)
            sd[2 * j] = sc[j] * dp[2 * j], sd[2 * j + 1] = sc[j] * dp[2 * j + 1];
        return;
    }
    const float *d = g == 32 ? x->d + j0 : x->dp + j0;
    int j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(sd + j, _mm256_mul_ps(_mm256_loadu_ps(sc + j), _mm256_loadu_ps(d + j)));
    for (; j < n; j++) sd[j] = sc[j] * d[j];
}

/* 4 bits, one token, cols % 64 == 0: four rows at a time, a quarter of the
 * range apart (each a sequential stream of its own), so that each load of x
 * serves four rows; the integers of q4_pair. */
#define Q4_ROWS 4
static inline __attribute__((always_inline)) void rows_q4(const lmc_qweight *w, int64_t r0,
                                                          int64_t stride, const int nr,
                                                          const quant_qx *x, float *y,
                                                          const int g) {
    const int64_t ng = quant_groups(w);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    /* a row's scales times x's d: per group for g <= 64 (d is the same
     * over 64 columns), per 64 columns for g = 128 */
    _Alignas(32) float sc[Q4_ROWS][2 * SEG_GROUPS];
    const uint8_t *rp[Q4_ROWS];
    __m256 acc[Q4_ROWS], bt[Q4_ROWS];
    float tail[Q4_ROWS];
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++) {
        rp[i] = row_begin(w, r0 + i * stride);
        acc[i] = _mm256_setzero_ps(), bt[i] = _mm256_setzero_ps(), tail[i] = 0.0f;
    }
    for (int64_t j0 = 0; j0 < ng; j0 += SEG_GROUPS) {
        const int n = (int)(ng - j0 < SEG_GROUPS ? ng - j0 : SEG_GROUPS);
        const float *dmul = g == 32 ? x->d + j0 : x->dp + j0 * g / 64;
#pragma GCC unroll 4
        for (int i = 0; i < nr; i++)
            row_segment(w, (r0 + i * stride) * ng + j0, n, dmul, g == 128, x->gsum + j0, NULL,
                        sc[i], &bt[i], &tail[i]);
        const int64_t c0 = j0 * g, np = (int64_t)n * g / 64; /* pairs of blocks */
        const int8_t *xh = x->h + c0, *xl = x->l + c0;
        for (int64_t pp = 0; pp < np; pp++) {
            const __m256i h0 = _mm256_loadu_si256((const __m256i *)xh);
            const __m256i h1 = _mm256_loadu_si256((const __m256i *)(xh + 32));
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)xl);
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(xl + 32));
            const int64_t off = c0 / 2 + pp * 32;
#pragma GCC unroll 4
            for (int i = 0; i < nr; i++) {
                if (!(pp & 1)) /* one per 64-byte line; a hint only past the end */
                    _mm_prefetch((const char *)((uintptr_t)(rp[i] + off) + QUANT_DECODE_PREFETCH),
                                 _MM_HINT_T0);
                __m256i v = _mm256_loadu_si256((const __m256i *)(rp[i] + off));
                __m256i lo = _mm256_and_si256(v, m4);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                __m256i s32 = qr_q4_dot(lo, hi, h0, h1, l0, l1);
                acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32), pair_scale(sc[i], pp, g), acc[i]);
            }
            xh += 64, xl += 64;
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++) y[i * stride] = hsum256(acc[i]) + (hsum256(bt[i]) + tail[i]);
}

void QR_NAME(quant_matvec_q4_rows)(const lmc_qweight *w, int64_t r0, int64_t r1, const quant_qx *x,
                                   float *y) {
    const int64_t q = (r1 - r0) / Q4_ROWS;
    /* one copy per group size: pair_scale's choice and shift are constants */
#define QR_Q4_ALL(G)                                                                               \
    do {                                                                                           \
        for (int64_t k = 0; k < q; k++) rows_q4(w, r0 + k, q, Q4_ROWS, x, y + k, G);               \
        for (int64_t r = r0 + q * Q4_ROWS; r < r1; r++) rows_q4(w, r, 1, 1, x, y + (r - r0), G);   \
    } while (0)
    if (w->group_size == 32)
        QR_Q4_ALL(32);
    else if (w->group_size == 64)
        QR_Q4_ALL(64);
    else
        QR_Q4_ALL(128);
#undef QR_Q4_ALL
}

/* 8 bits, one token: four rows at a time, a quarter of the range apart, as
 * rows_q4; each block's x digits are loaded once for the four rows. */
static inline __attribute__((always_inline)) void rows_q8(const lmc_qweight *w, int64_t r0,
                                                          int64_t stride, const int nr,
                                                          const quant_qx *x, float *y) {
    const int g = w->group_size, bpg = g / 32;
    const int64_t ng = quant_groups(w);
    _Alignas(32) float sc[Q4_ROWS][SEG_GROUPS];
    const uint8_t *rp[Q4_ROWS];
    __m256 acc[Q4_ROWS], bt[Q4_ROWS];
    float tail[Q4_ROWS];
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++) {
        rp[i] = row_begin(w, r0 + i * stride);
        acc[i] = _mm256_setzero_ps(), bt[i] = _mm256_setzero_ps(), tail[i] = 0.0f;
    }
    for (int64_t j0 = 0; j0 < ng; j0 += SEG_GROUPS) {
        const int n = (int)(ng - j0 < SEG_GROUPS ? ng - j0 : SEG_GROUPS);
        /* biases times the quantized group sums, plus the 8-bit offset term
         * where qr_q8_dot sums (q - 128) x */
        const float *cr = QR_Q8_OFFSET ? x->corr + j0 : NULL;
#pragma GCC unroll 4
        for (int i = 0; i < nr; i++)
            row_segment(w, (r0 + i * stride) * ng + j0, n, NULL, false, x->gsum + j0, cr, sc[i],
                        &bt[i], &tail[i]);
        int64_t k = j0 * bpg; /* the block */
        for (int j = 0; j < n; j++) {
            __m256 ga[Q4_ROWS];
#pragma GCC unroll 4
            for (int i = 0; i < nr; i++) ga[i] = _mm256_setzero_ps();
            for (int b = 0; b < bpg; b++, k++) {
                const __m256i xh = _mm256_loadu_si256((const __m256i *)(x->h + k * 32));
                const __m256i xl = _mm256_loadu_si256((const __m256i *)(x->l + k * 32));
                const __m256 d = _mm256_broadcast_ss(x->d + k);
#pragma GCC unroll 4
                for (int i = 0; i < nr; i++) {
                    const uint8_t *p = rp[i] + k * 32;
                    if (!(k & 1)) /* one per 64-byte line; a hint only past the end */
                        _mm_prefetch((const char *)((uintptr_t)p + QUANT_DECODE_PREFETCH),
                                     _MM_HINT_T0);
                    __m256i s32 = qr_q8_dot(_mm256_loadu_si256((const __m256i *)p), xh, xl);
                    ga[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32), d, ga[i]);
                }
            }
#pragma GCC unroll 4
            for (int i = 0; i < nr; i++)
                acc[i] = _mm256_fmadd_ps(ga[i], _mm256_broadcast_ss(sc[i] + j), acc[i]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++) y[i * stride] = hsum256(acc[i]) + (hsum256(bt[i]) + tail[i]);
}

void QR_NAME(quant_matvec_q8_rows)(const lmc_qweight *w, int64_t r0, int64_t r1, const quant_qx *x,
                                   float *y) {
    const int64_t q = (r1 - r0) / Q4_ROWS;
    for (int64_t k = 0; k < q; k++) rows_q8(w, r0 + k, q, Q4_ROWS, x, y + k);
    for (int64_t r = r0 + q * Q4_ROWS; r < r1; r++) rows_q8(w, r, 1, 1, x, y + (r - r0));
}

#endif
