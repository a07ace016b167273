/* AVX2 + FMA + F16C kernels. Compiled with those instructions enabled and
 * called only after lmc_kernels() checked the CPU. */
#include "kernels/kernels.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#include <math.h>

#include "kernels/avx2_inline.h"

static inline float hsum(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

static inline __m256 load_bf16(const uint16_t *p) {
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline __m256 load_f16(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* Software prefetch this far ahead of the weight stream: decode is one pass
 * over every matrix, and the hardware prefetcher alone leaves bandwidth
 * unused on 2-core machines (measured with lmc bench). */
#ifndef PREFETCH_BYTES
#define PREFETCH_BYTES 1024
#endif

static float dot_f32(const float *a, const float *b, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        _mm_prefetch((const char *)(a + i) + 2 * PREFETCH_BYTES, _MM_HINT_T0);
        _mm_prefetch((const char *)(a + i) + 2 * PREFETCH_BYTES + 64, _MM_HINT_T0);
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

#define DEFINE_DOT16(fname, LOAD, SCALAR)                                                          \
    static float fname(const uint16_t *w, const float *x, int64_t n) {                             \
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();                                 \
        __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();                                 \
        int64_t i = 0;                                                                             \
        for (; i + 32 <= n; i += 32) {                                                             \
            _mm_prefetch((const char *)(w + i) + PREFETCH_BYTES, _MM_HINT_T0);                     \
            s0 = _mm256_fmadd_ps(LOAD(w + i), _mm256_loadu_ps(x + i), s0);                         \
            s1 = _mm256_fmadd_ps(LOAD(w + i + 8), _mm256_loadu_ps(x + i + 8), s1);                 \
            s2 = _mm256_fmadd_ps(LOAD(w + i + 16), _mm256_loadu_ps(x + i + 16), s2);               \
            s3 = _mm256_fmadd_ps(LOAD(w + i + 24), _mm256_loadu_ps(x + i + 24), s3);               \
        }                                                                                          \
        for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(LOAD(w + i), _mm256_loadu_ps(x + i), s0);  \
        float s = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));               \
        for (; i < n; i++) s += SCALAR(w[i]) * x[i];                                               \
        return s;                                                                                  \
    }

DEFINE_DOT16(dot_f16, load_f16, lmc_f16_to_f32)
DEFINE_DOT16(dot_bf16, load_bf16, lmc_bf16_to_f32)

static void dot4_f32(const float *w, const float *x, int64_t ldx, int64_t n, float out[4]) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx, *x3 = x + 3 * ldx;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 wv = _mm256_loadu_ps(w + i);
        s0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x0 + i), s0);
        s1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x1 + i), s1);
        s2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x2 + i), s2);
        s3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x3 + i), s3);
    }
    out[0] = hsum(s0);
    out[1] = hsum(s1);
    out[2] = hsum(s2);
    out[3] = hsum(s3);
    for (; i < n; i++) {
        out[0] += w[i] * x0[i];
        out[1] += w[i] * x1[i];
        out[2] += w[i] * x2[i];
        out[3] += w[i] * x3[i];
    }
}

static void f16_to_f32(const uint16_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_f16(src + i));
    for (; i < n; i++) dst[i] = lmc_f16_to_f32(src[i]);
}

static void bf16_to_f32(const uint16_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_bf16(src + i));
    for (; i < n; i++) dst[i] = lmc_bf16_to_f32(src[i]);
}

static void axpy(float a, const float *x, float *y, int64_t n) {
    __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i,
                         _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

static void silu_mul(float *x, const float *u, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f), neg = _mm256_set1_ps(-0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        __m256 s = _mm256_div_ps(v, _mm256_add_ps(one, lmc_exp8_avx2(_mm256_xor_ps(v, neg))));
        if (u) s = _mm256_mul_ps(s, _mm256_loadu_ps(u + i));
        _mm256_storeu_ps(x + i, s);
    }
    for (; i < n; i++) {
        x[i] = x[i] / (1.0f + expf(-x[i]));
        if (u) x[i] *= u[i];
    }
}

static const lmc_kernel_table avx2_table = {
    .name = "avx2",
    .dot_f32 = dot_f32,
    .dot_f16 = dot_f16,
    .dot_bf16 = dot_bf16,
    .dot4_f32 = dot4_f32,
    .f16_to_f32 = f16_to_f32,
    .bf16_to_f32 = bf16_to_f32,
    .axpy = axpy,
    .silu_mul = silu_mul,
};

const lmc_kernel_table *lmc_kernels_avx2(void) {
    if (lmc_cpu_has_avx2_fma_f16c()) return &avx2_table;
    return NULL;
}
#else
const lmc_kernel_table *lmc_kernels_avx2(void) {
    return NULL;
}
#endif
