/* Blocked GEMM for dense float weights over many tokens (prefill): the
 * parallel driver over row tiles of the AVX2 / AVX-512 tiles
 * (gemm_internal.h). Generic C keeps ops.c's dot-product path. */
#include "kernels/gemm_internal.h"
#include "kernels/kernels.h"

#include <stdatomic.h>
#include <stdlib.h>

typedef struct dense_job {
    const lmc_tensor *w;
    const float *x;
    const uint16_t *xb; /* x as bf16: the bf16 kernel */
    int64_t r0, r1, T, ldy, cols;
    float *y;
    int mr;
    gemm_isa isa;
    atomic_bool nomem;
} dense_job;

static void dense_body(void *ctx, int64_t b, int64_t e, int worker) {
    dense_job *j = ctx;
    (void)worker;
    void *scratch = lmc_thread_scratch(LMC_SCRATCH_KERNELS, gemm_scratch_bytes(j->mr, j->T));
    if (!scratch) {
        atomic_store(&j->nomem, true);
        return;
    }
    for (int64_t tile = b; tile < e; tile++) {
        int64_t r = j->r0 + tile * j->mr;
        int nr = (int)(j->r1 - r < j->mr ? j->r1 - r : j->mr);
        float *y = j->y + (r - j->r0);
        if (j->xb)
            gemm_tile_bf16_avx512(j->w->data, j->cols, r, nr, j->xb, j->T, y, j->ldy, scratch);
        else if (j->isa == GEMM_AVX512)
            gemm_tile_f32_avx512(j->w->data, j->w->dtype, j->cols, r, nr, j->x, j->T, y, j->ldy,
                                 scratch);
        else
            gemm_tile_f32_avx2(j->w->data, j->w->dtype, j->cols, r, nr, j->x, j->T, y, j->ldy,
                               scratch);
    }
}

typedef struct round_job {
    const float *x;
    uint16_t *xb;
} round_job;

static void round_body(void *ctx, int64_t b, int64_t e, int worker) {
    const round_job *j = ctx;
    (void)worker;
    for (int64_t i = b; i < e; i++) j->xb[i] = lmc_f32_to_bf16(j->x[i]);
}

typedef struct gemv_job {
    const uint16_t *w, *xb;
    int64_t r0, cols, T, ldy;
    float *y;
} gemv_job;

#define GEMV_ROWS 4
static void gemv_body(void *ctx, int64_t b, int64_t e, int worker) {
    const gemv_job *j = ctx;
    (void)worker;
    gemv_bf16_avx512(j->w, j->cols, j->r0 + b, (int)(e - b), j->xb, j->T, j->y + b, j->ldy);
}

typedef struct gemv_f32_job {
    const lmc_tensor *w;
    const float *x;
    int64_t r0, cols;
    float *y;
} gemv_f32_job;

static void gemv_f32_body(void *ctx, int64_t b, int64_t e, int worker) {
    const gemv_f32_job *j = ctx;
    (void)worker;
    gemv_dense_avx2(j->w->data, j->w->dtype, j->cols, j->r0 + b, (int)(e - b), j->x, j->y + b);
}

bool gemv_dense_run(const lmc_tensor *w, int64_t r0, int64_t r1, const float *x, int64_t T,
                    float *y, int64_t ldy) {
    const gemm_isa isa = gemm_isa_active();
    if (T > 3 || isa == GEMM_GENERIC) return false;
    /* One token: f32 x and sums on either ISA; with bf16 weights on AVX-512
     * 1.13-1.23x the vdpbf16ps kernel with x rounded to bf16, bf16 1B
     * decode 27.0-28.9 against 23.4-25.1 t/s (lmc bench -n 32, alternating) */
    if (T == 1) {
        gemv_f32_job j = {.w = w, .x = x, .r0 = r0, .cols = w->shape[w->ndim - 1], .y = y};
        int64_t grain = 16384 / j.cols;
        lmc_parallel_for(r1 - r0, grain < 1 ? 1 : grain, gemv_f32_body, &j);
        return true;
    }
    if (w->dtype != LMC_DTYPE_BF16 || isa != GEMM_AVX512 || lmc_get_exact()) return false;
    const int64_t cols = w->shape[w->ndim - 1];
    uint16_t xb[3 * 8192], *xp = xb;
    if (T * cols > (int64_t)(sizeof xb / sizeof xb[0])) {
        xp = lmc_alloc_aligned((size_t)(T * cols) * sizeof(uint16_t));
        if (!xp) return false;
    }
    for (int64_t i = 0; i < T * cols; i++) xp[i] = lmc_f32_to_bf16(x[i]);
    gemv_job j = {.w = w->data, .xb = xp, .r0 = r0, .cols = cols, .T = T, .ldy = ldy, .y = y};
    int64_t grain = 32768 / cols;
    lmc_parallel_for(r1 - r0, grain < 1 ? 1 : grain, gemv_body, &j);
    if (xp != xb) lmc_free_aligned(xp);
    return true;
}

bool gemm_dense_run(const lmc_tensor *w, int64_t r0, int64_t r1, const float *x, int64_t T,
                    float *y, int64_t ldy) {
    gemm_isa isa = gemm_isa_active();
    if (isa == GEMM_GENERIC) return false;
    const int64_t cols = w->shape[w->ndim - 1];
    dense_job j = {.w = w,
                   .x = x,
                   .r0 = r0,
                   .r1 = r1,
                   .T = T,
                   .ldy = ldy,
                   .cols = cols,
                   .y = y,
                   .isa = isa,
                   .mr = isa == GEMM_AVX512 ? GEMM_MR_AVX512 : GEMM_MR_AVX2};
    uint16_t *xb = NULL;
    if (isa == GEMM_AVX512 && w->dtype == LMC_DTYPE_BF16 && !lmc_get_exact()) {
        xb = lmc_alloc_aligned((size_t)(T * cols) * sizeof(uint16_t));
        if (!xb) return false;
        round_job rj = {.x = x, .xb = xb};
        lmc_parallel_for(T * cols, 16384, round_body, &rj);
        j.xb = xb;
    }
    lmc_parallel_for((r1 - r0 + j.mr - 1) / j.mr, 1, dense_body, &j);
    lmc_free_aligned(xb);
    return !atomic_load(&j.nomem);
}
