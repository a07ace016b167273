/* Dense GEMM for batched work over many rows at once (the vision encoder's
 * patches): OpenBLAS's sgemm when the build has it (LMC_HAVE_OPENBLAS),
 * otherwise the project's own blocked kernels. */
#include "kernels/kernels.h"

#include <stdlib.h>
#include <string.h>

#ifdef LMC_HAVE_OPENBLAS
#include <cblas.h>
#endif

bool lmc_have_blas(void) {
#ifdef LMC_HAVE_OPENBLAS
    return true;
#else
    return false;
#endif
}

#ifdef LMC_HAVE_OPENBLAS
/* OpenBLAS keeps its own threads; they follow lmc_get_num_threads. */
static void blas_threads(void) {
    int n = lmc_get_num_threads();
    if (openblas_get_num_threads() != n) openblas_set_num_threads(n);
}
#else
typedef struct sgemm_job {
    bool b_trans;
    int64_t M, N, K, lda, ldb, ldc;
    float alpha, beta;
    const float *A, *B;
    float *C;
} sgemm_job;

/* rows [b, e) of C; B^T rows are contiguous when b_trans */
static void sgemm_body(void *ctx, int64_t b, int64_t e, int worker) {
    const sgemm_job *j = ctx;
    const lmc_kernel_table *k = lmc_kernels();
    float *col = j->b_trans ? NULL : lmc_thread_scratch(LMC_SCRATCH_KERNELS, (size_t)j->K * 4);
    for (int64_t n = 0; n < j->N; n++) {
        const float *bn = j->B + n * j->ldb;
        if (!j->b_trans) {
            for (int64_t kk = 0; col && kk < j->K; kk++) col[kk] = j->B[kk * j->ldb + n];
            bn = col;
        }
        for (int64_t m = b; m < e; m++) {
            float *c = j->C + m * j->ldc + n;
            float v;
            if (bn)
                v = k->dot_f32(j->A + m * j->lda, bn, j->K);
            else { /* no scratch: strided dot */
                v = 0;
                for (int64_t kk = 0; kk < j->K; kk++)
                    v += j->A[m * j->lda + kk] * j->B[kk * j->ldb + n];
            }
            *c = j->alpha * v + (j->beta != 0 ? j->beta * *c : 0.0f);
        }
    }
}
#endif

void lmc_sgemm(bool b_trans, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
               int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
#ifdef LMC_HAVE_OPENBLAS
    blas_threads();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, b_trans ? CblasTrans : CblasNoTrans, (blasint)M,
                (blasint)N, (blasint)K, alpha, A, (blasint)lda, B, (blasint)ldb, beta, C,
                (blasint)ldc);
#else
    sgemm_job j = {b_trans, M, N, K, lda, ldb, ldc, alpha, beta, A, B, C};
    lmc_parallel_for(M, 4, sgemm_body, &j);
#endif
}

void lmc_matmul_gemm(const lmc_tensor *w, const float *x, int64_t T, float *y) {
    int64_t rows = w->shape[0], cols = w->shape[w->ndim - 1];
#ifdef LMC_HAVE_OPENBLAS
    if (w->dtype == LMC_DTYPE_F32) {
        lmc_sgemm(true, T, rows, cols, 1.0f, x, cols, w->data, cols, 0.0f, y, rows);
        return;
    }
    /* f16/bf16 weights: converted a block of rows at a time */
    enum { BLOCK = 256 };
    float *wf = lmc_alloc_aligned((size_t)BLOCK * (size_t)cols * sizeof(float));
    if (wf) {
        for (int64_t r0 = 0; r0 < rows; r0 += BLOCK) {
            int64_t n = rows - r0 < BLOCK ? rows - r0 : BLOCK;
            for (int64_t r = 0; r < n; r++) lmc_dense_row_f32(w, r0 + r, wf + r * cols);
            lmc_sgemm(true, T, n, cols, 1.0f, x, cols, wf, cols, 0.0f, y + r0, rows);
        }
        lmc_free_aligned(wf);
        return;
    }
#endif
    lmc_matmul_dense_rows(w, 0, rows, x, T, y, rows); /* same sums, the project's kernel */
}
