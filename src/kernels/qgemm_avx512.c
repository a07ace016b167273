/* AVX-512 VNNI tile of the quantized prefill GEMM (gemm_internal.h): 32
 * weight rows (two zmm of 16 rows) x 4 tokens per kernel step. The packed
 * tile holds, per k-step of 2 columns, the 2 unpacked q values (int16) of
 * each of the 32 rows side by side (one dword per row), so `vpdpwssd` of a
 * packed vector with a token's 2 broadcast int16 activations adds the two
 * products into each row's int32 lane; one group's dot is exact in int32.
 * Called only when lmc_cpu_has_avx512(). */
#include "kernels/gemm_internal.h"

#if defined(__AVX512F__) && defined(__AVX512VNNI__) && defined(__AVX512BW__)
#include <immintrin.h>

#define MR QGEMM_MR_AVX512
#define NT 8 /* tokens per kernel step */

/* 16 x 16 dwords transposed in registers: r[i] lane k becomes r[k] lane i. */
static inline __attribute__((always_inline)) void transpose16(__m512i r[16]) {
    __m512i t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) {
            t[8 * i + j] = _mm512_shuffle_i32x4(r[8 * i + j], r[8 * i + 4 + j], 0x88);
            t[8 * i + 4 + j] = _mm512_shuffle_i32x4(r[8 * i + j], r[8 * i + 4 + j], 0xDD);
        }
    for (int j = 0; j < 8; j++) {
        r[j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0x88);
        r[8 + j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0xDD);
    }
}

/* Rows [r0, r0+nr) x columns [k0, k0+kc) into wt ([kc/2][MR] dwords), st/bt
 * ([kc/g][MR] f32). Rows past nr are zero. Per 16 rows x 32 columns: each
 * row's 32 q widened to int16 (16 dwords, one zmm), then a 16 x 16 dword
 * transpose gives the 16 k-steps of those rows (the scalar scatter it
 * replaces was a third of the tile's time). */
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
     * 32 short strided streams defeat the hardware prefetcher */
    const int64_t chunk_bytes = kc * w->bits / 8;
    if (k0 + kc < w->cols) {
        for (int i = 0; i < nr; i++) {
            const char *next =
                (const char *)w->packed + (r0 + i) * row_bytes + (k0 + kc) * w->bits / 8;
            for (int64_t b = 0; b < chunk_bytes; b += 64) _mm_prefetch(next + b, _MM_HINT_T1);
        }
    } else {
        /* the last chunk: the first one of the next rows, the tile this
         * thread most likely takes next (its chunks of the job are runs of
         * tiles) */
        const int64_t first = kc < w->cols ? GEMM_KC * w->bits / 8 : chunk_bytes;
        for (int64_t r = r0 + MR; r < r0 + 2 * MR && r < w->rows; r++) {
            const char *next = (const char *)w->packed + r * row_bytes;
            for (int64_t b = 0; b < first; b += 64) _mm_prefetch(next + b, _MM_HINT_T1);
        }
    }
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (int half = 0; half < MR / 16; half++)
        for (int64_t p0 = 0; p0 < np; p0 += 16) {
            __m512i r[16];
            for (int i = 0; i < 16; i++) {
                const int row = half * 16 + i;
                if (row >= nr) {
                    r[i] = _mm512_setzero_si512();
                    continue;
                }
                const uint8_t *src = (const uint8_t *)w->packed + (r0 + row) * row_bytes;
                __m256i nat;
                if (w->bits == 8) {
                    nat = _mm256_loadu_si256((const __m256i *)(src + k0 + 2 * p0));
                } else {
                    __m128i v = _mm_loadu_si128((const __m128i *)(src + k0 / 2 + p0));
                    __m128i lo = _mm_and_si128(v, m4), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
                    nat = _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
                }
                r[i] = _mm512_cvtepu8_epi16(nat);
            }
            transpose16(r);
            for (int p = 0; p < 16; p++)
                _mm512_store_si512((void *)(wt + (p0 + p) * MR + half * 16), r[p]);
        }
    for (int i = 0; i < nr; i++) {
        const int64_t gi = (r0 + i) * ng + k0 / g;
        for (int j = 0; j < ngc; j++) {
            st[j * MR + i] = quant_load_scale(w->scales, w->scale_dtype, gi + j);
            bt[j * MR + i] = quant_load_scale(w->biases, w->scale_dtype, gi + j);
        }
    }
}

