/* Dense matmul over float weights read in place, and the small row ops. */
#include "kernels/kernels.h"
#include "kernels/gemm_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ROW_BLOCK 16  /* weight rows per task, converted to f32 once for all tokens */
#define TOKEN_BLOCK 8 /* activation rows kept hot while a row block runs */

typedef struct matmul_job {
    const lmc_tensor *w;
    const float *x;
    float *y;
    int64_t T, cols, r0, n_rows, ldy;
} matmul_job;

/* Per-thread scratch for converted weight rows. */
static float *scratch(size_t n) {
    return lmc_thread_scratch(LMC_SCRATCH_KERNELS, n * sizeof(float));
}

static inline const void *row_ptr(const lmc_tensor *w, int64_t r, int64_t cols) {
    return (const uint8_t *)w->data + (size_t)r * (size_t)cols * lmc_dtype_size(w->dtype);
}

void lmc_dense_row_f32(const lmc_tensor *w, int64_t row, float *out) {
    const lmc_kernel_table *k = lmc_kernels();
    int64_t cols = w->shape[w->ndim - 1];
    const void *p = row_ptr(w, row, cols);
    switch (w->dtype) {
    case LMC_DTYPE_F32:
        memcpy(out, p, (size_t)cols * 4);
        break;
    case LMC_DTYPE_F16:
        k->f16_to_f32(p, out, cols);
        break;
    case LMC_DTYPE_BF16:
        k->bf16_to_f32(p, out, cols);
        break;
    default: /* binding admits float dtypes only; NaN, never plausible zeros */
        for (int64_t i = 0; i < cols; i++) out[i] = NAN;
        break;
    }
}

static void matvec_body(void *ctx, int64_t b, int64_t e, int worker) {
    const matmul_job *j = ctx;
    const lmc_kernel_table *k = lmc_kernels();
    for (int64_t r = b; r < e; r++) {
        const void *p = row_ptr(j->w, j->r0 + r, j->cols);
        float v;
        switch (j->w->dtype) {
        case LMC_DTYPE_F32:
            v = k->dot_f32(p, j->x, j->cols);
            break;
        case LMC_DTYPE_F16:
            v = k->dot_f16(p, j->x, j->cols);
            break;
        default:
            v = k->dot_bf16(p, j->x, j->cols);
            break;
        }
        j->y[r] = v;
    }
}

static void matmul_body(void *ctx, int64_t b, int64_t e, int worker) {
    const matmul_job *j = ctx;
    const lmc_kernel_table *k = lmc_kernels();
    int64_t cols = j->cols;
    for (int64_t blk = b; blk < e; blk++) {
        int64_t r_begin = blk * ROW_BLOCK;
        int64_t r_end = r_begin + ROW_BLOCK < j->n_rows ? r_begin + ROW_BLOCK : j->n_rows;
        const float *wrows;
        float *s = NULL;
        if (j->w->dtype == LMC_DTYPE_F32) {
            wrows = row_ptr(j->w, j->r0 + r_begin, cols);
        } else {
            s = scratch((size_t)ROW_BLOCK * (size_t)cols);
            for (int64_t r = r_begin; s && r < r_end; r++)
                lmc_dense_row_f32(j->w, j->r0 + r, s + (r - r_begin) * cols);
            wrows = s;
        }
        for (int64_t t0 = 0; t0 < j->T; t0 += TOKEN_BLOCK) {
            int64_t t1 = t0 + TOKEN_BLOCK < j->T ? t0 + TOKEN_BLOCK : j->T;
            for (int64_t r = r_begin; r < r_end; r++) {
                if (!wrows) { /* no scratch memory: slow but correct */
                    for (int64_t t = t0; t < t1; t++) {
                        matmul_job one = *j;
                        one.x = j->x + t * cols;
                        one.y = j->y + t * j->ldy;
                        matvec_body(&one, r, r + 1, worker);
                    }
                    continue;
                }
                const float *wr = wrows + (r - r_begin) * cols;
                int64_t t = t0;
                for (; t + 4 <= t1; t += 4) {
                    float out[4];
                    k->dot4_f32(wr, j->x + t * cols, cols, cols, out);
                    for (int q = 0; q < 4; q++) j->y[(t + q) * j->ldy + r] = out[q];
                }
                for (; t < t1; t++) j->y[t * j->ldy + r] = k->dot_f32(wr, j->x + t * cols, cols);
            }
        }
    }
}

