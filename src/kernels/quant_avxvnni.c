/* The one-token 4- and 8-bit decode kernels of quant_rows_avx2.h with the
 * integer dot products of AVX-VNNI: vpdpbusd (u8 x s8, 4 products summed
 * into each int32 lane and added to it, no saturation) in place of
 * vpmaddubsw + vpmaddwd + vpaddd. For CPUs with AVX2 and AVX-VNNI but not
 * AVX-512 (Intel Alder Lake and later cores, AMD Zen 5 without AVX-512):
 * quant.c calls them only when lmc_cpu_has_avxvnni() and the GEMM level is
 * AVX2. Per 64 4-bit weights and row: 4 dot products and a shift where
 * AVX2 takes 9; per 32 8-bit weights: 2 and 1 where it takes 10, as
 * u8 q times s8 digit cannot saturate here (no q - 128 offset). */
#include "kernels/quant_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && defined(__AVXVNNI__)

#include <immintrin.h>

/* 128 H + L: H summed first, shifted, then L's products added into it
 * (|.| <= 8 * 15 * 16320 per lane) */
static inline __m256i qr_q4_dot(__m256i lo, __m256i hi, __m256i h0, __m256i h1, __m256i l0,
                                __m256i l1) {
    __m256i h = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), lo, h0);
    h = _mm256_dpbusd_avx_epi32(h, hi, h1);
    __m256i s = _mm256_dpbusd_avx_epi32(_mm256_slli_epi32(h, 7), lo, l0);
    return _mm256_dpbusd_avx_epi32(s, hi, l1);
}

/* sum q v over 4 columns per lane, q in [0, 255]: |.| <= 4 * 255 * 16320 */
static inline __m256i qr_q8_dot(__m256i v, __m256i xh, __m256i xl) {
    __m256i h = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), v, xh);
    return _mm256_dpbusd_avx_epi32(_mm256_slli_epi32(h, 7), v, xl);
}
#define QR_Q8_OFFSET 0
#define QR_NAME(f) f##_avxvnni
#include "kernels/quant_rows_avx2.h"

#else /* no AVX-VNNI at compile time: never called (lmc_cpu_has_avxvnni is false) */
void quant_matvec_q4_rows_avxvnni(const lmc_qweight *w, int64_t r0, int64_t r1, const quant_qx *x,
                                  float *y) {
    (void)w, (void)r0, (void)r1, (void)x, (void)y;
}
void quant_matvec_q8_rows_avxvnni(const lmc_qweight *w, int64_t r0, int64_t r1, const quant_qx *x,
                                  float *y) {
    (void)w, (void)r0, (void)r1, (void)x, (void)y;
}
#endif
