/* AVX2 tile of the quantized prefill GEMM (gemm_internal.h): 16 weight rows
 * (two ymm of 8 rows) x 3 tokens per kernel step, the packed layout of
 * qgemm_avx512.c (per k-step of 2 columns one dword of two int16 q per row):
 * vpmaddwd with the token's 2 broadcast int16 activations, then vpaddd. */
#include "kernels/gemm_internal.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include "kernels/avx2_inline.h"

#define MR QGEMM_MR_AVX2
#define NT 3

/* Per 8 rows x 16 columns: each row's 16 q widened to int16 (8 dwords),
 * then an 8 x 8 dword transpose gives the 8 k-steps of those rows. */
static void pack(const lmc_qweight *w, int64_t r0, int nr, int64_t k0, int64_t kc, uint32_t *wt,
                 float *st, float *bt) {
    const int g = w->group_size;
    const int64_t ng = quant_groups(w), row_bytes = quant_row_words(w) * 4, np = kc / 2;
    const int ngc = (int)(kc / g);
    if (nr < MR) {
        memset(st, 0, (size_t)ngc * MR * 4);
        memset(bt, 0, (size_t)ngc * MR * 4);
    }
    /* the next chunk of these rows, into the cache while this one is used:
     * short strided streams defeat the hardware prefetcher */
    const int64_t chunk_bytes = kc * w->bits / 8;
    if (k0 + kc < w->cols)
        for (int i = 0; i < nr; i++) {
            const char *next =
                (const char *)w->packed + (r0 + i) * row_bytes + (k0 + kc) * w->bits / 8;
            for (int64_t b = 0; b < chunk_bytes; b += 64) _mm_prefetch(next + b, _MM_HINT_T1);
        }
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (int half = 0; half < MR / 8; half++)
        for (int64_t p0 = 0; p0 < np; p0 += 8) {
            __m256i r[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) {
                const int row = half * 8 + i;
                if (row >= nr) {
                    r[i] = _mm256_setzero_si256();
                    continue;
                }
                const uint8_t *src = (const uint8_t *)w->packed + (r0 + row) * row_bytes;
                __m128i nat;
                if (w->bits == 8) {
                    nat = _mm_loadu_si128((const __m128i *)(src + k0 + 2 * p0));
                } else {
                    __m128i v = _mm_loadl_epi64((const __m128i *)(src + k0 / 2 + p0));
                    __m128i lo = _mm_and_si128(v, m4), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
                    nat = _mm_unpacklo_epi8(lo, hi);
                }
                r[i] = _mm256_cvtepu8_epi16(nat);
            }
            lmc_transpose8_avx2(r);
#pragma GCC unroll 8
            for (int p = 0; p < 8; p++)
                _mm256_store_si256((__m256i *)(wt + (p0 + p) * MR + half * 8), r[p]);
        }
    for (int i = 0; i < nr; i++) {
        const int64_t gi = (r0 + i) * ng + k0 / g;
        for (int j = 0; j < ngc; j++) {
            st[j * MR + i] = quant_load_scale(w->scales, w->scale_dtype, gi + j);
            bt[j * MR + i] = quant_load_scale(w->biases, w->scale_dtype, gi + j);
        }
    }
}

static inline __attribute__((always_inline)) void
kernel(const uint32_t *wt, const float *st, const float *bt, int ngc, int g, const int16_t *xv,
       int64_t ldv, const float *xd, const float *xg, int64_t ldg, float *acc, const int nt) {
    __m256 f0[NT], f1[NT];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        f0[t] = _mm256_load_ps(acc + t * MR);
        f1[t] = _mm256_load_ps(acc + t * MR + 8);
    }
    for (int j = 0; j < ngc; j++) {
        const int16_t *xj = xv + (int64_t)j * g;
        __m256i i0[NT], i1[NT];
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) i0[t] = i1[t] = _mm256_setzero_si256();
        for (int p = 0; p < g / 2; p += 8) {
#pragma GCC unroll 8
            for (int u = 0; u < 8; u++) {
                const __m256i w0 = _mm256_load_si256((const __m256i *)wt);
                const __m256i w1 = _mm256_load_si256((const __m256i *)(wt + 8));
                wt += MR;
#pragma GCC unroll 8
                for (int t = 0; t < nt; t++) {
                    int32_t xi;
                    memcpy(&xi, xj + t * ldv + 2 * (p + u), 4);
                    const __m256i xx = _mm256_set1_epi32(xi);
                    i0[t] = _mm256_add_epi32(i0[t], _mm256_madd_epi16(w0, xx));
                    i1[t] = _mm256_add_epi32(i1[t], _mm256_madd_epi16(w1, xx));
                    /* keeps the sums chained: GCC otherwise regroups the
                     * unrolled adds into trees whose products spill to the
                     * stack (a store and a load per vpmaddwd) */
                    __asm__("" : "+x"(i0[t]), "+x"(i1[t]));
                }
            }
        }
        const __m256 s0 = _mm256_load_ps(st + j * MR), s1 = _mm256_load_ps(st + j * MR + 8);
        const __m256 b0 = _mm256_load_ps(bt + j * MR), b1 = _mm256_load_ps(bt + j * MR + 8);
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const __m256 dv = _mm256_set1_ps(xd[t * ldg + j]);
            const __m256 gs = _mm256_set1_ps(xg[t * ldg + j]);
            f0[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0[t]), _mm256_mul_ps(s0, dv), f0[t]);
            f1[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1[t]), _mm256_mul_ps(s1, dv), f1[t]);
            f0[t] = _mm256_fmadd_ps(b0, gs, f0[t]);
            f1[t] = _mm256_fmadd_ps(b1, gs, f1[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        _mm256_store_ps(acc + t * MR, f0[t]);
        _mm256_store_ps(acc + t * MR + 8, f1[t]);
    }
}

