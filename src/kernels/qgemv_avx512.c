/* AVX-512 VNNI matvec of MLX 4/8-bit weights for decode (up to 8 tokens),
 * int16 activations per group (qgemm_x; gemm_internal.h has the maths): a
 * row's q values are widened to int16 in registers (vpmovzxbw) and
 * `vpdpwssd` sums 32 products per instruction into int32 lanes, exact per
 * group; then one FMA by s * d per group and token. For 4 bits, 32 packed
 * bytes are 64 columns: the low nibbles are the even ones, the high nibbles
 * the odd ones, and x comes permuted to match (per 64 columns: the 32 even,
 * then the 32 odd; qgemm.c). Groups of 64 and 128 only. Called only when
 * lmc_cpu_has_avx512(). */
#include "kernels/gemm_internal.h"

#if defined(__AVX512F__) && defined(__AVX512VNNI__) && defined(__AVX512BW__)
#include "kernels/scales_avx512.h"

#define NT 4
#define SEG 64 /* groups whose scales are converted at a time */

static inline __attribute__((always_inline)) void rows_kernel(const lmc_qweight *w, int64_t r0,
                                                              int nr, const qgemm_x *x, float *y,
                                                              int64_t ldy, const int nt) {
    const int g = w->group_size, b8 = w->bits == 8;
    const int64_t ng = quant_groups(w), row_bytes = quant_row_words(w) * 4;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    _Alignas(64) float sc[SEG], bi[SEG];
    for (int i = 0; i < nr; i++) {
        const int64_t r = r0 + i;
        const uint8_t *rp = (const uint8_t *)w->packed + r * row_bytes;
        __m512 f[NT];
        float bacc[NT];
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) f[t] = _mm512_setzero_ps(), bacc[t] = 0.0f;
        for (int64_t j0 = 0; j0 < ng; j0 += SEG) {
            const int n = (int)(ng - j0 < SEG ? ng - j0 : SEG);
            load_scales_avx512(w->scales, w->scale_dtype, r * ng + j0, n, sc);
            load_scales_avx512(w->biases, w->scale_dtype, r * ng + j0, n, bi);
            for (int j = 0; j < n; j++) {
                const int64_t c0 = (j0 + j) * g;
                __m512i acc[NT];
#pragma GCC unroll 8
                for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_si512();
                for (int c = 0; c < g; c += 64) {
                    __m512i qa, qb;
                    if (b8) {
                        const uint8_t *p = rp + c0 + c;
                        _mm_prefetch((const char *)((uintptr_t)p + QUANT_DECODE_PREFETCH),
                                     _MM_HINT_T0);
                        qa = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)p));
                        qb = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(p + 32)));
                    } else {
                        const uint8_t *p = rp + (c0 + c) / 2;
                        if (!(c & 64))
                            _mm_prefetch((const char *)((uintptr_t)p + QUANT_DECODE_PREFETCH),
                                         _MM_HINT_T0);
                        __m256i v = _mm256_loadu_si256((const __m256i *)p);
                        qa = _mm512_cvtepu8_epi16(_mm256_and_si256(v, m4));
                        qb = _mm512_cvtepu8_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
                    }
#pragma GCC unroll 8
                    for (int t = 0; t < nt; t++) {
                        const int16_t *xv = x->v + t * x->ldv + c0 + c;
                        acc[t] = _mm512_dpwssd_epi32(acc[t], qa, _mm512_loadu_si512(xv));
                        acc[t] = _mm512_dpwssd_epi32(acc[t], qb, _mm512_loadu_si512(xv + 32));
                    }
                }
#pragma GCC unroll 8
                for (int t = 0; t < nt; t++) {
                    const float d = x->d[t * x->ldg + j0 + j];
                    f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[t]), _mm512_set1_ps(sc[j] * d),
                                           f[t]);
                    bacc[t] += bi[j] * x->gsum[t * x->ldg + j0 + j];
                }
            }
        }
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) y[t * ldy + i] = _mm512_reduce_add_ps(f[t]) + bacc[t];
    }
}

/* One token, 8 bits: rows r0 + i * stride (i < nr <= 4) at once, each load
 * of x serving every row and each row a sequential stream of its own; the
 * scales (times x's d) and biases of 16 groups at a time in registers. */
