/* Blocked GEMM for MLX-quantized weights over many tokens (prefill), int8
 * activations (gemm_internal.h has the maths): the activation quantizer, the
 * generic C tile (the reference the SIMD tiles are tested against), the ISA
 * switch and the parallel driver over row tiles. */
#include "kernels/gemm_internal.h"
#include "kernels/kernels.h"

#include <stdatomic.h>
#include <stdlib.h>

/* ---- ISA selection ----------------------------------------------------------- */

static atomic_int g_forced = -1; /* -1 automatic; written by tests only */

gemm_isa gemm_isa_active(void) {
    int f = atomic_load_explicit(&g_forced, memory_order_relaxed);
    if (f >= 0) return (gemm_isa)f;
    if (lmc_kernels() == lmc_kernels_generic() || !lmc_cpu_has_avx2_fma_f16c()) return GEMM_GENERIC;
    return lmc_cpu_has_avx512() ? GEMM_AVX512 : GEMM_AVX2;
}

bool gemm_isa_force(int isa) {
    if (isa == GEMM_AVX2 && !lmc_cpu_has_avx2_fma_f16c()) return false;
    if (isa == GEMM_AVX512 && !lmc_cpu_has_avx512()) return false;
    atomic_store(&g_forced, isa < 0 ? -1 : isa);
    return true;
}

/* ---- activations ----------------------------------------------------------------- */

bool qgemm_quantize_row_generic(const float *x, int64_t cols, int g, int16_t *v, float *d,
                                float *gsum) {
    for (int64_t j = 0; j < cols / g; j++) {
        const float *xg = x + j * g;
        const float amax = quant_absmax(xg, g);
        if (amax < 0.0f) return false;
        float dj = amax / 32767.0f, id = amax > 0.0f ? 32767.0f / amax : 0.0f;
        int32_t sum = 0;
        for (int i = 0; i < g; i++) {
            /* round to nearest even through the float adder (|x*id| <= 32767) */
            float r = (xg[i] * id + 12582912.0f) - 12582912.0f;
            int q = (int)r;
            q = q > 32767 ? 32767 : q < -32767 ? -32767 : q;
            v[j * g + i] = (int16_t)q;
            sum += q;
        }
        d[j] = dj;
        /* the bias term takes the quantized sum (see quantize_token in quant.c) */
        gsum[j] = dj * (float)sum;
    }
    return true;
}

typedef struct quant_job {
    const float *x;
    int64_t cols;
    int g;
    qgemm_x *qx;
    bool perm64; /* per 64 columns: the even ones, then the odd ones (qgemv, 4 bits) */
    bool avx2;   /* the AVX2 quantizer (gemm_isa_active() above generic) */
    atomic_bool bad;
} quant_job;

static void quantize_body(void *ctx, int64_t b, int64_t e, int worker) {
    quant_job *j = ctx;
    (void)worker;
    qgemm_x *q = j->qx;
    for (int64_t t = b; t < e; t++) {
        int16_t *v = (int16_t *)q->v + t * q->ldv;
        if (!(j->avx2 ? qgemm_quantize_row_avx2 : qgemm_quantize_row_generic)(
                j->x + t * j->cols, j->cols, j->g, v, (float *)q->d + t * q->ldg,
                (float *)q->gsum + t * q->ldg))
            atomic_store(&j->bad, true);
        if (!j->perm64) continue;
        for (int64_t c = 0; c < j->cols; c += 64) {
            int16_t tmp[64];
            for (int i = 0; i < 32; i++) tmp[i] = v[c + 2 * i], tmp[32 + i] = v[c + 2 * i + 1];
            memcpy(v + c, tmp, sizeof tmp);
        }
    }
}

/* ---- the generic tile ------------------------------------------------------------- */

void qgemm_tile_generic(const lmc_qweight *w, int64_t r0, int nr, const qgemm_x *x, int64_t T,
                        float *y, int64_t ldy, void *scratch) {
    uint8_t *q = scratch; /* one row, unpacked */
    const int g = w->group_size;
    const int64_t ng = quant_groups(w);
    for (int i = 0; i < nr; i++) {
        const int64_t r = r0 + i;
        lmc_qunpack_row(w, r, q);
        for (int64_t t = 0; t < T; t++) {
            const int16_t *v = x->v + t * x->ldv;
            const float *d = x->d + t * x->ldg, *gs = x->gsum + t * x->ldg;
            float acc = 0.0f;
            for (int64_t j = 0; j < ng; j++) {
                float s = quant_load_scale(w->scales, w->scale_dtype, r * ng + j);
                float b = quant_load_scale(w->biases, w->scale_dtype, r * ng + j);
                int32_t is = 0;
                for (int c = 0; c < g; c++) is += (int32_t)q[j * g + c] * v[j * g + c];
                acc += s * d[j] * (float)is + b * gs[j];
            }
            y[t * ldy + i] = acc;
        }
    }
}

/* ---- driver ---------------------------------------------------------------------- */

#define QGEMM_MULTI_MAX 4
typedef struct tile_job {
    const lmc_qweight *w[QGEMM_MULTI_MAX];
    float *y[QGEMM_MULTI_MAX];
    int64_t r0[QGEMM_MULTI_MAX], r1[QGEMM_MULTI_MAX], ldy[QGEMM_MULTI_MAX];
    int64_t first[QGEMM_MULTI_MAX + 1]; /* tiles before weight i */
    int n;
    const qgemm_x *qx;
    int64_t T;
    int mr;
    bool spans; /* fn takes all of a chunk's rows of one weight in one call */
    qgemm_tile_fn fn;
    atomic_bool nomem;
} tile_job;

