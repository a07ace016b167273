/* AVX-512 tiles of the dense prefill GEMM (gemm_internal.h): 32 weight rows
 * (two zmm of 16) x 6 tokens per kernel step.
 * - f32: the tile is converted to f32, [k][32 rows]; one FMA per k-step and
 *   row vector with the token's broadcast x.
 * - bf16 (fast path): the tile keeps the file's bf16, [k/2][32 rows] pairs
 *   (one dword per row), and vdpbf16ps adds both products of a pair with the
 *   token's two broadcast bf16 activations into f32 lanes.
 * Called only when lmc_cpu_has_avx512(). */
#include "kernels/gemm_internal.h"

#if defined(__AVX512F__) && defined(__AVX512BF16__)
#include <immintrin.h>

#define MR GEMM_MR_AVX512
#define NT 6

static void pack_f32(const void *w, lmc_dtype dt, int64_t cols, int64_t r0, int nr, int64_t k0,
                     int64_t kc, float *wt) {
    if (nr < MR) memset(wt, 0, (size_t)kc * MR * 4);
    _Alignas(64) float tmp[16];
    for (int i = 0; i < nr; i++) {
        const int64_t off = (r0 + i) * cols + k0;
        for (int64_t k = 0; k < kc; k += 16) {
            __m512 v;
            if (dt == LMC_DTYPE_F32)
                v = _mm512_loadu_ps((const float *)w + off + k);
            else if (dt == LMC_DTYPE_F16)
                v = _mm512_cvtph_ps(
                    _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + off + k)));
            else
                v = _mm512_castsi512_ps(
                    _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(
                                          (const __m256i *)((const uint16_t *)w + off + k))),
                                      16));
            _mm512_store_ps(tmp, v);
            for (int m = 0; m < 16; m++) wt[(k + m) * MR + i] = tmp[m];
        }
    }
}