void lmc_matmul_dense_rows(const lmc_tensor *w, int64_t r0, int64_t r1, const float *x, int64_t T,
                           float *y, int64_t ldy) {
    matmul_job j = {.w = w,
                    .x = x,
                    .y = y,
                    .T = T,
                    .cols = w->shape[w->ndim - 1],
                    .r0 = r0,
                    .n_rows = r1 - r0,
                    .ldy = ldy};
    /* decode, bf16 weights on AVX-512: bf16 x, vdpbf16ps (gemm.c) */
    if (T < 4 && gemv_dense_run(w, r0, r1, x, T, y, ldy)) return;
    if (T == 1) {
        lmc_parallel_for(j.n_rows, 16, matvec_body, &j);
        return;
    }
    /* prefill: the blocked GEMM (gemm.c) where SIMD is on */
    if (T >= 4 && gemm_dense_run(w, r0, r1, x, T, y, ldy)) return;
    int64_t blocks = (j.n_rows + ROW_BLOCK - 1) / ROW_BLOCK;
    lmc_parallel_for(blocks, 1, matmul_body, &j);
}

lmc_status lmc_matmul_dense(const lmc_tensor *w, const float *x, int64_t T, float *y) {
    if (w->ndim != 2 ||
        (w->dtype != LMC_DTYPE_F32 && w->dtype != LMC_DTYPE_F16 && w->dtype != LMC_DTYPE_BF16))
        return lmc_error(LMC_ERR_UNSUPPORTED, "matmul: tensor '%s' is %dD %s, need a 2D float",
                         w->name ? w->name : "?", w->ndim, lmc_dtype_name(w->dtype));
    lmc_matmul_dense_rows(w, 0, w->shape[0], x, T, y, w->shape[0]);
    return LMC_OK;
}

/* The weight is converted in blocks on the stack: no allocation, so
 * nothing to fail (it used to drop the weight when scratch ran out). */
void lmc_rmsnorm(const float *x, const lmc_tensor *w, float weight_offset, float eps, float *y,
                 int64_t rows, int64_t n) {
    enum { BLOCK = 256 };
    float wb[BLOCK];
    size_t es = w ? lmc_dtype_size(w->dtype) : 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        double ss = 0;
        for (int64_t i = 0; i < n; i++) ss += (double)xr[i] * xr[i];
        float inv = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
        if (!w) {
            for (int64_t i = 0; i < n; i++) yr[i] = xr[i] * inv;
            continue;
        }
        for (int64_t i0 = 0; i0 < n; i0 += BLOCK) {
            int64_t m = n - i0 < BLOCK ? n - i0 : BLOCK;
            const float *wf = wb;
            if (w->dtype == LMC_DTYPE_F32)
                wf = (const float *)w->data + i0;
            else
                lmc_convert_to_f32(w->dtype, (const uint8_t *)w->data + (size_t)i0 * es, wb, m);
            for (int64_t i = 0; i < m; i++)
                yr[i0 + i] = (xr[i0 + i] * inv) * (wf[i] + weight_offset);
        }
    }
}

/* expf of the shifted values with a double sum: the generic exp_sum, the
 * exact one whatever the CPU (MoE routing, vision attention). */
void lmc_softmax(float *x, int64_t n) {
    if (n < 1) return;
    float inv = 1.0f / lmc_attn_kernels_generic()->exp_sum(x, n);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}
