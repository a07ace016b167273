/* Memory read bandwidth of this machine: all threads sum a buffer much
 * larger than the caches, best of several passes. The decode-speed limit
 * of a model is this figure divided by the bytes read per token. */
#include "base/base.h"

#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct job {
    const float *data;
    double partial[256];
} job;

/* Chunks [b, e) of 1024 floats as the decode kernels read a matrix: four
 * streams a quarter of the range apart, each prefetched 2 KB ahead (one
 * stream per thread drew about half the bandwidth those kernels reach). */
__attribute__((target("avx2"))) static void body(void *ctx, int64_t b, int64_t e, int worker) {
    job *j = ctx;
    __m256 s[8];
    for (int k = 0; k < 8; k++) s[k] = _mm256_setzero_ps();
    const int64_t q = (e - b) / 4 * 1024;
    const float *p[4];
    for (int k = 0; k < 4; k++) p[k] = j->data + b * 1024 + k * q;
    for (int64_t i = 0; i < q; i += 16)
        for (int k = 0; k < 4; k++) {
            _mm_prefetch((const char *)(p[k] + i + 512), _MM_HINT_T0);
            s[2 * k] = _mm256_add_ps(s[2 * k], _mm256_load_ps(p[k] + i));
            s[2 * k + 1] = _mm256_add_ps(s[2 * k + 1], _mm256_load_ps(p[k] + i + 8));
        }
    for (int64_t i = b * 1024 + 4 * q; i < e * 1024; i += 8) /* the chunks left over */
        s[0] = _mm256_add_ps(s[0], _mm256_load_ps(j->data + i));
    float out[8];
    for (int k = 1; k < 8; k++) s[0] = _mm256_add_ps(s[0], s[k]);
    _mm256_storeu_ps(out, s[0]);
    for (int k = 0; k < 8; k++) j->partial[worker] += out[k];
}

int main(int argc, char **argv) {
    size_t mb = argc > 1 ? (size_t)atol(argv[1]) : 1024;
    size_t n = mb * (1u << 20) / sizeof(float);
    float *buf = lmc_alloc_aligned(n * sizeof(float));
    if (!buf) return 1;
    for (size_t i = 0; i < n; i++) buf[i] = (float)(i & 7);
    job j = {.data = buf};
    double best = 0;
    for (int pass = 0; pass < 5; pass++) {
        double t0 = lmc_time_now();
        lmc_parallel_for((int64_t)(n / 1024), 64, body, &j);
        double dt = lmc_time_now() - t0;
        double gbs = (double)(n * sizeof(float)) / dt / 1e9;
        if (gbs > best) best = gbs;
    }
    double sink = 0;
    for (int i = 0; i < 256; i++) sink += j.partial[i];
    printf("memory read bandwidth: %.2f GB/s (%d threads, %zu MB buffer, best of 5; checksum %g)\n",
           best, lmc_get_num_threads(), mb, sink);
    lmc_free_aligned(buf);
    return 0;
}
