/* Attention's inner loops in generic C, and the choice of the table: the
 * AVX-512 one (attn_avx512.c) when lmc_cpu_has_avx512(), else AVX2
 * (attn_avx2.c) when the CPU has it, unless LMC_NO_SIMD is set. The generic
 * exp_sum is expf with a double sum, as lmc_softmax. */
#include "kernels/kernels.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

static inline float ld(const void *p, int64_t i, const int f16) {
    return f16 ? lmc_f16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static inline void scores_impl(const float *q, int64_t group, int64_t hd, const void *keys,
                               int64_t m, float *s, int64_t lds, const int f16) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t g = 0; g < group; g++) {
            const float *qg = q + g * hd;
            float acc = 0;
            for (int64_t d = 0; d < hd; d++) acc += qg[d] * ld(keys, i * hd + d, f16);
            s[g * lds + i] = acc;
        }
}

static void scores(const float *q, int64_t group, int64_t hd, const float *keys, int64_t m,
                   float *s, int64_t lds) {
    scores_impl(q, group, hd, keys, m, s, lds, 0);
}

static void scores_f16(const float *q, int64_t group, int64_t hd, const uint16_t *keys, int64_t m,
                       float *s, int64_t lds) {
    scores_impl(q, group, hd, keys, m, s, lds, 1);
}

static float exp_sum(float *x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    return (float)sum;
}

static inline void values_impl(const float *p, int64_t lds, int64_t group, const void *vals,
                               int64_t m, int64_t hd, float *o, const int f16) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t g = 0; g < group; g++) {
            float a = p[g * lds + i];
            float *og = o + g * hd;
            for (int64_t d = 0; d < hd; d++) og[d] += a * ld(vals, i * hd + d, f16);
        }
}

static void values(const float *p, int64_t lds, int64_t group, const float *vals, int64_t m,
                   int64_t hd, float *o) {
    values_impl(p, lds, group, vals, m, hd, o, 0);
}

static void values_f16(const float *p, int64_t lds, int64_t group, const uint16_t *vals, int64_t m,
                       int64_t hd, float *o) {
    values_impl(p, lds, group, vals, m, hd, o, 1);
}

static const lmc_attn_kernels generic_table = {"generic", scores,     exp_sum,
                                               values,    scores_f16, values_f16};

const lmc_attn_kernels *lmc_attn_kernels_generic(void) {
    return &generic_table;
}

static _Atomic(const lmc_attn_kernels *) g_table;

static const lmc_attn_kernels *cpu_choice(void) {
    const char *no = getenv("LMC_NO_SIMD");
    if (no && *no && *no != '0') return &generic_table;
    const lmc_attn_kernels *t = lmc_attn_kernels_avx512();
    if (!t) t = lmc_attn_kernels_avx2();
    return t ? t : &generic_table;
}

static void choose(void) {
    atomic_store(&g_table, cpu_choice());
}

const lmc_attn_kernels *lmc_attn_kernels_get(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    const lmc_attn_kernels *t = atomic_load_explicit(&g_table, memory_order_acquire);
    if (t) return t;
    pthread_once(&once, choose);
    return atomic_load(&g_table);
}

void lmc_attn_kernels_use(const lmc_attn_kernels *table) {
    lmc_attn_kernels_get();
    atomic_store(&g_table, table ? table : cpu_choice());
}
