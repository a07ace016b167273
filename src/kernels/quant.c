/* MLX affine quantized matmul: weight views, the exact switch and the parallel
 * drivers that dispatch to the generic C kernels (quant_generic.c) or the AVX2
 * ones (quant_avx2.c). The layout and dequantization (w = scale*q + bias per
 * group) follow mlx/backend/cpu/quantized.cpp (_qmm, extract_bits) and the Metal
 * `affine_dequantize` in mlx/backend/metal/kernels/quantized.h.
 *
 * One token (decode): per group, sum_c x_c (s q_c + b) = s dot(q, x) + b sum(x)
 * with the group sums of x computed once per call.
 * Several tokens (prefill): QUANT_TILE_ROWS rows x QUANT_CHUNK_COLS columns
 * are dequantized into a small buffer once and reused for every token. */
#include "kernels/quant_internal.h"
#include "kernels/gemm_internal.h"
#include "kernels/kernels.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- validation and views ------------------------------------------------ */

static bool bits_ok(int bits) {
    return bits == 2 || bits == 3 || bits == 4 || bits == 5 || bits == 6 || bits == 8;
}
static bool group_ok(int g) {
    return g == 32 || g == 64 || g == 128;
}
static bool scale_dtype_ok(lmc_dtype dt) {
    return dt == LMC_DTYPE_F16 || dt == LMC_DTYPE_BF16 || dt == LMC_DTYPE_F32;
}
/* Local spellings so this file needs nothing from src/tensor. */
static const char *dtype_str(lmc_dtype dt) {
    static const char *names[] = {"F32", "F16", "BF16", "U32", "I32", "I64", "U8", "I8", "BOOL"};
    return (unsigned)dt < sizeof names / sizeof names[0] ? names[dt] : "unknown dtype";
}
static const char *shape_str(const lmc_tensor *t, char *buf, size_t size) {
    size_t n = 0;
    buf[0] = 0;
    n += (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < t->ndim && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    if (n < size) snprintf(buf + n, size - n, "]");
    return buf;
}

lmc_status lmc_qweight_check(const lmc_qweight *w, const char *name) {
    const char *n = name ? name : "quantized weight";
    if (!w) return lmc_error(LMC_ERR_INVALID_ARG, "%s: NULL weight", n);
    if (!bits_ok(w->bits))
        return lmc_error(
            LMC_ERR_UNSUPPORTED,
            "%s: %d-bit quantization is not supported (bits must be 2, 3, 4, 5, 6 or 8)", n,
            w->bits);
    if (!group_ok(w->group_size))
        return lmc_error(LMC_ERR_UNSUPPORTED,
                         "%s: group size %d is not supported (must be 32, 64 or 128)", n,
                         w->group_size);
    if (!scale_dtype_ok(w->scale_dtype))
        return lmc_error(LMC_ERR_UNSUPPORTED, "%s: scales/biases must be F16, BF16 or F32, not %s",
                         n, dtype_str(w->scale_dtype));
    if (w->rows <= 0 || w->cols <= 0)
        return lmc_error(LMC_ERR_SHAPE, "%s: empty shape [%lld, %lld]", n, (long long)w->rows,
                         (long long)w->cols);
    if (w->cols % w->group_size != 0)
        return lmc_error(LMC_ERR_SHAPE,
                         "%s: %lld input columns are not a multiple of the group size %d", n,
                         (long long)w->cols, w->group_size);
    if (!w->packed || !w->scales || !w->biases)
        return lmc_error(LMC_ERR_INVALID_ARG, "%s: missing packed data, scales or biases", n);
    return LMC_OK;
}

static int64_t leading_rows(const lmc_tensor *t) {
    int64_t r = 1;
    for (int i = 0; i + 1 < t->ndim; i++) r *= t->shape[i];
    return r;
}

lmc_status lmc_qweight_from_tensors(const lmc_tensor *weight, const lmc_tensor *scales,
                                    const lmc_tensor *biases, int bits, int group_size,
                                    const char *name, lmc_qweight *out) {
    const char *n = name ? name : (weight && weight->name ? weight->name : "quantized weight");
    char b1[96], b2[96];
    if (!weight || !scales || !biases || !out)
        return lmc_error(LMC_ERR_INVALID_ARG, "%s: missing tensor", n);
    if (!bits_ok(bits))
        return lmc_error(
            LMC_ERR_UNSUPPORTED,
            "%s: %d-bit quantization is not supported (bits must be 2, 3, 4, 5, 6 or 8)", n, bits);
    if (!group_ok(group_size))
        return lmc_error(LMC_ERR_UNSUPPORTED,
                         "%s: group size %d is not supported (must be 32, 64 or 128)", n,
                         group_size);
    if (weight->dtype != LMC_DTYPE_U32)
        return lmc_error(LMC_ERR_FORMAT, "%s: quantized weight must be U32, not %s", n,
                         dtype_str(weight->dtype));
    if (scales->dtype != biases->dtype)
        return lmc_error(LMC_ERR_FORMAT, "%s: scales are %s but biases are %s", n,
                         dtype_str(scales->dtype), dtype_str(biases->dtype));
    if (!scale_dtype_ok(scales->dtype))
        return lmc_error(LMC_ERR_UNSUPPORTED, "%s: scales/biases must be F16, BF16 or F32, not %s",
                         n, dtype_str(scales->dtype));
    if (weight->ndim < 2 || scales->ndim != weight->ndim || biases->ndim != weight->ndim)
        return lmc_error(LMC_ERR_SHAPE, "%s: weight %s, scales %s: need matching ranks >= 2", n,
                         shape_str(weight, b1, sizeof b1), shape_str(scales, b2, sizeof b2));
    for (int i = 0; i < weight->ndim; i++) {
        bool last = i == weight->ndim - 1;
        if ((!last && scales->shape[i] != weight->shape[i]) || biases->shape[i] != scales->shape[i])
            return lmc_error(LMC_ERR_SHAPE, "%s: weight %s does not match scales %s / biases", n,
                             shape_str(weight, b1, sizeof b1), shape_str(scales, b2, sizeof b2));
    }
    int64_t words = weight->shape[weight->ndim - 1];
    int64_t ngroups = scales->shape[scales->ndim - 1];
    if (words <= 0 || ngroups <= 0 || (words * 32) % bits != 0)
        return lmc_error(LMC_ERR_SHAPE,
                         "%s: packed width %lld is not a whole number of %d-bit values", n,
                         (long long)words, bits);
    int64_t cols = words * 32 / bits;
    if (cols != ngroups * group_size)
        return lmc_error(
            LMC_ERR_SHAPE,
            "%s: packed width %lld (%lld %d-bit values) does not match %lld groups of %d "
            "(wrong bits or group_size?)",
            n, (long long)words, (long long)cols, bits, (long long)ngroups, group_size);
    lmc_qweight q = {
        .packed = weight->data,
        .scales = scales->data,
        .biases = biases->data,
        .scale_dtype = scales->dtype,
        .bits = bits,
        .group_size = group_size,
        .rows = leading_rows(weight),
        .cols = cols,
    };
    uint64_t need_w = (uint64_t)q.rows * (uint64_t)words * 4;
    uint64_t need_s = (uint64_t)q.rows * (uint64_t)ngroups * quant_scale_size(scales->dtype);
    if (weight->nbytes < need_w || scales->nbytes < need_s || biases->nbytes < need_s)
        return lmc_error(LMC_ERR_FORMAT, "%s: tensor data is shorter than its shape", n);
    lmc_status st = lmc_qweight_check(&q, n);
    if (st != LMC_OK) return st;
    *out = q;
    return LMC_OK;
}

lmc_qweight lmc_qweight_rows(const lmc_qweight *w, int64_t r0, int64_t n) {
    lmc_qweight v = *w;
    size_t ss = quant_scale_size(w->scale_dtype);
    v.packed = w->packed + r0 * quant_row_words(w);
    v.scales = (const uint8_t *)w->scales + (size_t)(r0 * quant_groups(w)) * ss;
    v.biases = (const uint8_t *)w->biases + (size_t)(r0 * quant_groups(w)) * ss;
    v.rows = n;
    return v;
}

uint64_t lmc_qweight_nbytes(const lmc_qweight *w) {
    uint64_t rows = (uint64_t)w->rows;
    return rows * (uint64_t)quant_row_words(w) * 4 +
           2 * rows * (uint64_t)quant_groups(w) * quant_scale_size(w->scale_dtype);
}

/* ---- CPU dispatch ----------------------------------------------------------- */

static bool quant_use_avx2(void) {
    return lmc_kernels() != lmc_kernels_generic() && lmc_cpu_has_avx2_fma_f16c();
}

bool lmc_quant_use_simd(bool enable) {
    lmc_kernels_use(enable ? lmc_kernels_avx2() : lmc_kernels_generic());
    return quant_use_avx2();
}

/* ---- exact / fast switch ------------------------------------------------------ */

/* -1: not read yet (LMC_EXACT decides), else 0/1. */
static atomic_int g_exact = -1;

void lmc_set_exact(int exact) {
    atomic_store(&g_exact, exact ? 1 : 0);
}

int lmc_get_exact(void) {
    int e = atomic_load_explicit(&g_exact, memory_order_relaxed);
    if (e < 0) {
        const char *env = getenv("LMC_EXACT");
        e = env && *env && *env != '0';
        int expect = -1; /* a racing lmc_set_exact wins */
        atomic_compare_exchange_strong(&g_exact, &expect, e);
        e = atomic_load(&g_exact);
    }
    return e;
}

void lmc_qdequant_row(const lmc_qweight *w, int64_t row, float *out) {
    if (quant_use_avx2())
        quant_dequant_tile_avx2(w, row, 1, 0, w->cols, out);
    else
        quant_dequant_range(w, row, 0, w->cols, out);
}

/* ---- parallel drivers --------------------------------------------------------------- */

typedef struct qjob {
    const lmc_qweight *w;
    const quant_qx *qx; /* [T] quantized tokens: the int8 path */
    int64_t r0, r1;
    const float *x;    /* [T, cols]; for T == 1 permuted as the kernel wants */
    const float *gsum; /* [ngroups], T == 1 only */
    int64_t T;
    float *y;
    int64_t ldy;
    bool avx2;
    bool avx512; /* the integer path of 4-bit weights: q4_avx512() */
    bool vnni;   /* the one-token AVX2 kernels with AVX-VNNI: avx2_vnni() */
} qjob;

static void matvec_body(void *ctx, int64_t b, int64_t e, int worker) {
    const qjob *j = ctx;
    (void)worker;
    if (j->avx2)
        quant_matvec_avx2(j->w, j->r0 + b, j->r0 + e, j->x, j->gsum, j->y + b);
    else
        quant_matvec_generic(j->w, j->r0 + b, j->r0 + e, j->x, j->gsum, j->y + b);
}

/* Integer path. Items are rows; for T > 1 a few rows at a time meet every token
 * while their packed data is in L1. */
#define Q8_ROW_BLOCK 4
static void matvec_q8_body(void *ctx, int64_t b, int64_t e, int worker) {
    const qjob *j = ctx;
    (void)worker;
    if (j->T == 1 && j->w->bits == 4 && j->avx2 && j->w->cols % 64 == 0) {
        /* these take a range their own way (rows a quarter apart) */
        if (j->avx512)
            quant_matvec_q4_avx512(j->w, j->r0 + b, j->r0 + e, &j->qx[0], j->y + b);
        else if (j->vnni)
            quant_matvec_q4_rows_avxvnni(j->w, j->r0 + b, j->r0 + e, &j->qx[0], j->y + b);
        else
            quant_matvec_q4_rows_avx2(j->w, j->r0 + b, j->r0 + e, &j->qx[0], j->y + b);
        return;
    }
    if (j->T == 1 && j->w->bits == 8 && j->avx2 && !j->avx512) {
        if (j->vnni)
            quant_matvec_q8_rows_avxvnni(j->w, j->r0 + b, j->r0 + e, &j->qx[0], j->y + b);
        else
            quant_matvec_q8_rows_avx2(j->w, j->r0 + b, j->r0 + e, &j->qx[0], j->y + b);
        return;
    }
    for (int64_t r = b; r < e; r += Q8_ROW_BLOCK) {
        int64_t re = r + Q8_ROW_BLOCK < e ? r + Q8_ROW_BLOCK : e;
        for (int64_t t = 0; t < j->T; t++) {
            float *yt = j->y + t * j->ldy + r;
            if (j->avx512)
                quant_matvec_q4_avx512(j->w, j->r0 + r, j->r0 + re, &j->qx[t], yt);
            else if (j->avx2)
                quant_matvec_q8_avx2(j->w, j->r0 + r, j->r0 + re, &j->qx[t], yt);
            else
                quant_matvec_q8_generic(j->w, j->r0 + r, j->r0 + re, &j->qx[t], yt);
        }
    }
}

/* Items are tiles of QUANT_TILE_ROWS rows. */
static void matmul_body(void *ctx, int64_t b, int64_t e, int worker) {
    const qjob *j = ctx;
    (void)worker;
    const lmc_qweight *w = j->w;
    _Alignas(64) float buf[QUANT_TILE_ROWS * QUANT_CHUNK_COLS];
    for (int64_t tile = b; tile < e; tile++) {
        int64_t r = j->r0 + tile * QUANT_TILE_ROWS;
        int nr = (int)(j->r1 - r < QUANT_TILE_ROWS ? j->r1 - r : QUANT_TILE_ROWS);
        float *yt = j->y + (r - j->r0);
        for (int64_t t = 0; t < j->T; t++)
            for (int i = 0; i < nr; i++) yt[t * j->ldy + i] = 0.0f;
        for (int64_t c0 = 0; c0 < w->cols; c0 += QUANT_CHUNK_COLS) {
            int64_t nc = w->cols - c0 < QUANT_CHUNK_COLS ? w->cols - c0 : QUANT_CHUNK_COLS;
            if (j->avx2) {
                quant_dequant_tile_avx2(w, r, nr, c0, nc, buf);
                quant_dense_tile_avx2(buf, nr, nc, j->x + c0, w->cols, j->T, yt, j->ldy);
            } else {
                for (int i = 0; i < nr; i++) quant_dequant_range(w, r + i, c0, nc, buf + i * nc);
                quant_dense_tile_generic(buf, nr, nc, j->x + c0, w->cols, j->T, yt, j->ldy);
            }
        }
    }
}

/* Rows per parallel chunk: enough work (~32K weights) to amortise the
 * fork-join. */
static int64_t row_grain(const lmc_qweight *w) {
    int64_t g = 32768 / w->cols;
    return g < 1 ? 1 : g;
}

/* The f32 sums of x per group, 8 partial sums (as the dot products). */
static void group_sums(const float *x, int64_t ng, int g, float *gsum) {
    for (int64_t k = 0; k < ng; k++) {
        float a[8] = {0};
        for (int i = 0; i < g; i += 8)
            for (int m = 0; m < 8; m++) a[m] += x[k * g + i + m];
        gsum[k] = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
    }
}

/* Quantizes one token for the integer path (quant_qx) into h, l [cols],
 * d [cols/32], dexp [cols/64 * 8], dp [cols/64], gsum and corr [ngroups]. span > 0: the
 * order of the 4-bit SIMD kernels, which read span * 16 packed bytes (span
 * blocks: 2 for AVX2, 4 for AVX-512) at a time as low nibbles (even columns)
 * and high nibbles (odd columns): within each span of blocks h and l hold
 * the even columns of block 0, of block 1, ..., then the odd columns of
 * block 0, of block 1, ...; blocks of a last, incomplete span hold their
 * even then their odd columns each. false when x has a NaN or infinity (the
 * caller then takes the exact path, which propagates them). */
static bool quantize_token(const float *x, int64_t cols, int g, int span, bool avx2, int8_t *xh,
                           int8_t *xl, float *d, float *dexp, float *dp, float *gsum, float *corr) {
    const int64_t nb = cols / QUANT_QBLOCK;
    const int bpg = g / QUANT_QBLOCK;
    float gacc = 0.0f;
    enum { BATCH = 256 };
    int32_t sums[BATCH];
    for (int64_t k0 = 0; k0 < nb; k0 += BATCH) {
        const int64_t n = nb - k0 < BATCH ? nb - k0 : BATCH;
        const float *xb = x + k0 * QUANT_QBLOCK;
        if (!(avx2 ? quant_qblocks_avx2 : quant_qblocks_generic)(xb, k0, n, nb, span, xh, xl,
                                                                 d + k0, sums))
            return false;
        for (int64_t k = k0; k < k0 + n; k++) {
            const float dk = d[k];
            if (2 * (k / 2) + 1 < nb) {
                for (int i = 0; i < 4; i++) dexp[k / 2 * 8 + (k & 1) * 4 + i] = dk;
                dp[k / 2] = dk; /* the pair's, the same for both */
            }
            /* the bias term takes the sums of the quantized x: then the error
             * of a row is sum_c w_c (x_c - x~_c), not sum_c s q_c (x_c - x~_c),
             * which is several times larger (s q ~ -b when w is small) */
            gacc += dk * (float)sums[k - k0];
            if (k % bpg == bpg - 1) {
                gsum[k / bpg] = gacc;
                corr[k / bpg] = 128.0f * gacc;
                gacc = 0.0f;
            }
        }
    }
    return true;
}

/* Quantized tokens for the integer path: one allocation. */
typedef struct qtokens {
    uint8_t *scratch; /* lmc_tmp_get's */
    bool owned;
    quant_qx *qx; /* [T] */
} qtokens;

/* The AVX-512 4-bit matvec takes w (on AVX-512 unless forced lower). */
static bool q4_avx512(const lmc_qweight *w) {
    return w->bits == 4 && w->cols % 128 == 0 && gemm_isa_active() == GEMM_AVX512;
}

/* The one-token AVX2 kernels take AVX-VNNI's dot products (where the GEMM
 * level is AVX2, not AVX-512, and the CPU has them). */
static bool avx2_vnni(void) {
    return gemm_isa_active() == GEMM_AVX2 && lmc_cpu_has_avxvnni();
}

/* Quantizes T tokens of x for weights like w; false (nothing to free) when
 * x has a non-finite value or the scratch cannot be allocated. */
static bool quantize_tokens(const lmc_qweight *w, const float *x, int64_t T, bool avx2,
                            qtokens *out) {
    const int64_t cols = w->cols, ng = quant_groups(w), nb = cols / QUANT_QBLOCK;
    const int64_t npair = nb / 2;
    /* per token: floats d, dexp, dp, gsum, corr, then the int8 digits h, l */
    const int64_t nf = nb + npair * 9 + 2 * ng;
    const size_t fbytes = ((size_t)nf * 4 + 63) / 64 * 64, qbytes = ((size_t)cols + 63) / 64 * 64;
    const size_t tok_bytes = fbytes + 2 * qbytes;
    const size_t head = (sizeof(quant_qx) * (size_t)T + 63) / 64 * 64;
    bool owned;
    uint8_t *scratch = lmc_tmp_get(LMC_SCRATCH_QTOKENS, head + tok_bytes * (size_t)T, &owned);
    if (!scratch) return false;
    quant_qx *qx = (quant_qx *)scratch;
    uint8_t *base = scratch + head;
    const int span = !avx2 || w->bits != 4 ? 0 : q4_avx512(w) ? 4 : 2;
    bool ok = true;
    for (int64_t t = 0; t < T && ok; t++) {
        float *f = (float *)(base + (size_t)t * tok_bytes);
        int8_t *h = (int8_t *)f + fbytes, *l = h + qbytes;
        float *dexp = f + nb, *dp = dexp + npair * 8, *gsum = dp + npair, *corr = gsum + ng;
        ok = quantize_token(x + t * cols, cols, w->group_size, span, avx2, h, l, f, dexp, dp, gsum,
                            corr);
        qx[t] =
            (quant_qx){.h = h, .l = l, .d = f, .dexp = dexp, .dp = dp, .gsum = gsum, .corr = corr};
    }
    if (!ok) {
        lmc_tmp_put(scratch, owned);
        return false;
    }
    *out = (qtokens){scratch, owned, qx};
    return true;
}

/* The integer path for T <= QUANT_FAST_MAX_T tokens; false (nothing written)
 * when x has a non-finite value or the scratch cannot be allocated. */
static bool qmatmul_fast(qjob *j) {
    qtokens q;
    if (!quantize_tokens(j->w, j->x, j->T, j->avx2, &q)) return false;
    j->qx = q.qx;
    lmc_parallel_for(j->r1 - j->r0, row_grain(j->w), matvec_q8_body, j);
    lmc_tmp_put(q.scratch, q.owned);
    return true;
}

/* ---- several weights over one x (q/k/v, gate/up) -------------------------- */

#define QMULTI_MAX 4
typedef struct qmulti_job {
    qjob j[QMULTI_MAX];            /* one per weight, sharing qx */
    int64_t first[QMULTI_MAX + 1]; /* rows before weight i in the joint loop */
    int n;
} qmulti_job;

static void multi_q8_body(void *ctx, int64_t b, int64_t e, int worker) {
    qmulti_job *m = ctx;
    for (int i = 0; i < m->n; i++) {
        int64_t lo = b > m->first[i] ? b : m->first[i];
        int64_t hi = e < m->first[i + 1] ? e : m->first[i + 1];
        if (lo < hi) matvec_q8_body(&m->j[i], lo - m->first[i], hi - m->first[i], worker);
    }
}

void lmc_qmatmul_multi(const lmc_qweight *const *ws, int n, const float *x, int64_t T,
                       float *const *ys) {
    bool same = n >= 2 && n <= QMULTI_MAX && T > 0;
    for (int i = 1; same && i < n; i++)
        same = ws[i]->cols == ws[0]->cols && ws[i]->bits == ws[0]->bits &&
               ws[i]->group_size == ws[0]->group_size;
    if (same && quant_fast_bits(ws[0]->bits) && !lmc_get_exact()) {
        if (T > QUANT_FAST_MAX_T) {
            int64_t r1[QMULTI_MAX], ld[QMULTI_MAX];
            for (int i = 0; i < n; i++) r1[i] = ld[i] = ws[i]->rows;
            if (qgemm_run_multi(ws, n, r1, x, T, ys, ld)) return;
        } else {
            int64_t r1[QMULTI_MAX], ld[QMULTI_MAX];
            for (int i = 0; i < n; i++) r1[i] = ld[i] = ws[i]->rows;
            if (qgemv_run_multi(ws, n, r1, x, T, ys, ld)) return;
            qmulti_job m = {.n = n};
            bool avx2 = quant_use_avx2();
            qtokens q;
            if (quantize_tokens(ws[0], x, T, avx2, &q)) {
                m.first[0] = 0;
                for (int i = 0; i < n; i++) {
                    m.j[i] = (qjob){.w = ws[i],
                                    .qx = q.qx,
                                    .r0 = 0,
                                    .r1 = ws[i]->rows,
                                    .x = x,
                                    .T = T,
                                    .y = ys[i],
                                    .ldy = ws[i]->rows,
                                    .avx2 = avx2,
                                    .avx512 = avx2 && q4_avx512(ws[0]),
                                    .vnni = avx2 && avx2_vnni()};
                    m.first[i + 1] = m.first[i] + ws[i]->rows;
                }
                lmc_parallel_for(m.first[n], row_grain(ws[0]), multi_q8_body, &m);
                lmc_tmp_put(q.scratch, q.owned);
                return;
            }
        }
    }
    for (int i = 0; i < n; i++) lmc_qmatmul(ws[i], x, T, ys[i]);
}

static void qmatmul_exact(const lmc_qweight *w, int64_t r0, int64_t r1, const float *x, int64_t T,
                          float *y, int64_t ldy);

void lmc_qmatmul_rows(const lmc_qweight *w, int64_t r0, int64_t r1, const float *x, int64_t T,
                      float *y, int64_t ldy) {
    if (T <= 0 || r1 <= r0) return;
    if (quant_fast_bits(w->bits) && T <= QUANT_FAST_MAX_T && !lmc_get_exact()) {
        /* AVX-512: the int16 VNNI matvec (qgemv_avx512.c) */
        lmc_qweight v = lmc_qweight_rows(w, r0, r1 - r0);
        const lmc_qweight *vs[1] = {&v};
        int64_t n1[1] = {r1 - r0}, ld1[1] = {ldy};
        float *ys1[1] = {y};
        if (qgemv_run_multi(vs, 1, n1, x, T, ys1, ld1)) return;
        qjob j = {.w = w,
                  .r0 = r0,
                  .r1 = r1,
                  .x = x,
                  .T = T,
                  .y = y,
                  .ldy = ldy,
                  .avx2 = quant_use_avx2()};
        j.avx512 = j.avx2 && q4_avx512(w);
        j.vnni = j.avx2 && avx2_vnni();
        if (qmatmul_fast(&j)) return;
    }
    /* prefill: the blocked int8 GEMM (qgemm.c) */
    if (quant_fast_bits(w->bits) && T > QUANT_FAST_MAX_T && !lmc_get_exact() &&
        qgemm_run(w, r0, r1, x, T, y, ldy))
        return;
    qmatmul_exact(w, r0, r1, x, T, y, ldy);
}

/* The order the T = 1 AVX2 kernel for `bits` reads x in: within each block of
 * QUANT_PERM_BLOCK columns, xp[b + j] = x[b + perm[j]]. NULL = natural order. */
static const int *x_permutation(int bits, bool avx2) {
    /* quant_matvec_avx2 for 4 bits widens 8 bytes to 32-bit lanes and splits
     * them into low nibbles (even columns) and high nibbles (odd columns). */
    static const int perm4[QUANT_PERM_BLOCK] = {0, 2, 4, 6, 8, 10, 12, 14,
                                                1, 3, 5, 7, 9, 11, 13, 15};
    return avx2 && bits == 4 ? perm4 : NULL;
}

static void qmatmul_exact(const lmc_qweight *w, int64_t r0, int64_t r1, const float *x, int64_t T,
                          float *y, int64_t ldy) {
    qjob j = {
        .w = w, .r0 = r0, .r1 = r1, .x = x, .T = T, .y = y, .ldy = ldy, .avx2 = quant_use_avx2()};
    if (T > 1) {
        int64_t tiles = (r1 - r0 + QUANT_TILE_ROWS - 1) / QUANT_TILE_ROWS;
        int64_t grain = row_grain(w) / QUANT_TILE_ROWS;
        lmc_parallel_for(tiles, grain < 1 ? 1 : grain, matmul_body, &j);
        return;
    }
    /* One token: the group sums of x and, for kernels that read x in a
     * permuted order, the permuted copy. Falls back to a token-at-a-time
     * pass through the tile path if the scratch cannot be allocated. */
    const int64_t cols = w->cols, ng = quant_groups(w);
    const int *perm = x_permutation(w->bits, j.avx2);
    bool owned;
    float *scratch =
        lmc_tmp_get(LMC_SCRATCH_QEXACT, sizeof(float) * (size_t)(ng + (perm ? cols : 0)), &owned);
    if (!scratch) {
        j.T = 1;
        int64_t tiles = (r1 - r0 + QUANT_TILE_ROWS - 1) / QUANT_TILE_ROWS;
        lmc_parallel_for(tiles, 1, matmul_body, &j);
        return;
    }
    float *gsum = scratch;
    group_sums(x, ng, w->group_size, gsum);
    if (perm) {
        float *xp = scratch + ng;
        for (int64_t c = 0; c < cols; c += QUANT_PERM_BLOCK)
            for (int m = 0; m < QUANT_PERM_BLOCK; m++) xp[c + m] = x[c + perm[m]];
        j.x = xp;
    }
    j.gsum = gsum;
    lmc_parallel_for(r1 - r0, row_grain(w), matvec_body, &j);
    lmc_tmp_put(scratch, owned);
}

void lmc_qmatmul(const lmc_qweight *w, const float *x, int64_t T, float *y) {
    lmc_qmatmul_rows(w, 0, w->rows, x, T, y, w->rows);
}
