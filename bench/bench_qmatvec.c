/* Benchmark of lmc_qmatmul on MLX affine quantized weights.
 *
 * GB/s counts the bytes a call must read from the weight: packed words +
 * scales + biases (lmc_qweight_nbytes), divided by the time per call.
 * "hot" repeats one matrix (it may sit in L2/L3); "cold" cycles through
 * copies totalling > 96 MiB so every call streams from DRAM. Times are the
 * best of repeated bursts (the machine may be shared). A plain read
 * of a 256 MiB buffer gives the machine's streaming bandwidth for reference.
 *
 * usage: bench_qmatvec [seconds-per-case (default 1)]
 *        bench_qmatvec ab [rounds (default 5)]: the decode matvec (4 and 8
 *        bits, T = 1, cold) on the AVX-512 and the AVX2 kernels, alternating,
 *        with the ratio of each round (machines are noisy: compare in one run) */
#include "kernels/gemm_internal.h"
#include "kernels/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bmat {
    lmc_qweight w;
    uint32_t *packed;
    uint16_t *scales, *biases;
} bmat;

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 - 0.5);
}

static int bmat_make(bmat *m, int64_t rows, int64_t cols, int bits, int group) {
    float *w = malloc(sizeof(float) * (size_t)(rows * cols));
    m->packed = lmc_alloc_aligned((size_t)(rows * cols * bits / 8));
    m->scales = lmc_alloc_aligned((size_t)(rows * cols / group) * 2);
    m->biases = lmc_alloc_aligned((size_t)(rows * cols / group) * 2);
    if (!w || !m->packed || !m->scales || !m->biases) return -1;
    for (int64_t i = 0; i < rows * cols; i++) w[i] = frand() * 0.1f;
    if (lmc_quantize_affine(w, rows, cols, bits, group, LMC_DTYPE_F16, m->packed, m->scales,
                            m->biases) != LMC_OK)
        return -1;
    free(w);
    lmc_qweight q = {.packed = m->packed,
                     .scales = m->scales,
                     .biases = m->biases,
                     .scale_dtype = LMC_DTYPE_F16,
                     .bits = bits,
                     .group_size = group,
                     .rows = rows,
                     .cols = cols};
    m->w = q;
    return 0;
}

static void bmat_free(bmat *m) {
    lmc_free_aligned(m->packed), lmc_free_aligned(m->scales), lmc_free_aligned(m->biases);
}

/* Seconds per call, cycling through n matrices: the best of repeated bursts
 * of n calls within the budget (the machine is shared, so the minimum is the
 * uncontended figure). */
static double time_calls(bmat *ms, int n, const float *x, int64_t T, float *y, double budget) {
    for (int i = 0; i < n; i++) lmc_qmatmul(&ms[i].w, x, T, y); /* warm up */
    double best = 1e30, tend = lmc_time_now() + budget;
    do {
        int reps = n < 4 ? 4 / n : 1;
        double t0 = lmc_time_now();
        for (int r = 0; r < reps; r++)
            for (int i = 0; i < n; i++) lmc_qmatmul(&ms[i].w, x, T, y);
        double t = (lmc_time_now() - t0) / (double)(reps * n);
        if (t < best) best = t;
    } while (lmc_time_now() < tend);
    return best;
}

typedef struct sum_ctx {
    const uint64_t *p;
    uint64_t out[256];
} sum_ctx;

static void sum_body(void *c, int64_t b, int64_t e, int worker) {
    sum_ctx *s = c;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (int64_t i = b * 1024; i < e * 1024; i += 4)
        a0 += s->p[i], a1 += s->p[i + 1], a2 += s->p[i + 2], a3 += s->p[i + 3];
    s->out[worker & 255] += a0 + a1 + a2 + a3;
}

static double stream_read_gbs(int threads) {
    size_t bytes = (size_t)256 << 20;
    uint64_t *buf = lmc_alloc_aligned(bytes);
    if (!buf) return 0;
    memset(buf, 1, bytes);
    lmc_set_num_threads(threads);
    sum_ctx s = {.p = buf};
    int64_t blocks = (int64_t)(bytes / 8 / 1024);
    lmc_parallel_for(blocks, 64, sum_body, &s);
    double best = 1e9;
    for (int k = 0; k < 5; k++) {
        double t0 = lmc_time_now();
        lmc_parallel_for(blocks, 64, sum_body, &s);
        double t = lmc_time_now() - t0;
        if (t < best) best = t;
    }
    lmc_free_aligned(buf);
    return (double)bytes / best / 1e9;
}

