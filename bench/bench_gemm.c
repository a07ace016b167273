/* Prefill GEMM speed: build/bench/bench_gemm [rows cols T reps]
 * Times the quantized (4/8-bit g64) and dense (bf16) GEMMs on each SIMD path
 * the CPU has, against the old paths (exact f32: dequantized tiles / dot
 * products), in GMAC per CPU-s. Default 2048 x 2048 x 128 tokens. */
#include "kernels/gemm_internal.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* CPU seconds of the process: on a loaded machine wall time says little
 * (run with LMC_NUM_THREADS=1 for per-core figures). */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float frand(void) {
    return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

int main(int argc, char **argv) {
    int64_t rows = argc > 1 ? atol(argv[1]) : 2048, cols = argc > 2 ? atol(argv[2]) : 2048;
    int64_t T = argc > 3 ? atol(argv[3]) : 128;
    int reps = argc > 4 ? atoi(argv[4]) : 3;
    float *wf = malloc(sizeof(float) * (size_t)(rows * cols));
    float *x = malloc(sizeof(float) * (size_t)(T * cols));
    float *y = malloc(sizeof(float) * (size_t)(T * rows));
    for (int64_t i = 0; i < rows * cols; i++) wf[i] = 0.05f * frand();
    for (int64_t i = 0; i < T * cols; i++) x[i] = frand();
    static const char *names[3] = {"generic", "avx2", "avx512"};
    double macs = (double)rows * (double)cols * (double)T;
    printf("%lld x %lld weight, %lld tokens, %d threads\n", (long long)rows, (long long)cols,
           (long long)T, lmc_get_num_threads());
    for (int bits = 4; bits <= 8; bits += 4) {
        uint32_t *packed = malloc((size_t)(rows * cols * bits / 8));
        uint16_t *sc = malloc(2 * (size_t)(rows * cols / 64)),
                 *bi = malloc(2 * (size_t)(rows * cols / 64));
        lmc_quantize_affine(wf, rows, cols, bits, 64, LMC_DTYPE_BF16, packed, sc, bi);
        lmc_qweight w = {packed, sc, bi, LMC_DTYPE_BF16, bits, 64, rows, cols};
        for (int isa = 1; isa < 3; isa++) {
            if (!gemm_isa_force(isa)) continue;
            double best = 1e9;
            for (int r = 0; r < reps; r++) {
                double t0 = cpu_now();
                qgemm_run(&w, 0, rows, x, T, y, rows);
                double dt = cpu_now() - t0;
                best = dt < best ? dt : best;
            }
            printf("q%d g64 int16 gemm %-7s %8.1f GMAC per CPU-s\n", bits, names[isa],
                   macs / best / 1e9);
        }
        gemm_isa_force(-1);
        lmc_set_exact(1);
        double best = 1e9;
        for (int r = 0; r < reps; r++) {
            double t0 = cpu_now();
            lmc_qmatmul(&w, x, T, y);
            double dt = cpu_now() - t0;
            best = dt < best ? dt : best;
        }
        lmc_set_exact(0);
        printf("q%d g64 exact (dequantized tiles)  %8.1f GMAC per CPU-s\n", bits,
               macs / best / 1e9);
        free(packed), free(sc), free(bi);
    }
    uint16_t *wb = malloc(2 * (size_t)(rows * cols));
    lmc_convert_from_f32(LMC_DTYPE_BF16, wf, wb, rows * cols);
    lmc_tensor t = {
        .name = "w", .dtype = LMC_DTYPE_BF16, .ndim = 2, .shape = {rows, cols}, .data = wb};
    for (int exact = 0; exact < 2; exact++)
        for (int isa = 1; isa < 3; isa++) {
            if (!gemm_isa_force(isa)) continue;
            lmc_set_exact(exact);
            double best = 1e9;
            for (int r = 0; r < reps; r++) {
                double t0 = cpu_now();
                gemm_dense_run(&t, 0, rows, x, T, y, rows);
                double dt = cpu_now() - t0;
                best = dt < best ? dt : best;
            }
            printf("bf16 gemm %s %-7s %8.1f GMAC per CPU-s\n", exact ? "f32 x " : "bf16 x",
                   names[isa], macs / best / 1e9);
        }
    gemm_isa_force(0);
    lmc_set_exact(1);
    double best = 1e9;
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_now();
        lmc_matmul_dense(&t, x, T, y);
        double dt = cpu_now() - t0;
        best = dt < best ? dt : best;
    }
    printf("bf16 dot4 (old path)   %8.1f GMAC per CPU-s\n", macs / best / 1e9);
    return 0;
}
