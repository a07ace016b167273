/* Peak multiply-add rate of the dot-product instructions the prefill GEMMs
 * use, measured: 16 independent accumulators (more than latency x
 * throughput on current cores) in a loop from registers, one and all
 * threads. A GEMM's GMAC/s over this figure is its share of the machine's
 * peak compute, without knowing the clock (which a virtual machine does not
 * tell) or the instruction tables.
 *
 * usage: peak_dot [seconds per case (default 0.5)] */
#include "base/base.h"
#include "kernels/kernels.h"

#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>

#define ACC 16
#define STEPS 4096 /* instructions per accumulator per timed call */

typedef enum { VPDPWSSD, VPDPBUSD, VDPBF16PS, VPMADDWD } kind;
static const char *const names[] = {"vpdpwssd zmm (int16, MLX 4/8-bit prefill)",
                                    "vpdpbusd zmm (int8)", "vdpbf16ps zmm (bf16 prefill)",
                                    "vpmaddwd+vpaddd ymm (int16, AVX2 prefill)"};
static const double macs[] = {32, 64, 32, 16}; /* multiply-adds per instruction */

static volatile int g_seed = 3;
static volatile float g_sink;

__attribute__((target("avx512f,avx512bw,avx512vnni"))) static double run_wssd(int64_t reps) {
    __m512i a[ACC], x = _mm512_set1_epi16((short)g_seed),
                    y = _mm512_set1_epi16((short)(g_seed + 1));
    for (int k = 0; k < ACC; k++) a[k] = _mm512_set1_epi32(k);
    for (int64_t r = 0; r < reps; r++)
        for (int s = 0; s < STEPS; s++)
#pragma GCC unroll 16
            for (int k = 0; k < ACC; k++) a[k] = _mm512_dpwssd_epi32(a[k], x, y);
    for (int k = 1; k < ACC; k++) a[0] = _mm512_add_epi32(a[0], a[k]);
    return (double)_mm512_reduce_add_epi32(a[0]);
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) static double run_busd(int64_t reps) {
    __m512i a[ACC], x = _mm512_set1_epi8((char)g_seed), y = _mm512_set1_epi8((char)(g_seed + 1));
    for (int k = 0; k < ACC; k++) a[k] = _mm512_set1_epi32(k);
    for (int64_t r = 0; r < reps; r++)
        for (int s = 0; s < STEPS; s++)
#pragma GCC unroll 16
            for (int k = 0; k < ACC; k++) a[k] = _mm512_dpbusd_epi32(a[k], x, y);
    for (int k = 1; k < ACC; k++) a[0] = _mm512_add_epi32(a[0], a[k]);
    return (double)_mm512_reduce_add_epi32(a[0]);
}

__attribute__((target("avx512f,avx512bw,avx512bf16"))) static double run_bf16(int64_t reps) {
    __m512 a[ACC];
    __m512bh x = (__m512bh)_mm512_set1_epi16((short)(0x3f80 + g_seed)),
             y = (__m512bh)_mm512_set1_epi16((short)0x3c00);
    for (int k = 0; k < ACC; k++) a[k] = _mm512_set1_ps((float)k);
    for (int64_t r = 0; r < reps; r++)
        for (int s = 0; s < STEPS; s++)
#pragma GCC unroll 16
            for (int k = 0; k < ACC; k++) a[k] = _mm512_dpbf16_ps(a[k], x, y);
    for (int k = 1; k < ACC; k++) a[0] = _mm512_add_ps(a[0], a[k]);
    return (double)_mm512_reduce_add_ps(a[0]);
}

__attribute__((target("avx2"))) static double run_maddwd(int64_t reps) {
    __m256i a[ACC], x = _mm256_set1_epi16((short)g_seed),
                    y = _mm256_set1_epi16((short)(g_seed + 1));
    for (int k = 0; k < ACC; k++) a[k] = _mm256_set1_epi32(k);
    for (int64_t r = 0; r < reps; r++)
        for (int s = 0; s < STEPS; s++)
#pragma GCC unroll 16
            for (int k = 0; k < ACC; k++) a[k] = _mm256_add_epi32(a[k], _mm256_madd_epi16(x, y));
    for (int k = 1; k < ACC; k++) a[0] = _mm256_add_epi32(a[0], a[k]);
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a[0]), _mm256_extracti128_si256(a[0], 1));
    return (double)_mm_cvtsi128_si32(s);
}

typedef struct job {
    kind k;
    int64_t reps;
} job;

static void body(void *ctx, int64_t b, int64_t e, int worker) {
    (void)worker;
    const job *j = ctx;
    double s = 0;
    for (int64_t i = b; i < e; i++)
        s += j->k == VPDPWSSD    ? run_wssd(j->reps)
             : j->k == VPDPBUSD  ? run_busd(j->reps)
             : j->k == VDPBF16PS ? run_bf16(j->reps)
                                 : run_maddwd(j->reps);
    g_sink = (float)s;
}

/* GMAC/s on `threads` threads (each running one copy), best of 7. */
static double rate(kind k, int threads, double seconds) {
    job j = {k, 1};
    lmc_set_num_threads(threads);
    /* calibrate: reps so that one copy takes about seconds / 5 */
    for (;;) {
        double t0 = lmc_time_now();
        body(&j, 0, 1, 0);
        double t = lmc_time_now() - t0;
        if (t > seconds / 5 || j.reps > (1 << 24)) break;
        j.reps *= 2;
    }
    double best = 1e30;
    for (int r = 0; r < 7; r++) {
        double t0 = lmc_time_now();
        /* grain 1, one index per thread: the pool runs them at once */
        lmc_parallel_for(threads, 1, body, &j);
        double t = lmc_time_now() - t0;
        if (t < best) best = t;
    }
    return (double)threads * (double)j.reps * STEPS * ACC * macs[k] / best / 1e9;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 0.5;
    if (seconds <= 0) seconds = 0.5;
    const int all = lmc_get_num_threads();
    /* the first case of a run measured up to 25% low without this: the
     * cores' clocks coming up */
    if (lmc_cpu_has_avx2_fma_f16c()) rate(VPMADDWD, all, seconds);
    printf("%-44s %14s %14s\n", "instruction", "GMAC/s 1 thr", "GMAC/s all");
    for (int k = 0; k < 4; k++) {
        bool ok = k == VPMADDWD ? lmc_cpu_has_avx2_fma_f16c() : lmc_cpu_has_avx512();
        if (!ok) {
            printf("%-44s %14s\n", names[k], "(not on this CPU)");
            continue;
        }
        double one = rate((kind)k, 1, seconds), many = rate((kind)k, all, seconds);
        printf("%-44s %14.1f %14.1f (%d threads)\n", names[k], one, many, all);
    }
    lmc_set_num_threads(0);
    return 0;
}