static int run_ab(int rounds) {
    if (!gemm_isa_force(GEMM_AVX512)) {
        printf("no AVX-512 here (or LMC_NO_AVX512): nothing to compare\n");
        return 0;
    }
    static const int64_t shapes[][2] = {{2048, 2048}, {8192, 2048}, {2048, 8192}};
    float *x = malloc(sizeof(float) * 8192), *y = malloc(sizeof(float) * 8192);
    for (int i = 0; i < 8192; i++) x[i] = frand();
    lmc_set_num_threads(1);
    printf("%-4s %-11s %-5s %9s %9s %7s\n", "bits", "rows x cols", "round", "avx512", "avx2",
           "ratio");
    for (int bits = 4; bits <= 8; bits += 4)
        for (int si = 0; si < 3; si++) {
            int64_t rows = shapes[si][0], cols = shapes[si][1];
            bmat one;
            if (bmat_make(&one, rows, cols, bits, 64) != 0) return 1;
            uint64_t nb = lmc_qweight_nbytes(&one.w);
            int ncold = (int)((256ull << 20) / nb) + 1;
            bmat *cold = calloc((size_t)ncold, sizeof(bmat));
            cold[0] = one;
            for (int i = 1; i < ncold; i++)
                if (bmat_make(&cold[i], rows, cols, bits, 64) != 0) return 1;
            for (int r = 0; r < rounds; r++) {
                double t[2];
                for (int k = 0; k < 2; k++) {
                    int isa = (r & 1) ^ k ? GEMM_AVX2 : GEMM_AVX512; /* order alternates */
                    gemm_isa_force(isa);
                    t[isa == GEMM_AVX2] = time_calls(cold, ncold, x, 1, y, 0.3);
                }
                printf("%-4d %5lldx%-5lld %-5d %9.2f %9.2f %7.3f\n", bits, (long long)rows,
                       (long long)cols, r, (double)nb / t[0] / 1e9, (double)nb / t[1] / 1e9,
                       t[1] / t[0]);
            }
            for (int i = 0; i < ncold; i++) bmat_free(&cold[i]);
            free(cold);
        }
    gemm_isa_force(-1);
    free(x), free(y);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "ab")) return run_ab(argc > 2 ? atoi(argv[2]) : 5);
    double budget = argc > 1 ? atof(argv[1]) : 1.0;
    if (budget <= 0) budget = 1.0;
    printf("streaming read of 256 MiB: %.1f GB/s (1 thread), %.1f GB/s (2 threads)\n",
           stream_read_gbs(1), stream_read_gbs(2));
    static const int64_t shapes[][2] = {{2048, 2048}, {2048, 5632}, {5632, 2048}};
    static const int bitss[] = {4, 8};
    static const int64_t Ts[] = {1, 16};
    printf("%-5s %-11s %-3s %-4s %-7s %-5s %10s %9s\n", "bits", "rows x cols", "T", "thr", "kernel",
           "cache", "ms/call", "GB/s");
    float *x = malloc(sizeof(float) * 16 * 5632), *y = malloc(sizeof(float) * 16 * 5632);
    for (int i = 0; i < 16 * 5632; i++) x[i] = frand();
    for (int bi = 0; bi < 2; bi++)
        for (int si = 0; si < 3; si++) {
            int bits = bitss[bi];
            int64_t rows = shapes[si][0], cols = shapes[si][1];
            bmat one;
            if (bmat_make(&one, rows, cols, bits, 64) != 0) return 1;
            uint64_t nb = lmc_qweight_nbytes(&one.w);
            int ncold = (int)((96ull << 20) / nb) + 1;
            bmat *cold = calloc((size_t)ncold, sizeof(bmat));
            cold[0] = one;
            for (int i = 1; i < ncold; i++)
                if (bmat_make(&cold[i], rows, cols, bits, 64) != 0) return 1;
            for (int ti = 0; ti < 2; ti++)
                for (int threads = 1; threads <= 2; threads++)
                    for (int simd = 1; simd >= 0; simd--) {
                        if (!simd && (threads != 1 || ti != 0)) continue;
                        if (!lmc_quant_use_simd(simd) && simd) continue;
                        lmc_set_num_threads(threads);
                        for (int c = 0; c < 2; c++) {
                            double s = c ? time_calls(cold, ncold, x, Ts[ti], y, budget)
                                         : time_calls(&one, 1, x, Ts[ti], y, budget);
                            printf("%-5d %5lldx%-5lld %-3lld %-4d %-7s %-5s %10.3f %9.2f\n", bits,
                                   (long long)rows, (long long)cols, (long long)Ts[ti], threads,
                                   simd ? "avx2" : "generic", c ? "cold" : "hot", s * 1e3,
                                   (double)nb / s / 1e9);
                        }
                    }
            for (int i = 0; i < ncold; i++) bmat_free(&cold[i]);
            free(cold);
        }
    free(x), free(y);
    return 0;
}