/* acc[t][MR] += the chunk's product for nt tokens (x pointers at the chunk).
 * 2 * nt int32 accumulators (16 for 8 tokens: Zen 5 issues two vpdpwssd a
 * cycle, so the 8 of 4 tokens left it at 60% of its peak, latency-bound);
 * the f32 sums stay in acc, read and written once per group. */
static inline __attribute__((always_inline)) void
kernel(const uint32_t *wt, const float *st, const float *bt, int ngc, int g, const int16_t *xv,
       int64_t ldv, const float *xd, const float *xg, int64_t ldg, float *acc, const int nt) {
    for (int j = 0; j < ngc; j++) {
        const int16_t *xj = xv + (int64_t)j * g;
        __m512i i0[NT], i1[NT];
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) i0[t] = i1[t] = _mm512_setzero_si512();
        for (int p = 0; p < g / 2; p += 8) {
#pragma GCC unroll 8
            for (int u = 0; u < 8; u++) {
                const __m512i w0 = _mm512_load_si512((const void *)wt);
                const __m512i w1 = _mm512_load_si512((const void *)(wt + 16));
                wt += MR;
#pragma GCC unroll 8
                for (int t = 0; t < nt; t++) {
                    int32_t xi;
                    memcpy(&xi, xj + t * ldv + 2 * (p + u), 4);
                    const __m512i xx = _mm512_set1_epi32(xi);
                    i0[t] = _mm512_dpwssd_epi32(i0[t], w0, xx);
                    i1[t] = _mm512_dpwssd_epi32(i1[t], w1, xx);
                }
            }
        }
        const __m512 s0 = _mm512_load_ps(st + j * MR), s1 = _mm512_load_ps(st + j * MR + 16);
        const __m512 b0 = _mm512_load_ps(bt + j * MR), b1 = _mm512_load_ps(bt + j * MR + 16);
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            float *a = acc + t * MR;
            const __m512 dv = _mm512_set1_ps(xd[t * ldg + j]);
            const __m512 gs = _mm512_set1_ps(xg[t * ldg + j]);
            __m512 f0 = _mm512_load_ps(a), f1 = _mm512_load_ps(a + 16);
            f0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i0[t]), _mm512_mul_ps(s0, dv), f0);
            f1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1[t]), _mm512_mul_ps(s1, dv), f1);
            _mm512_store_ps(a, _mm512_fmadd_ps(b0, gs, f0));
            _mm512_store_ps(a + 16, _mm512_fmadd_ps(b1, gs, f1));
        }
    }
}

void qgemm_tile_avx512(const lmc_qweight *w, int64_t r0, int nr, const qgemm_x *x, int64_t T,
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
        /* the rest 4, 2, 1 at a time: a constant count each, so the loops unroll */
        for (int step = 4; step >= 1; step /= 2)
            for (; t + step <= T; t += step) {
                const int16_t *xr = xv + t * ldv;
                const float *dr = xd + t * ldg, *gr = xg + t * ldg;
                if (step == 4)
                    kernel(wt, st, bt, ngc, g, xr, ldv, dr, gr, ldg, acc + t * MR, 4);
                else if (step == 2)
                    kernel(wt, st, bt, ngc, g, xr, ldv, dr, gr, ldg, acc + t * MR, 2);
                else
                    kernel(wt, st, bt, ngc, g, xr, ldv, dr, gr, ldg, acc + t * MR, 1);
            }
    }
    for (int64_t t = 0; t < T; t++) memcpy(y + t * ldy, acc + t * MR, (size_t)nr * sizeof(float));
}

#else
void qgemm_tile_avx512(const lmc_qweight *w, int64_t r0, int nr, const qgemm_x *x, int64_t T,
                       float *y, int64_t ldy, void *scratch) {
    (void)w, (void)r0, (void)nr, (void)x, (void)T, (void)y, (void)ldy, (void)scratch;
}
#endif