void qgemm_tile_avx2(const lmc_qweight *w, int64_t r0, int nr, const qgemm_x *x, int64_t T,
                     float *y, int64_t ldy, void *scratch) {
    const int g = w->group_size;
    uint8_t *base = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    uint32_t *wt = (uint32_t *)base;
    float *st = (float *)(base + (size_t)MR * GEMM_KC * 2);
    float *bt = st + MR * (GEMM_KC / 32);
    float *acc = bt + MR * (GEMM_KC / 32);
    memset(acc, 0, (size_t)T * MR * sizeof(float));
    for (int64_t k0 = 0; k0 < w->cols; k0 += GEMM_KC) {
        const int64_t kc = w->cols - k0 < GEMM_KC ? w->cols - k0 : GEMM_KC;
        const int ngc = (int)(kc / g);
        pack(w, r0, nr, k0, kc, wt, st, bt);
        const int16_t *xv = x->v + k0;
        const float *xd = x->d + k0 / g, *xg = x->gsum + k0 / g;
        const int64_t ldv = x->ldv, ldg = x->ldg;
        int64_t t = 0;
        for (; t + NT <= T; t += NT)
            kernel(wt, st, bt, ngc, g, xv + t * ldv, ldv, xd + t * ldg, xg + t * ldg, ldg,
                   acc + t * MR, NT);
        if (T - t == 2)
            kernel(wt, st, bt, ngc, g, xv + t * ldv, ldv, xd + t * ldg, xg + t * ldg, ldg,
                   acc + t * MR, 2);
        else if (T - t == 1)
            kernel(wt, st, bt, ngc, g, xv + t * ldv, ldv, xd + t * ldg, xg + t * ldg, ldg,
                   acc + t * MR, 1);
    }
    for (int64_t t = 0; t < T; t++) memcpy(y + t * ldy, acc + t * MR, (size_t)nr * sizeof(float));
}

bool qgemm_quantize_row_avx2(const float *x, int64_t cols, int g, int16_t *v, float *d,
                             float *gsum) {
    const __m256i qmax = _mm256_set1_epi32(32767), qmin = _mm256_set1_epi32(-32767);
    for (int64_t j = 0; j < cols / g; j++) {
        const float *xg = x + j * g;
        const float amax = lmc_absmax_avx2(xg, g);
        if (amax < 0.0f) return false;
        const float dj = amax / 32767.0f, id = amax > 0.0f ? 32767.0f / amax : 0.0f;
        /* round to nearest even (the MXCSR default), as the generic code's
         * float adder does for |x * id| < 2^22 */
        const __m256 vid = _mm256_set1_ps(id);
        __m256i s = _mm256_setzero_si256();
        for (int i = 0; i < g; i += 16) {
            __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xg + i), vid));
            __m256i q1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xg + i + 8), vid));
            q0 = _mm256_max_epi32(_mm256_min_epi32(q0, qmax), qmin);
            q1 = _mm256_max_epi32(_mm256_min_epi32(q1, qmax), qmin);
            s = _mm256_add_epi32(s, _mm256_add_epi32(q0, q1));
            /* packs interleaves the 128-bit lanes: put them back in order */
            _mm256_storeu_si256((__m256i *)(v + j * g + i),
                                _mm256_permute4x64_epi64(_mm256_packs_epi32(q0, q1), 0xD8));
        }
        d[j] = dj;
        gsum[j] = dj * (float)lmc_hsum_epi32_avx2(s);
    }
    return true;
}

#else
bool qgemm_quantize_row_avx2(const float *x, int64_t cols, int g, int16_t *v, float *d,
                             float *gsum) {
    return qgemm_quantize_row_generic(x, cols, g, v, d, gsum);
}

void qgemm_tile_avx2(const lmc_qweight *w, int64_t r0, int nr, const qgemm_x *x, int64_t T,
                     float *y, int64_t ldy, void *scratch) {
    (void)w, (void)r0, (void)nr, (void)x, (void)T, (void)y, (void)ldy, (void)scratch;
}
#endif
