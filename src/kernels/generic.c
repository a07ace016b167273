/* Generic C kernels: the reference path, and the fallback on CPUs without
 * AVX2. Written so compilers can vectorize them. */
#include "kernels/kernels.h"

#include <math.h>

#include <string.h>

static float dot_f32(const float *a, const float *b, int64_t n) {
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) acc[k] += a[i + k] * b[i + k];
    float s = 0;
    for (; i < n; i++) s += a[i] * b[i];
    for (int k = 0; k < 8; k++) s += acc[k];
    return s;
}

static float dot_f16(const uint16_t *w, const float *x, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += lmc_f16_to_f32(w[i]) * x[i];
    return s;
}

static float dot_bf16(const uint16_t *w, const float *x, int64_t n) {
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) acc[k] += lmc_bf16_to_f32(w[i + k]) * x[i + k];
    float s = 0;
    for (; i < n; i++) s += lmc_bf16_to_f32(w[i]) * x[i];
    for (int k = 0; k < 8; k++) s += acc[k];
    return s;
}

static void dot4_f32(const float *w, const float *x, int64_t ldx, int64_t n, float out[4]) {
    for (int t = 0; t < 4; t++) out[t] = dot_f32(w, x + t * ldx, n);
}

static void f16_to_f32(const uint16_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = lmc_f16_to_f32(src[i]);
}

static void bf16_to_f32(const uint16_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = lmc_bf16_to_f32(src[i]);
}

static void axpy(float a, const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

static void silu_mul(float *x, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = x[i] / (1.0f + expf(-x[i]));
    if (u)
        for (int64_t i = 0; i < n; i++) x[i] *= u[i];
}

static const lmc_kernel_table generic_table = {
    .name = "generic",
    .dot_f32 = dot_f32,
    .dot_f16 = dot_f16,
    .dot_bf16 = dot_bf16,
    .dot4_f32 = dot4_f32,
    .f16_to_f32 = f16_to_f32,
    .bf16_to_f32 = bf16_to_f32,
    .axpy = axpy,
    .silu_mul = silu_mul,
};

const lmc_kernel_table *lmc_kernels_generic(void) {
    return &generic_table;
}
