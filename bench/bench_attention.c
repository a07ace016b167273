/* Benchmark of decode attention (lmc_attention, one query token) over a KV
 * cache of N positions, Llama-3.2-1B's shapes by default (32 query heads,
 * 8 KV heads, head_dim 64), on the current thread count.
 *
 * GB/s counts the keys and values a call must read (2 * n_kv_heads * N *
 * head_dim * 4 bytes), divided by the time per call; times are the best of
 * repeated bursts (the machine may be shared). A layer's cache at N = 2048
 * is 8 MiB, so "cold" cycles through enough layers (> 96 MiB) that every
 * call streams from DRAM, as decode does over 16 layers.
 *
 * LMC_KV_F16=1 benchmarks an f16 cache.
 *
 * usage: bench_attention [N (default 2048)] [heads kv_heads head_dim]
 *        [seconds (default 1)] [calls (0 = by time; a fixed count for
 *        callgrind)] */
#include "base/base.h"
#include "nn/nn.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 - 0.5);
}

int main(int argc, char **argv) {
    int64_t N = argc > 1 ? atoll(argv[1]) : 2048;
    int64_t H = argc > 4 ? atoll(argv[2]) : 32, KV = argc > 4 ? atoll(argv[3]) : 8;
    int64_t hd = argc > 4 ? atoll(argv[4]) : 64;
    double secs = argc > 5 ? atof(argv[5]) : 1.0;
    long fixed = argc > 6 ? atol(argv[6]) : 0;
    if (N < 1 || H < 1 || KV < 1 || H % KV || hd < 1) {
        fprintf(stderr, "usage: bench_attention [N] [heads kv_heads head_dim] [seconds] [calls]\n");
        return 2;
    }
    /* f16 with LMC_KV_F16=1 */
    double layer_bytes = 2.0 * (double)(KV * N * hd) * (lmc_get_kv_f16() ? 2 : 4);
    int64_t layers = (int64_t)(96.0 * 1048576 / layer_bytes) + 1;
    if (fixed) layers = 1;
    lmc_kv_cache c;
    if (lmc_kv_cache_init(&c, layers, KV, hd, N + 1) != LMC_OK ||
        lmc_kv_cache_reserve(&c, N) != LMC_OK) {
        fprintf(stderr, "bench_attention: %s\n", lmc_last_error());
        return 1;
    }
    float *kv = malloc(sizeof(float) * (size_t)(KV * hd) * 2);
    float *q = malloc(sizeof(float) * (size_t)(H * hd));
    float *out = malloc(sizeof(float) * (size_t)(H * hd));
    if (!kv || !q || !out) return 1;
    for (int64_t p = 0; p < N; p++) {
        for (int64_t i = 0; i < 2 * KV * hd; i++) kv[i] = frand();
        for (int64_t l = 0; l < layers; l++) lmc_kv_cache_store(&c, l, p, kv, kv + KV * hd, 1);
    }
    c.length = N;
    for (int64_t i = 0; i < H * hd; i++) q[i] = frand();
    lmc_attention_params ap = {
        .n_heads = H, .n_kv_heads = KV, .head_dim = hd, .scale = 1.0f / 8.0f};
    if (fixed) {
        for (long r = 0; r < fixed; r++)
            if (lmc_attention(&ap, &c, 0, q, N - 1, 1, out) != LMC_OK) return 1;
        printf("%ld calls, out[0] %.6f\n", fixed, out[0]);
        return 0;
    }
    const char *names[2] = {"hot", "cold"};
    for (int cold = 0; cold < 2; cold++) {
        double best = 1e30, t_end = now_s() + secs;
        int64_t l = 0;
        while (now_s() < t_end) {
            double t0 = now_s();
            for (int r = 0; r < 16; r++) {
                if (lmc_attention(&ap, &c, cold ? l : 0, q, N - 1, 1, out) != LMC_OK) return 1;
                l = (l + 1) % layers;
            }
            double dt = (now_s() - t0) / 16;
            if (dt < best) best = dt;
        }
        printf("attention N=%lld heads %lld/%lld hd %lld %s KV threads %d %-4s: %8.1f us  %6.1f "
               "GB/s\n",
               (long long)N, (long long)H, (long long)KV, (long long)hd,
               c.dtype == LMC_DTYPE_F16 ? "f16" : "f32", lmc_get_num_threads(), names[cold],
               best * 1e6, layer_bytes / best / 1e9);
    }
    lmc_kv_cache_free(&c);
    free(kv);
    free(q);
    free(out);
    return 0;
}