static inline __attribute__((always_inline)) void rows_q8_t1(const lmc_qweight *w, int64_t r0,
                                                             int64_t stride, const int nr,
                                                             const qgemm_x *x, float *y) {
    const int g = w->group_size;
    const int64_t ng = quant_groups(w), row_bytes = quant_row_words(w) * 4;
    const uint8_t *rp[4];
    __m512 f[4];
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++) {
        rp[i] = (const uint8_t *)w->packed + (r0 + i * stride) * row_bytes;
        f[i] = _mm512_setzero_ps();
    }
    for (int64_t j0 = 0; j0 < ng; j0 += 16) {
        const int n = (int)(ng - j0 < 16 ? ng - j0 : 16);
        const __mmask16 m = (__mmask16)((1u << n) - 1);
        const __m512 d = _mm512_maskz_loadu_ps(m, x->d + j0);
        const __m512 gs = _mm512_maskz_loadu_ps(m, x->gsum + j0);
        __m512 sd[4];
#pragma GCC unroll 4
        for (int i = 0; i < nr; i++) {
            const int64_t off = (r0 + i * stride) * ng + j0;
            sd[i] = _mm512_mul_ps(scales16(w->scales, w->scale_dtype, off, n), d);
            f[i] = _mm512_fmadd_ps(scales16(w->biases, w->scale_dtype, off, n), gs, f[i]);
        }
        for (int j = 0; j < n; j++) {
            const int64_t c0 = (j0 + j) * g;
            __m512i acc[4];
#pragma GCC unroll 4
            for (int i = 0; i < nr; i++) acc[i] = _mm512_setzero_si512();
            for (int c = 0; c < g; c += 64) {
                const __m512i xa = _mm512_loadu_si512(x->v + c0 + c);
                const __m512i xb = _mm512_loadu_si512(x->v + c0 + c + 32);
#pragma GCC unroll 4
                for (int i = 0; i < nr; i++) {
                    const uint8_t *p = rp[i] + c0 + c;
                    _mm_prefetch((const char *)((uintptr_t)p + QUANT_DECODE_PREFETCH), _MM_HINT_T0);
                    const __m512i qa = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)p));
                    const __m512i qb =
                        _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(p + 32)));
                    acc[i] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(acc[i], qa, xa), qb, xb);
                }
            }
            const __m512i jj = _mm512_set1_epi32(j);
#pragma GCC unroll 4
            for (int i = 0; i < nr; i++)
                f[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[i]), _mm512_permutexvar_ps(jj, sd[i]),
                                       f[i]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++) y[i * stride] = _mm512_reduce_add_ps(f[i]);
}

void qgemv_rows_avx512(const lmc_qweight *w, int64_t r0, int nr, const qgemm_x *x, int64_t T,
                       float *y, int64_t ldy, void *scratch) {
    (void)scratch;
    if (T == 1 && w->bits == 8) {
        /* four rows a quarter of the range apart: 1.23-1.33x the one-row
         * kernel per call (alternating every 20 ms in one process) */
        const int64_t q = nr / 4;
        for (int64_t k = 0; k < q; k++) rows_q8_t1(w, r0 + k, q, 4, x, y + k);
        for (int64_t r = q * 4; r < nr; r++) rows_q8_t1(w, r0 + r, 1, 1, x, y + r);
        return;
    }
    for (int64_t t = 0; t < T; t += NT) {
        qgemm_x xt = *x;
        xt.v += t * x->ldv;
        xt.d += t * x->ldg;
        xt.gsum += t * x->ldg;
        float *yt = y + t * ldy;
        switch (T - t < NT ? T - t : NT) {
        case 1:
            rows_kernel(w, r0, nr, &xt, yt, ldy, 1);
            break;
        case 2:
            rows_kernel(w, r0, nr, &xt, yt, ldy, 2);
            break;
        case 3:
            rows_kernel(w, r0, nr, &xt, yt, ldy, 3);
            break;
        default:
            rows_kernel(w, r0, nr, &xt, yt, ldy, 4);
            break;
        }
    }
}

#else
void qgemv_rows_avx512(const lmc_qweight *w, int64_t r0, int nr, const qgemm_x *x, int64_t T,
                       float *y, int64_t ldy, void *scratch) {
    (void)w, (void)r0, (void)nr, (void)x, (void)T, (void)y, (void)ldy, (void)scratch;
}
#endif