static inline __attribute__((always_inline)) void
kernel_f32(const float *wt, int64_t kc, const float *x, int64_t ldx, float *acc, const int nt) {
    __m512 f0[NT], f1[NT];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        f0[t] = _mm512_load_ps(acc + t * MR);
        f1[t] = _mm512_load_ps(acc + t * MR + 16);
    }
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; k++) {
        const __m512 w0 = _mm512_load_ps(wt + k * MR), w1 = _mm512_load_ps(wt + k * MR + 16);
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const __m512 xx = _mm512_set1_ps(x[t * ldx + k]);
            f0[t] = _mm512_fmadd_ps(w0, xx, f0[t]);
            f1[t] = _mm512_fmadd_ps(w1, xx, f1[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        _mm512_store_ps(acc + t * MR, f0[t]);
        _mm512_store_ps(acc + t * MR + 16, f1[t]);
    }
}

void gemm_tile_f32_avx512(const void *w, lmc_dtype dt, int64_t cols, int64_t r0, int nr,
                          const float *x, int64_t T, float *y, int64_t ldy, void *scratch) {
    float *wt = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    float *acc = wt + MR * GEMM_KC;
    memset(acc, 0, (size_t)T * MR * sizeof(float));
    int64_t k0 = 0;
    for (; k0 + 16 <= cols; k0 += GEMM_KC) {
        int64_t kc = cols - k0 < GEMM_KC ? cols - k0 : GEMM_KC;
        kc &= ~(int64_t)15;
        pack_f32(w, dt, cols, r0, nr, k0, kc, wt);
        gemm_prefetch_next(w, lmc_dtype_size(dt), cols, r0, nr, MR, k0, kc);
        int64_t t = 0;
        for (; t + NT <= T; t += NT) kernel_f32(wt, kc, x + t * cols + k0, cols, acc + t * MR, NT);
        switch (T - t) {
        case 5:
            kernel_f32(wt, kc, x + t * cols + k0, cols, acc + t * MR, 5);
            break;
        case 4:
            kernel_f32(wt, kc, x + t * cols + k0, cols, acc + t * MR, 4);
            break;
        case 3:
            kernel_f32(wt, kc, x + t * cols + k0, cols, acc + t * MR, 3);
            break;
        case 2:
            kernel_f32(wt, kc, x + t * cols + k0, cols, acc + t * MR, 2);
            break;
        case 1:
            kernel_f32(wt, kc, x + t * cols + k0, cols, acc + t * MR, 1);
            break;
        default:
            break;
        }
        if (kc < GEMM_KC) {
            k0 += kc;
            break;
        }
    }
    /* columns past the last multiple of 16 */
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

/* ---- bf16 ---- */

static void pack_bf16(const uint16_t *w, int64_t cols, int64_t r0, int nr, int64_t k0, int64_t kc,
                      uint32_t *wt) {
    if (nr < MR) memset(wt, 0, (size_t)kc / 2 * MR * 4);
    for (int i = 0; i < nr; i++) {
        const uint16_t *src = w + (r0 + i) * cols + k0;
        for (int64_t p = 0; p < kc / 2; p++) {
            uint32_t v;
            memcpy(&v, src + 2 * p, 4);
            wt[p * MR + i] = v;
        }
    }
}

static inline __attribute__((always_inline)) void kernel_bf16(const uint32_t *wt, int64_t np,
                                                              const uint16_t *xb, int64_t ldx,
                                                              float *acc, const int nt) {
    __m512 f0[NT], f1[NT];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        f0[t] = _mm512_load_ps(acc + t * MR);
        f1[t] = _mm512_load_ps(acc + t * MR + 16);
    }
#pragma GCC unroll 4
    for (int64_t p = 0; p < np; p++) {
        const __m512bh w0 = (__m512bh)_mm512_load_si512((const void *)(wt + p * MR));
        const __m512bh w1 = (__m512bh)_mm512_load_si512((const void *)(wt + p * MR + 16));
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            int32_t xi;
            memcpy(&xi, xb + t * ldx + 2 * p, 4);
            const __m512bh xx = (__m512bh)_mm512_set1_epi32(xi);
            f0[t] = _mm512_dpbf16_ps(f0[t], w0, xx);
            f1[t] = _mm512_dpbf16_ps(f1[t], w1, xx);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        _mm512_store_ps(acc + t * MR, f0[t]);
        _mm512_store_ps(acc + t * MR + 16, f1[t]);
    }
}

void gemm_tile_bf16_avx512(const uint16_t *w, int64_t cols, int64_t r0, int nr, const uint16_t *xb,
                           int64_t T, float *y, int64_t ldy, void *scratch) {
    uint32_t *wt = (uint32_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    float *acc = (float *)(wt + MR * GEMM_KC / 2);
    memset(acc, 0, (size_t)T * MR * sizeof(float));
    int64_t k0 = 0;
    for (; k0 + 2 <= cols; k0 += GEMM_KC) {
        int64_t kc = cols - k0 < GEMM_KC ? cols - k0 : GEMM_KC;
        kc &= ~(int64_t)1;
        pack_bf16(w, cols, r0, nr, k0, kc, wt);
        gemm_prefetch_next(w, 2, cols, r0, nr, MR, k0, kc);
        const int64_t np = kc / 2;
        int64_t t = 0;
        for (; t + NT <= T; t += NT)
            kernel_bf16(wt, np, xb + t * cols + k0, cols, acc + t * MR, NT);
        switch (T - t) {
        case 5:
            kernel_bf16(wt, np, xb + t * cols + k0, cols, acc + t * MR, 5);
            break;
        case 4:
            kernel_bf16(wt, np, xb + t * cols + k0, cols, acc + t * MR, 4);
            break;
        case 3:
            kernel_bf16(wt, np, xb + t * cols + k0, cols, acc + t * MR, 3);
            break;
        case 2:
            kernel_bf16(wt, np, xb + t * cols + k0, cols, acc + t * MR, 2);
            break;
        case 1:
            kernel_bf16(wt, np, xb + t * cols + k0, cols, acc + t * MR, 1);
            break;
        default:
            break;
        }
        if (kc < GEMM_KC) {
            k0 += kc;
            break;
        }
    }
    for (int64_t t = 0; t < T; t++)
        for (int i = 0; i < nr; i++) {
            float s = acc[t * MR + i];
            if (k0 < cols) /* an odd last column */
                s += lmc_bf16_to_f32(w[(r0 + i) * cols + k0]) * lmc_bf16_to_f32(xb[t * cols + k0]);
            y[t * ldy + i] = s;
        }
}

/* ---- bf16 decode: rows [r0, r0+nr) dotted with up to 3 bf16 tokens ---- */
/* Two or three tokens: one row at a time. */

static inline __attribute__((always_inline)) void gemv_rows(const uint16_t *w, int64_t cols,
                                                            int64_t r0, int nr, const uint16_t *xb,
                                                            float *y, int64_t ldy, const int nt) {
    for (int i = 0; i < nr; i++) {
        const uint16_t *wr = w + (r0 + i) * cols;
        __m512 a[3][2];
#pragma GCC unroll 3
        for (int t = 0; t < nt; t++) a[t][0] = a[t][1] = _mm512_setzero_ps();
        int64_t c = 0;
        for (; c + 64 <= cols; c += 64) {
            _mm_prefetch((const char *)((uintptr_t)(wr + c) + QUANT_DECODE_PREFETCH), _MM_HINT_T0);
            _mm_prefetch((const char *)((uintptr_t)(wr + c) + QUANT_DECODE_PREFETCH + 64),
                         _MM_HINT_T0);
            const __m512bh w0 = (__m512bh)_mm512_loadu_si512((const void *)(wr + c));
            const __m512bh w1 = (__m512bh)_mm512_loadu_si512((const void *)(wr + c + 32));
#pragma GCC unroll 3
            for (int t = 0; t < nt; t++) {
                const uint16_t *xt = xb + t * cols + c;
                a[t][0] = _mm512_dpbf16_ps(a[t][0], w0, (__m512bh)_mm512_loadu_si512(xt));
                a[t][1] = _mm512_dpbf16_ps(a[t][1], w1, (__m512bh)_mm512_loadu_si512(xt + 32));
            }
        }
#pragma GCC unroll 3
        for (int t = 0; t < nt; t++) {
            float s = _mm512_reduce_add_ps(_mm512_add_ps(a[t][0], a[t][1]));
            for (int64_t k = c; k < cols; k++)
                s += lmc_bf16_to_f32(wr[k]) * lmc_bf16_to_f32(xb[t * cols + k]);
            y[t * ldy + i] = s;
        }
    }
}

void gemv_bf16_avx512(const uint16_t *w, int64_t cols, int64_t r0, int nr, const uint16_t *xb,
                      int64_t T, float *y, int64_t ldy) {
    for (int64_t t = 0; t < T; t += 3) {
        const int64_t n = T - t < 3 ? T - t : 3;
        if (n == 3)
            gemv_rows(w, cols, r0, nr, xb + t * cols, y + t * ldy, ldy, 3);
        else if (n == 2)
            gemv_rows(w, cols, r0, nr, xb + t * cols, y + t * ldy, ldy, 2);
        else
            gemv_rows(w, cols, r0, nr, xb + t * cols, y + t * ldy, ldy, 1);
    }
}

#else
void gemv_bf16_avx512(const uint16_t *w, int64_t cols, int64_t r0, int nr, const uint16_t *xb,
                      int64_t T, float *y, int64_t ldy) {
    (void)w, (void)cols, (void)r0, (void)nr, (void)xb, (void)T, (void)y, (void)ldy;
}
void gemm_tile_f32_avx512(const void *w, lmc_dtype dt, int64_t cols, int64_t r0, int nr,
                          const float *x, int64_t T, float *y, int64_t ldy, void *scratch) {
    (void)w, (void)dt, (void)cols, (void)r0, (void)nr, (void)x, (void)T, (void)y, (void)ldy,
        (void)scratch;
}
void gemm_tile_bf16_avx512(const uint16_t *w, int64_t cols, int64_t r0, int nr, const uint16_t *xb,
                           int64_t T, float *y, int64_t ldy, void *scratch) {
    (void)w, (void)cols, (void)r0, (void)nr, (void)xb, (void)T, (void)y, (void)ldy, (void)scratch;
}
#endif