static void tile_body(void *ctx, int64_t b, int64_t e, int worker) {
    tile_job *j = ctx;
    (void)worker;
    size_t bytes = qgemm_scratch_bytes(j->mr, j->T);
    if (bytes < (size_t)j->w[0]->cols) bytes = (size_t)j->w[0]->cols; /* the generic row */
    void *scratch = lmc_thread_scratch(LMC_SCRATCH_KERNELS, bytes);
    if (!scratch) {
        atomic_store(&j->nomem, true);
        return;
    }
    if (j->spans) {
        for (int64_t tile = b; tile < e;) {
            int i = 0;
            while (tile >= j->first[i + 1]) i++;
            const int64_t end = e < j->first[i + 1] ? e : j->first[i + 1];
            int64_t r = j->r0[i] + (tile - j->first[i]) * j->mr;
            int64_t re = j->r0[i] + (end - j->first[i]) * j->mr;
            if (re > j->r1[i]) re = j->r1[i];
            j->fn(j->w[i], r, (int)(re - r), j->qx, j->T, j->y[i] + (r - j->r0[i]), j->ldy[i],
                  scratch);
            tile = end;
        }
        return;
    }
    for (int64_t tile = b; tile < e; tile++) {
        int i = 0;
        while (tile >= j->first[i + 1]) i++;
        int64_t r = j->r0[i] + (tile - j->first[i]) * j->mr;
        int nr = (int)(j->r1[i] - r < j->mr ? j->r1[i] - r : j->mr);
        j->fn(j->w[i], r, nr, j->qx, j->T, j->y[i] + (r - j->r0[i]), j->ldy[i], scratch);
    }
}

static bool run_multi(const lmc_qweight *const *ws, int n, const int64_t *r1, const float *x,
                      int64_t T, float *const *ys, const int64_t *ldy, bool gemv) {
    if (n < 1 || n > QGEMM_MULTI_MAX) return false;
    const lmc_qweight *w = ws[0];
    const int64_t cols = w->cols, ng = quant_groups(w);
    const size_t vbytes = ((size_t)(T * cols) * 2 + 63) / 64 * 64;
    const size_t fbytes = (size_t)T * (size_t)(2 * ng) * sizeof(float);
    bool owned;
    uint8_t *buf = lmc_tmp_get(LMC_SCRATCH_QMULTI, vbytes + fbytes, &owned);
    if (!buf) return false;
    float *d = (float *)(buf + vbytes), *gsum = d + T * ng;
    qgemm_x qx = {.v = (int16_t *)buf, .d = d, .gsum = gsum, .ldv = cols, .ldg = ng};
    quant_job qj = {.x = x,
                    .cols = cols,
                    .g = w->group_size,
                    .qx = &qx,
                    .perm64 = gemv && w->bits == 4,
                    .avx2 = gemm_isa_active() != GEMM_GENERIC};
    lmc_parallel_for(T, 8, quantize_body, &qj);
    bool ok = !atomic_load(&qj.bad);
    if (ok) {
        tile_job tj = {.qx = &qx, .T = T, .n = n};
        switch (gemv ? -1 : (int)gemm_isa_active()) {
        case -1:
            /* any row count: its one-token kernel streams rows a quarter
             * of the chunk's range apart */
            tj.mr = QGEMV_ROWS, tj.fn = qgemv_rows_avx512, tj.spans = true;
            break;
        case GEMM_AVX512:
            tj.mr = QGEMM_MR_AVX512, tj.fn = qgemm_tile_avx512;
            break;
        case GEMM_AVX2:
            tj.mr = QGEMM_MR_AVX2, tj.fn = qgemm_tile_avx2;
            break;
        default:
            tj.mr = QGEMM_MR_GENERIC, tj.fn = qgemm_tile_generic;
            break;
        }
        tj.first[0] = 0;
        for (int i = 0; i < n; i++) {
            tj.w[i] = ws[i];
            tj.y[i] = ys[i];
            tj.r0[i] = 0;
            tj.r1[i] = r1[i];
            tj.ldy[i] = ldy[i];
            tj.first[i + 1] = tj.first[i] + (r1[i] + tj.mr - 1) / tj.mr;
        }
        /* decode: ~32K weights per chunk amortise the fork-join */
        int64_t grain = gemv ? 32768 / (cols * QGEMV_ROWS) : 1;
        lmc_parallel_for(tj.first[n], grain < 1 ? 1 : grain, tile_body, &tj);
        ok = !atomic_load(&tj.nomem);
    }
    lmc_tmp_put(buf, owned);
    return ok;
}

bool qgemm_run_multi(const lmc_qweight *const *ws, int n, const int64_t *r1, const float *x,
                     int64_t T, float *const *ys, const int64_t *ldy) {
    return run_multi(ws, n, r1, x, T, ys, ldy, false);
}

bool qgemv_run_multi(const lmc_qweight *const *ws, int n, const int64_t *r1, const float *x,
                     int64_t T, float *const *ys, const int64_t *ldy) {
    if (gemm_isa_active() != GEMM_AVX512) return false;
    for (int i = 0; i < n; i++)
        if (!qgemv_avx512_ok(ws[i])) return false;
    return run_multi(ws, n, r1, x, T, ys, ldy, true);
}

bool qgemm_run(const lmc_qweight *w, int64_t r0, int64_t r1, const float *x, int64_t T, float *y,
               int64_t ldy) {
    /* rows [r0, r1) as a view of their own */
    lmc_qweight v = lmc_qweight_rows(w, r0, r1 - r0);
    const lmc_qweight *ws[1] = {&v};
    int64_t n[1] = {r1 - r0}, ld[1] = {ldy};
    float *ys[1] = {y};
    return qgemm_run_multi(ws, 1, n, x, T, ys, ld);
}
