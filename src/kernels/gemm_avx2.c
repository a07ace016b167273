/* AVX2 tile of the dense prefill GEMM (gemm_internal.h): 16 weight rows (two
 * ymm of 8) x 6 tokens per kernel step, the tile converted to f32
 * ([k][16 rows]), one FMA per k-step and row vector with the token's
 * broadcast x: 12 accumulators, 2 rows and a broadcast fill the 16 ymm (with
 * 4 tokens, 8 chains of 4-cycle FMAs left the two FMA pipes short). */
#include "kernels/gemm_internal.h"
#include "kernels/quant_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include "kernels/avx2_inline.h"

#define MR GEMM_MR_AVX2
#define NT 6

/* the 8 weights from index off on, as f32 */
static inline __attribute__((always_inline)) __m256 load8(const void *w, lmc_dtype dt,
                                                          int64_t off) {
    if (dt == LMC_DTYPE_F32) return _mm256_loadu_ps((const float *)w + off);
    const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + off));
    if (dt == LMC_DTYPE_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* The chunk's rows as [k][MR] f32: 8 rows x 8 columns at a time, converted
 * and transposed in registers (a scalar store per weight cost the tile
 * about a tenth of its time at 128 tokens). */
static void pack_f32(const void *w, lmc_dtype dt, int64_t cols, int64_t r0, int nr, int64_t k0,
                     int64_t kc, float *wt) {
    for (int half = 0; half < MR / 8; half++)
        for (int64_t k = 0; k < kc; k += 8) {
            __m256i r[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) {
                const int row = half * 8 + i;
                r[i] = row < nr ? _mm256_castps_si256(load8(w, dt, (r0 + row) * cols + k0 + k))
                                : _mm256_setzero_si256();
            }
            lmc_transpose8_avx2(r);
#pragma GCC unroll 8
            for (int m = 0; m < 8; m++)
                _mm256_store_si256((__m256i *)(wt + (k + m) * MR + half * 8), r[m]);
        }
}

static inline __attribute__((always_inline)) void
kernel_f32(const float *wt, int64_t kc, const float *x, int64_t ldx, float *acc, const int nt) {
    __m256 f0[NT], f1[NT];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        f0[t] = _mm256_load_ps(acc + t * MR);
        f1[t] = _mm256_load_ps(acc + t * MR + 8);
    }
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; k++) {
        const __m256 w0 = _mm256_load_ps(wt + k * MR), w1 = _mm256_load_ps(wt + k * MR + 8);
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const __m256 xx = _mm256_broadcast_ss(x + t * ldx + k);
            f0[t] = _mm256_fmadd_ps(w0, xx, f0[t]);
            f1[t] = _mm256_fmadd_ps(w1, xx, f1[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        _mm256_store_ps(acc + t * MR, f0[t]);
        _mm256_store_ps(acc + t * MR + 8, f1[t]);
    }
}

void gemm_tile_f32_avx2(const void *w, lmc_dtype dt, int64_t cols, int64_t r0, int nr,
                        const float *x, int64_t T, float *y, int64_t ldy, void *scratch) {
    float *wt = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    float *acc = wt + MR * GEMM_KC;
    memset(acc, 0, (size_t)T * MR * sizeof(float));
    int64_t k0 = 0;
    for (; k0 + 8 <= cols; k0 += GEMM_KC) {
        int64_t kc = cols - k0 < GEMM_KC ? cols - k0 : GEMM_KC;
        kc &= ~(int64_t)7;
        pack_f32(w, dt, cols, r0, nr, k0, kc, wt);
        gemm_prefetch_next(w, lmc_dtype_size(dt), cols, r0, nr, MR, k0, kc);
        int64_t t = 0;
        for (; t + NT <= T; t += NT) kernel_f32(wt, kc, x + t * cols + k0, cols, acc + t * MR, NT);
        /* the rest 4, 2, 1 at a time: a constant count each, so the loops unroll */
        for (; t + 4 <= T; t += 4) kernel_f32(wt, kc, x + t * cols + k0, cols, acc + t * MR, 4);
        for (; t + 2 <= T; t += 2) kernel_f32(wt, kc, x + t * cols + k0, cols, acc + t * MR, 2);
        for (; t < T; t++) kernel_f32(wt, kc, x + t * cols + k0, cols, acc + t * MR, 1);
        if (kc < GEMM_KC) {
            k0 += kc;
            break;
        }
    }
    for (int64_t t = 0; t < T; t++)
        for (int i = 0; i < nr; i++) {
            float s = 0;
            for (int64_t k = k0; k < cols; k++) {
                const int64_t o = (r0 + i) * cols + k;
                float wv = dt == LMC_DTYPE_F32   ? ((const float *)w)[o]
                           : dt == LMC_DTYPE_F16 ? lmc_f16_to_f32(((const uint16_t *)w)[o])
                                                 : lmc_bf16_to_f32(((const uint16_t *)w)[o]);
                s += wv * x[t * cols + k];
            }
            y[t * ldy + i] = acc[t * MR + i] + s;
        }
}

/* One token, rows r0 + i * stride (i < nr <= 4) at once: each row is a
 * sequential stream of its own, prefetched QUANT_DECODE_PREFETCH bytes
 * ahead, and each load of x serves every row. */
static inline __attribute__((always_inline)) void gemv_rows4(const void *w, const lmc_dtype dt,
                                                             int64_t cols, int64_t r0,
                                                             int64_t stride, const int nr,
                                                             const float *x, float *y) {
    const size_t es = dt == LMC_DTYPE_F32 ? 4 : 2;
    const uint8_t *wr[4];
    __m256 a[4][2];
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++) {
        wr[i] = (const uint8_t *)w + (size_t)(r0 + i * stride) * (size_t)cols * es;
        a[i][0] = a[i][1] = _mm256_setzero_ps();
    }
    int64_t c = 0;
    for (; c + 32 <= cols; c += 32) {
#pragma GCC unroll 4
        for (int i = 0; i < nr; i++) {
            const uint8_t *p = wr[i] + (size_t)c * es + QUANT_DECODE_PREFETCH;
            _mm_prefetch((const char *)p, _MM_HINT_T0);
            if (es == 4) _mm_prefetch((const char *)p + 64, _MM_HINT_T0);
        }
#pragma GCC unroll 4
        for (int k = 0; k < 32; k += 8) {
            const __m256 xv = _mm256_loadu_ps(x + c + k);
#pragma GCC unroll 4
            for (int i = 0; i < nr; i++)
                a[i][k / 8 % 2] = _mm256_fmadd_ps(load8(wr[i], dt, c + k), xv, a[i][k / 8 % 2]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++) {
        __m256 v = _mm256_add_ps(a[i][0], a[i][1]);
        __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        h = _mm_add_ss(h, _mm_movehdup_ps(h));
        float s = _mm_cvtss_f32(h);
        for (int64_t k = c; k < cols; k++) {
            const uint8_t *q = wr[i] + (size_t)k * es;
            s += x[k] * (dt == LMC_DTYPE_F32   ? *(const float *)q
                         : dt == LMC_DTYPE_F16 ? lmc_f16_to_f32(*(const uint16_t *)q)
                                               : lmc_bf16_to_f32(*(const uint16_t *)q));
        }
        y[i * stride] = s;
    }
}

static inline __attribute__((always_inline)) void gemv_rows(const void *w, const lmc_dtype dt,
                                                            int64_t cols, int64_t r0, int nr,
                                                            const float *x, float *y) {
    /* four rows a quarter of the range apart, then the rest one by one */
    const int64_t q = nr / 4;
    for (int64_t k = 0; k < q; k++) gemv_rows4(w, dt, cols, r0 + k, q, 4, x, y + k);
    for (int64_t r = q * 4; r < nr; r++) gemv_rows4(w, dt, cols, r0 + r, 1, 1, x, y + r);
}

void gemv_dense_avx2(const void *w, lmc_dtype dt, int64_t cols, int64_t r0, int nr, const float *x,
                     float *y) {
    if (dt == LMC_DTYPE_BF16)
        gemv_rows(w, LMC_DTYPE_BF16, cols, r0, nr, x, y);
    else if (dt == LMC_DTYPE_F16)
        gemv_rows(w, LMC_DTYPE_F16, cols, r0, nr, x, y);
    else
        gemv_rows(w, LMC_DTYPE_F32, cols, r0, nr, x, y);
}

#else
void gemv_dense_avx2(const void *w, lmc_dtype dt, int64_t cols, int64_t r0, int nr, const float *x,
                     float *y) {
    (void)w, (void)dt, (void)cols, (void)r0, (void)nr, (void)x, (void)y;
}
void gemm_tile_f32_avx2(const void *w, lmc_dtype dt, int64_t cols, int64_t r0, int nr,
                        const float *x, int64_t T, float *y, int64_t ldy, void *scratch) {
    (void)w, (void)dt, (void)cols, (void)r0, (void)nr, (void)x, (void)T, (void)y, (void)ldy,
        (void)scratch;
}
#endif
