/* exp of 8 floats in AVX2 + FMA: Cephes' expf polynomial after range
 * reduction by ln 2, 2^n built in the exponent bits (within 2 ulp of expf
 * over the range; below -87.3 it gives exp(-87.3), above 88.4 exp(88.4)).
 * For files compiled with -mavx2 -mfma (attn_avx2.c, dense_avx2.c). */
#ifndef LMC_KERNELS_EXP_AVX2_H
#define LMC_KERNELS_EXP_AVX2_H

#include <immintrin.h>

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

#endif
