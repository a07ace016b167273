/* For the AVX-512 files only (compiled with -mavx512f): group scales or
 * biases of any dtype as f32, into memory or into a register. */
#ifndef LMC_KERNELS_SCALES_AVX512_H
#define LMC_KERNELS_SCALES_AVX512_H

#include "kernels/quant_internal.h"

#include <immintrin.h>

static inline void load_scales_avx512(const void *p, lmc_dtype dt, int64_t off, int n, float *out) {
    int i = 0;
    if (dt == LMC_DTYPE_BF16) {
        const uint16_t *s = (const uint16_t *)p + off;
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(
                out + i,
                _mm512_castsi512_ps(_mm512_slli_epi32(
                    _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(s + i))), 16)));
    } else if (dt == LMC_DTYPE_F16) {
        const uint16_t *s = (const uint16_t *)p + off;
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(out + i,
                             _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + i))));
    }
    for (; i < n; i++) out[i] = quant_load_scale(p, dt, off + i);
}

/* n <= 16 group scales (or biases) from element off of p as f32; lanes past
 * n are 0. */
static inline __m512 scales16(const void *p, lmc_dtype dt, int64_t off, int n) {
    const __mmask16 m = (__mmask16)((1u << n) - 1);
    if (dt == LMC_DTYPE_F32) return _mm512_maskz_loadu_ps(m, (const float *)p + off);
    const __m256i v = _mm256_maskz_loadu_epi16(m, (const uint16_t *)p + off);
    if (dt == LMC_DTYPE_F16) return _mm512_cvtph_ps(v);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

#endif
