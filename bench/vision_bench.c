/* Time to encode one image with a SigLIP So400m-shaped tower (hidden 1152,
 * 27 layers, intermediate 4304, 16 heads, patch 14; random f32 weights in
 * memory) at 224 and 448 pixels: the vision half of PaliGemma-3B.
 * usage: bench/vision_bench [THREADS] [REPS] */
#include "kernels/kernels.h"
#include "models/siglip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;

static float *random_floats(size_t n, float scale) {
    float *v = lmc_alloc_aligned(n * sizeof *v);
    if (!v) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        v[i] = scale * ((float)(rng >> 40) / (float)(1 << 24) - 0.5f);
    }
    return v;
}

static lmc_tensor *tensor(int64_t rows, int64_t cols, float scale, float offset) {
    lmc_tensor *t = calloc(1, sizeof *t);
    size_t n = (size_t)rows * (size_t)(cols ? cols : 1);
    float *d = random_floats(n, scale);
    for (size_t i = 0; offset != 0 && i < n; i++) d[i] += offset;
    t->dtype = LMC_DTYPE_F32;
    t->ndim = cols ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->data = d;
    t->nbytes = n * 4;
    return t;
}

static void linear(lmc_linear *l, int64_t in, int64_t out) {
    l->weight = tensor(out, in, 2.0f / (float)in, 0);
    l->bias = tensor(out, 0, 0.1f, 0);
    l->in = in;
    l->out = out;
}

static void norm(lmc_norm *n, int64_t d) {
    n->weight = tensor(d, 0, 0.2f, 1.0f);
    n->bias = tensor(d, 0, 0.1f, 0);
    n->eps = 1e-6f;
    n->layer_norm = true;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2, reps = argc > 2 ? atoi(argv[2]) : 3;
    lmc_set_num_threads(threads);
    json_t *cfg = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i}", "hidden_size", 1152,
                            "intermediate_size", 4304, "num_hidden_layers", 27,
                            "num_attention_heads", 16, "patch_size", 14, "image_size", 448);
    lmc_siglip s;
    if (lmc_siglip_init(&s, cfg, "bench") != LMC_OK) return 1;
    int64_t D = s.hidden, I = s.intermediate, K = 3 * 14 * 14;
    s.patch_w = *tensor(D, K, 2.0f / (float)K, 0);
    s.patch_b = tensor(D, 0, 0.1f, 0);
    for (int64_t l = 0; l < s.n_layers; l++) {
        lmc_siglip_layer *y = &s.layers[l];
        linear(&y->q, D, D);
        linear(&y->k, D, D);
        linear(&y->v, D, D);
        linear(&y->o, D, D);
        linear(&y->fc1, D, I);
        linear(&y->fc2, I, D);
        norm(&y->ln1, D);
        norm(&y->ln2, D);
    }
    norm(&s.post_ln, D);
    printf("SigLIP So400m shapes (hidden %lld, %lld layers, intermediate %lld, patch 14), f32 "
           "weights, %d threads, GEMM: %s\n",
           (long long)D, (long long)s.n_layers, (long long)I, lmc_get_num_threads(),
           lmc_have_blas() ? "OpenBLAS sgemm" : "lmc kernels");
    int sizes[2] = {224, 448};
    for (int k = 0; k < 2; k++) {
        s.image_size = sizes[k];
        s.grid = s.image_size / s.patch;
        s.n_patches = s.grid * s.grid;
        s.pos = (lmc_embedding){
            .weight = tensor(s.n_patches, D, 0.5f, 0), .vocab = s.n_patches, .dim = D};
        float *px = random_floats((size_t)3 * sizes[k] * sizes[k], 2.0f);
        float *out = lmc_alloc_aligned((size_t)(s.n_patches * D) * sizeof(float));
        double best = 1e9, total = 0, cpu_best = 1e9;
        for (int r = 0; r < reps; r++) {
            double t0 = lmc_time_now(), c0 = cpu_now();
            if (lmc_siglip_forward(&s, px, out) != LMC_OK) return 1;
            double dt = lmc_time_now() - t0, dc = cpu_now() - c0;
            best = dt < best ? dt : best;
            cpu_best = dc < cpu_best ? dc : cpu_best;
            total += dt;
        }
        double flops = 2.0 * (double)s.n_patches *
                           ((double)s.n_layers * (4.0 * D * D + 2.0 * D * I) + (double)K * D) +
                       (double)s.n_layers * 4.0 * (double)s.n_patches * s.n_patches * D;
        printf("  %d x %d: %lld patches, %.0f GFLOP: wall best %.3f s, mean %.3f s over %d "
               "(%.1f GFLOP/s); CPU time best %.3f s (all threads)\n",
               sizes[k], sizes[k], (long long)s.n_patches, flops / 1e9, best, total / reps, reps,
               flops / best / 1e9, cpu_best);
    }
    return 0;
}
