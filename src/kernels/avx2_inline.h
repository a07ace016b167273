/* Small AVX2 + FMA helpers shared by the files compiled with -mavx2 -mfma
 * (attn_avx2.c, dense_avx2.c, gemm_avx2.c, quant_avx2.c, qgemm_avx2.c). */
#ifndef LMC_KERNELS_AVX2_INLINE_H
#define LMC_KERNELS_AVX2_INLINE_H

#include <immintrin.h>
#include <stdint.h>

/* exp of 8 floats: Cephes' expf polynomial after range reduction by ln 2,
 * 2^n built in the exponent bits (within 2 ulp of expf over the range;
 * below -87.3 it gives exp(-87.3), above 88.4 exp(88.4)). */
static inline __m256 lmc_exp8_avx2(__m256 x) {
    /* min and max return their second operand when one is NaN: NaN stays
     * NaN; the clamp keeps n in [-127, 128) for the exponent bits */
    x = _mm256_max_ps(_mm256_set1_ps(-87.3365447505531f),
                      _mm256_min_ps(_mm256_set1_ps(88.3762626647949f), x));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500E-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* max |x[i]| over n floats (n a multiple of 8), or -1 when one is NaN or
 * infinite: the activation quantizers' block scale. */
static inline float lmc_absmax_avx2(const float *x, int n) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 fmax = _mm256_set1_ps(3.4028234663852886e38f);
    __m256 a = _mm256_setzero_ps();
    int finite = 0xff;
    for (int i = 0; i < n; i += 8) {
        __m256 av = _mm256_and_ps(_mm256_loadu_ps(x + i), absmask);
        finite &= _mm256_movemask_ps(_mm256_cmp_ps(av, fmax, _CMP_LE_OQ));
        a = _mm256_max_ps(a, av);
    }
    if (finite != 0xff) return -1.0f;
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* The sum of the 8 int32 lanes of s. */
static inline int32_t lmc_hsum_epi32_avx2(__m256i s) {
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    return _mm_cvtsi128_si32(s4);
}

/* 8 x 8 dwords (int32 or float bits) transposed in registers: r[i] lane k
 * becomes r[k] lane i. The loops are unrolled by pragma, and so must be the
 * caller's loops that fill and store r: GCC -O2 left them rolled, with r, t
 * and u on the stack (the AVX2 prefill packs took twice as long). */
static inline __attribute__((always_inline)) void lmc_transpose8_avx2(__m256i r[8]) {
    __m256i t[8], u[8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) {
        u[4 * i] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        r[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
        r[4 + j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
    }
}

#endif
