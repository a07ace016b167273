/* MLX affine quantization: the quantizer against the numpy reference
 * (tests/reference/mlx_quant.py, vectors from make_quant_vectors.py), the
 * dequantization, lmc_qmatmul (generic and AVX2, one and several tokens,
 * one and two threads) against a double-precision reference, and the checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "kernels/gemm_internal.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "kernels/quant_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- fixture reader ------------------------------------------------------- */

typedef struct qcase {
    uint32_t bits, group, dtype, variant, rows, cols, has_deq;
    const float *w;
    const uint32_t *packed;
    const void *scales, *biases;
    const float *deq;
} qcase;

static uint8_t *g_file;
static qcase g_cases[128];
static int g_ncases;

static int load_vectors(void **state) {
    (void)state;
    const char *path = LMC_SOURCE_DIR "/tests/fixtures/quant/vectors.bin";
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    g_file = malloc((size_t)size);
    if (!g_file || fread(g_file, 1, (size_t)size, f) != (size_t)size) {
        fclose(f);
        return -1;
    }
    fclose(f);
    if (size < 12 || memcmp(g_file, "LMCQVEC1", 8) != 0) return -1;
    uint32_t count;
    memcpy(&count, g_file + 8, 4);
    size_t off = 12;
    for (uint32_t i = 0; i < count && i < 128; i++) {
        qcase *c = &g_cases[g_ncases++];
        memcpy(&c->bits, g_file + off, 28);
        off += 28;
        size_t n = (size_t)c->rows * c->cols, ng = n / c->group;
        size_t ss = c->dtype == LMC_DTYPE_F32 ? 4 : 2;
        c->w = (const float *)(g_file + off), off += n * 4;
        c->packed = (const uint32_t *)(g_file + off), off += n * c->bits / 8;
        c->scales = g_file + off, off += ng * ss;
        c->biases = g_file + off, off += ng * ss;
        c->deq = c->has_deq ? (const float *)(g_file + off) : NULL;
        if (c->has_deq) off += n * 4;
        if (off > (size_t)size) return -1;
    }
    return g_ncases == (int)count ? 0 : -1;
}

static int free_vectors(void **state) {
    (void)state;
    free(g_file);
    return 0;
}

static const char *dt_name(uint32_t dt) {
    return dt == LMC_DTYPE_F16 ? "f16" : dt == LMC_DTYPE_BF16 ? "bf16" : "f32";
}

/* ---- bit identity with the numpy MLX quantizer --------------------------------------- */

static void test_quantizer_matches_reference(void **state) {
    (void)state;
    assert_true(g_ncases > 0);
    int mismatched = 0;
    for (int i = 0; i < g_ncases; i++) {
        const qcase *c = &g_cases[i];
        size_t n = (size_t)c->rows * c->cols, ng = n / c->group;
        size_t ss = c->dtype == LMC_DTYPE_F32 ? 4 : 2;
        uint32_t *packed = malloc(n * c->bits / 8);
        void *s = malloc(ng * ss), *b = malloc(ng * ss);
        assert_int_equal(lmc_quantize_affine_ex(c->w, c->rows, c->cols, (int)c->bits, (int)c->group,
                                                (lmc_dtype)c->dtype, (lmc_quant_variant)c->variant,
                                                packed, s, b),
                         LMC_OK);
        bool okp = memcmp(packed, c->packed, n * c->bits / 8) == 0;
        bool oks = memcmp(s, c->scales, ng * ss) == 0;
        bool okb = memcmp(b, c->biases, ng * ss) == 0;
        if (!okp || !oks || !okb) {
            mismatched++;
            printf("mismatch: bits %u group %u %s %s: packed %d scales %d biases %d\n", c->bits,
                   c->group, dt_name(c->dtype), c->variant ? "gpu" : "cpu", okp, oks, okb);
        }
        free(packed), free(s), free(b);
    }
    assert_int_equal(mismatched, 0);
}

static void test_default_variant_is_cpu(void **state) {
    (void)state;
    for (int i = 0; i < g_ncases; i++) {
        const qcase *c = &g_cases[i];
        if (c->variant != 0) continue;
        size_t n = (size_t)c->rows * c->cols, ng = n / c->group;
        uint32_t *packed = malloc(n * c->bits / 8);
        uint16_t *s = malloc(ng * 2), *b = malloc(ng * 2);
        assert_int_equal(lmc_quantize_affine(c->w, c->rows, c->cols, (int)c->bits, (int)c->group,
                                             (lmc_dtype)c->dtype, packed, s, b),
                         LMC_OK);
        assert_memory_equal(packed, c->packed, n * c->bits / 8);
        assert_memory_equal(s, c->scales, ng * 2);
        assert_memory_equal(b, c->biases, ng * 2);
        free(packed), free(s), free(b);
    }
}

static lmc_qweight case_weight(const qcase *c) {
    lmc_qweight w = {.packed = c->packed,
                     .scales = c->scales,
                     .biases = c->biases,
                     .scale_dtype = (lmc_dtype)c->dtype,
                     .bits = (int)c->bits,
                     .group_size = (int)c->group,
                     .rows = c->rows,
                     .cols = c->cols};
    return w;
}

static void test_dequant_matches_reference(void **state) {
    (void)state;
    float *out = malloc(4096 * sizeof(float));
    uint8_t *q = malloc(4096);
    for (int simd = 0; simd < 2; simd++) {
        lmc_quant_use_simd(simd);
        for (int i = 0; i < g_ncases; i++) {
            const qcase *c = &g_cases[i];
            if (!c->deq) continue;
            lmc_qweight w = case_weight(c);
            assert_int_equal(lmc_qweight_check(&w, "case"), LMC_OK);
            for (uint32_t r = 0; r < c->rows; r++) {
                lmc_qdequant_row(&w, r, out);
                if (memcmp(out, c->deq + (size_t)r * c->cols, c->cols * 4) != 0) {
                    printf("dequant mismatch bits %u group %u %s row %u simd %d\n", c->bits,
                           c->group, dt_name(c->dtype), r, simd);
                    fail();
                }
                lmc_qunpack_row(&w, r, q);
                for (uint32_t k = 0; k < c->cols; k++) {
                    int64_t gi = (int64_t)r * (c->cols / c->group) + k / c->group;
                    float s = quant_load_scale(c->scales, (lmc_dtype)c->dtype, gi);
                    float b = quant_load_scale(c->biases, (lmc_dtype)c->dtype, gi);
                    float p = s * (float)q[k];
                    assert_true(p + b == c->deq[(size_t)r * c->cols + k]);
                }
            }
        }
    }
    lmc_quant_use_simd(true);
    free(out);
    free(q);
}

/* ---- matmul against double precision -------------------------------------------- */

static uint64_t g_rng = 88172645463325252ull;
static double urand(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) * (1.0 / 9007199254740992.0);
}
static float nrand(void) {
    double u = urand() + 1e-12, v = urand();
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

typedef struct qmat {
    lmc_qweight w;
    uint32_t *packed;
    void *scales, *biases;
    double *deq; /* [rows, cols] from the stored scales/biases, in double */
} qmat;

static void qmat_make(qmat *m, int64_t rows, int64_t cols, int bits, int group, lmc_dtype dt) {
    float *w = malloc(sizeof(float) * (size_t)(rows * cols));
    for (int64_t i = 0; i < rows * cols; i++) w[i] = nrand() * 0.1f + (i % 7 == 0 ? 0.05f : 0.0f);
    size_t ss = dt == LMC_DTYPE_F32 ? 4 : 2, ng = (size_t)(rows * cols / group);
    /* exact sizes, so that a sanitizer build catches reads past the end */
    m->packed = malloc((size_t)(rows * cols * bits / 8));
    m->scales = malloc(ng * ss);
    m->biases = malloc(ng * ss);
    assert_int_equal(
        lmc_quantize_affine(w, rows, cols, bits, group, dt, m->packed, m->scales, m->biases),
        LMC_OK);
    lmc_qweight q = {.packed = m->packed,
                     .scales = m->scales,
                     .biases = m->biases,
                     .scale_dtype = dt,
                     .bits = bits,
                     .group_size = group,
                     .rows = rows,
                     .cols = cols};
    m->w = q;
    assert_int_equal(lmc_qweight_check(&m->w, "m"), LMC_OK);
    m->deq = malloc(sizeof(double) * (size_t)(rows * cols));
    uint8_t *qv = malloc((size_t)cols);
    for (int64_t r = 0; r < rows; r++) {
        lmc_qunpack_row(&m->w, r, qv);
        for (int64_t c = 0; c < cols; c++) {
            int64_t g = r * (cols / group) + c / group;
            m->deq[r * cols + c] = (double)quant_load_scale(m->scales, dt, g) * qv[c] +
                                   (double)quant_load_scale(m->biases, dt, g);
        }
    }
    free(qv);
    free(w);
}

static void qmat_free(qmat *m) {
    free(m->packed), free(m->scales), free(m->biases), free(m->deq);
}

/* |y - ref| <= tol * sum |x w| per output. */
static int check_matmul(const qmat *m, const float *x, int64_t T, int64_t r0, int64_t r1,
                        const float *y, int64_t ldy, double tol) {
    int bad = 0;
    const int64_t cols = m->w.cols;
    for (int64_t t = 0; t < T; t++)
        for (int64_t r = r0; r < r1; r++) {
            double ref = 0, mag = 0;
            for (int64_t c = 0; c < cols; c++) {
                double p = (double)x[t * cols + c] * m->deq[r * cols + c];
                ref += p;
                mag += fabs(p);
            }
            double got = y[t * ldy + (r - r0)];
            if (!(fabs(got - ref) <= tol * mag + 1e-30)) {
                if (bad < 3)
                    printf("  t %lld r %lld: got %.9g want %.9g (mag %.3g)\n", (long long)t,
                           (long long)r, got, ref, mag);
                bad++;
            }
        }
    return bad;
}

static void test_qmatmul_matches_double(void **state) {
    (void)state;
    lmc_set_exact(1); /* f32 activations: the 2e-6 bound */
    static const int bits_list[] = {2, 3, 4, 5, 6, 8};
    static const int groups[] = {32, 64, 128};
    static const int64_t Ts[] = {1, 2, 3, 5, 16};
    static const lmc_dtype dts[] = {LMC_DTYPE_F16, LMC_DTYPE_BF16, LMC_DTYPE_F32};
    int failures = 0, runs = 0;
    for (int bi = 0; bi < 6; bi++)
        for (int gi = 0; gi < 3; gi++) {
            int bits = bits_list[bi], g = groups[gi];
            lmc_dtype dt = dts[(bi + gi) % 3];
            /* odd row counts; cols with a partial 512-column chunk */
            int64_t rows = 1 + 2 * ((bi * 3 + gi) % 9) + 6, cols = (int64_t)g * (1 + (bi + gi) % 5);
            if (bi == 2 && gi == 0) cols = 1152, rows = 13; /* several chunks, 4-bit g32 */
            qmat m;
            qmat_make(&m, rows, cols, bits, g, dt);
            float *x = malloc(sizeof(float) * (size_t)(16 * cols));
            float *y = malloc(sizeof(float) * (size_t)(16 * rows));
            for (int64_t i = 0; i < 16 * cols; i++) x[i] = nrand();
            for (int threads = 1; threads <= 2; threads++) {
                lmc_set_num_threads(threads);
                for (int simd = 0; simd < 2; simd++) {
                    lmc_quant_use_simd(simd);
                    for (int ti = 0; ti < 5; ti++) {
                        memset(y, 0xff, sizeof(float) * (size_t)(16 * rows));
                        lmc_qmatmul(&m.w, x, Ts[ti], y);
                        int bad = check_matmul(&m, x, Ts[ti], 0, rows, y, rows, 2e-6);
                        runs++;
                        if (bad) {
                            printf("qmatmul bits %d group %d %s rows %lld cols %lld T %lld simd %d "
                                   "threads %d: %d bad\n",
                                   bits, g, dt_name(dt), (long long)rows, (long long)cols,
                                   (long long)Ts[ti], simd, threads, bad);
                            failures++;
                        }
                    }
                }
            }
            free(x), free(y);
            qmat_free(&m);
        }
    lmc_set_num_threads(0);
    lmc_quant_use_simd(true);
    lmc_set_exact(0);
    assert_true(runs > 0);
    assert_int_equal(failures, 0);
}

/* The integer-activation path (lmc_get_exact() == 0): x is rounded per block
 * k of 32 to d_k * v, d_k = max|x| / QUANT_QMAX over k's pair of blocks (64
 * columns; a last, unpaired block its own 32), |x - d_k v| <= d_k / 2, and the
 * bias term uses the same rounded x, so per output the error against double
 * is at most sum_k d_k/2 * sum_{c in k} |w_c| plus f32 rounding of the two
 * terms s*dot(q, x) and b*sum(x) (bounded by 2e-6 * sum_c |x_c| (|s q_c| +
 * |b|)). Returns the outputs beyond it; *max_ratio gets the largest error /
 * bound, *differs whether any output differs from the exact path's (yex). */
static int check_fast(const qmat *m, const float *x, int64_t T, const float *y, const float *yex,
                      double *max_ratio, bool *differs) {
    int bad = 0;
    const int64_t cols = m->w.cols, rows = m->w.rows;
    const int g = m->w.group_size;
    uint8_t *qv = malloc((size_t)cols);
    for (int64_t r = 0; r < rows; r++) {
        lmc_qunpack_row(&m->w, r, qv);
        for (int64_t t = 0; t < T; t++) {
            const float *xt = x + t * cols;
            double ref = 0, mag = 0, qb = 0;
            for (int64_t c = 0; c < cols; c++) {
                int64_t gi = r * (cols / g) + c / g;
                double s = quant_load_scale(m->scales, m->w.scale_dtype, gi);
                double b = quant_load_scale(m->biases, m->w.scale_dtype, gi);
                ref += (double)xt[c] * m->deq[r * cols + c];
                mag += fabs((double)xt[c]) * (fabs(s * qv[c]) + fabs(b));
            }
            const int64_t nb = cols / 32;
            for (int64_t k = 0; k < nb; k++) {
                double amax = 0, sw = 0;
                const int64_t p = k & ~(int64_t)1, m2 = p + 1 < nb ? 64 : 32;
                for (int64_t c = p * 32; c < p * 32 + m2; c++)
                    amax = fmax(amax, fabs((double)xt[c]));
                for (int i = 0; i < 32; i++) sw += fabs(m->deq[r * cols + k * 32 + i]);
                qb += amax / QUANT_QMAX / 2.0 * sw;
            }
            double bound = qb * (1 + 1e-4) + 2e-6 * mag + 1e-30;
            double got = y[t * rows + r], err = fabs(got - ref);
            if (err / bound > *max_ratio) *max_ratio = err / bound;
            if (y[t * rows + r] != yex[t * rows + r]) *differs = true;
            if (!(err <= bound)) {
                if (bad < 3)
                    printf("  t %lld r %lld: got %.9g want %.9g (bound %.3g)\n", (long long)t,
                           (long long)r, got, ref, bound);
                bad++;
            }
        }
    }
    free(qv);
    return bad;
}

static void test_qmatmul_fast_matches_double(void **state) {
    (void)state;
    static const int bits_list[] = {2, 3, 4, 5, 6, 8};
    static const int groups[] = {32, 64, 128};
    static const int64_t Ts[] = {1, 5, 8, 70}; /* 70 > QUANT_FAST_MAX_T: the GEMM */
    static const lmc_dtype dts[] = {LMC_DTYPE_F16, LMC_DTYPE_BF16, LMC_DTYPE_F32};
    int failures = 0, runs = 0;
    for (int bi = 0; bi < 6; bi++)
        for (int gi = 0; gi < 3; gi++) {
            int bits = bits_list[bi], g = groups[gi];
            lmc_dtype dt = dts[(bi + gi) % 3];
            /* odd group counts (an unpaired last block for g32), > 64 groups
             * (two scale segments) for some */
            int64_t rows = 5 + 2 * ((bi * 3 + gi) % 7), cols = (int64_t)g * (1 + (bi + 2 * gi) % 5);
            if (gi == 0 && (bi == 2 || bi == 5)) cols = 32 * 67, rows = 9;
            if (gi == 1 && (bi == 2 || bi == 5)) cols = 64 * 70;
            qmat m;
            qmat_make(&m, rows, cols, bits, g, dt);
            float *x = malloc(sizeof(float) * (size_t)(70 * cols));
            float *y = malloc(sizeof(float) * (size_t)(70 * rows));
            float *yex = malloc(sizeof(float) * (size_t)(70 * rows));
            for (int64_t i = 0; i < 70 * cols; i++)
                x[i] = nrand() * (i % 97 == 3 ? 8.0f : 1.0f) * (i / 32 % 5 == 1 ? 0.01f : 1.0f);
            for (int64_t i = 0; i < 32 && i < cols; i++) x[i] = 0.0f; /* a zero block: d = 0 */
            for (int threads = 1; threads <= 2; threads++) {
                lmc_set_num_threads(threads);
                /* simd 2: the AVX2 kernels, forced where AVX-512 would
                 * take over (on an AVX2-only host simd 1 runs them), with
                 * AVX-VNNI where the CPU has it; simd 3: AVX2 without it */
                const bool vnni = lmc_cpu_has_avxvnni();
                for (int simd = 0; simd < 4; simd++) {
                    if (simd == 2 && !(lmc_cpu_has_avx512() && gemm_isa_force(GEMM_AVX2))) continue;
                    if (simd == 3 && !(vnni && gemm_isa_force(GEMM_AVX2))) continue;
                    if (simd == 3) lmc_cpu_avxvnni_allow(false);
                    lmc_quant_use_simd(simd > 0);
                    for (int ti = 0; ti < 4; ti++) {
                        lmc_set_exact(1);
                        lmc_qmatmul(&m.w, x, Ts[ti], yex);
                        lmc_set_exact(0);
                        memset(y, 0xff, sizeof(float) * (size_t)(70 * rows));
                        lmc_qmatmul(&m.w, x, Ts[ti], y);
                        double ratio = 0;
                        bool differs = false;
                        int bad = check_fast(&m, x, Ts[ti], y, yex, &ratio, &differs);
                        runs++;
                        /* 4 and 8 bits take the integer path (up to
                         * QUANT_FAST_MAX_T tokens the matvec, beyond it the
                         * int16 GEMM of qgemm.c, whose per-group rounding
                         * stays well inside this per-block bound); the
                         * others stay exact */
                        bool fast = bits == 4 || bits == 8;
                        if (bad || differs != fast || getenv("LMC_TEST_VERBOSE")) {
                            printf("fast qmatmul bits %d group %d %s rows %lld cols %lld T %lld "
                                   "simd %d threads %d: %d bad, max err/bound %.3g, differs "
                                   "from exact %d\n",
                                   bits, g, dt_name(dt), (long long)rows, (long long)cols,
                                   (long long)Ts[ti], simd, threads, bad, ratio, differs);
                            failures++;
                        }
                    }
                    gemm_isa_force(-1);
                    lmc_cpu_avxvnni_allow(vnni);
                }
            }
            free(x), free(y), free(yex);
            qmat_free(&m);
        }
    if (!lmc_cpu_has_avxvnni())
        printf("test_qmatmul_fast_matches_double: AVX-VNNI path skipped (CPU lacks it or "
               "LMC_NO_AVXVNNI)\n");
    lmc_set_num_threads(0);
    lmc_quant_use_simd(true);
    assert_true(runs > 0);
    assert_int_equal(failures, 0);
}

/* 8 bits at the extremes: q in {0, 255} against xq = +-127, where a plain
 * vpmaddubsw of u8 q and s8 x would saturate (2*255*127 > 32767); and a
 * non-finite x falls back to the exact path (NaN out). */
/* The 4- and 8-bit decode kernels (AVX-512: 16 groups' scales at a time in
 * registers, a last segment of fewer; AVX2) over every group size and scale
 * dtype, with column counts that give whole and partial segments and rows
 * that are not a multiple of the kernels' four. */
static void test_qmatvec_shapes(void **state) {
    (void)state;
    const bool vnni = lmc_cpu_has_avxvnni();
    if (!vnni)
        printf("test_qmatvec_shapes: AVX-VNNI path skipped (CPU lacks it or LMC_NO_AVXVNNI)\n");
    static const int groups[] = {32, 64, 128};
    static const lmc_dtype dts[] = {LMC_DTYPE_F16, LMC_DTYPE_BF16, LMC_DTYPE_F32};
    static const int64_t colsv[] = {128, 128 * 9, 128 * 17};
    int failures = 0;
    for (int bits = 4; bits <= 8; bits += 4)
        for (int gi = 0; gi < 3; gi++)
            for (int di = 0; di < 3; di++)
                for (int ci = 0; ci < 3; ci++) {
                    const int64_t rows = 4 * (gi + ci) + 1 + di, cols = colsv[ci];
                    qmat m;
                    qmat_make(&m, rows, cols, bits, groups[gi], dts[di]);
                    float *x = malloc(sizeof(float) * (size_t)cols),
                          *y = malloc(sizeof(float) * (size_t)rows),
                          *yex = malloc(sizeof(float) * (size_t)rows);
                    for (int64_t i = 0; i < cols; i++)
                        x[i] = nrand() * (i / 32 % 3 == 1 ? 0.02f : 1.0f);
                    /* simd 0 generic, 1 the best, 2 AVX2 (forced below
                     * AVX-512) with AVX-VNNI, 3 AVX2 without it: the
                     * AVX-VNNI 4-bit kernel gives the same bits as 3 */
                    float *yv = malloc(sizeof(float) * (size_t)rows);
                    bool have_v = false;
                    for (int simd = 0; simd < 4; simd++) {
                        if (simd >= 2 && !(vnni && gemm_isa_force(GEMM_AVX2))) continue;
                        lmc_cpu_avxvnni_allow(simd != 3 && vnni);
                        lmc_quant_use_simd(simd > 0);
                        lmc_set_exact(1);
                        lmc_qmatmul(&m.w, x, 1, yex);
                        lmc_set_exact(0);
                        memset(y, 0xff, sizeof(float) * (size_t)rows);
                        lmc_qmatmul(&m.w, x, 1, y);
                        gemm_isa_force(-1);
                        lmc_cpu_avxvnni_allow(vnni);
                        double ratio = 0;
                        bool differs = false;
                        int bad = check_fast(&m, x, 1, y, yex, &ratio, &differs);
                        if (simd == 2) memcpy(yv, y, sizeof(float) * (size_t)rows), have_v = true;
                        if (simd == 3 && bits == 4 && have_v &&
                            memcmp(yv, y, sizeof(float) * (size_t)rows) != 0) {
                            printf("q4 matvec group %d %s cols %lld: AVX-VNNI and AVX2 differ\n",
                                   groups[gi], dt_name(dts[di]), (long long)cols);
                            failures++;
                        }
                        if (bad) {
                            printf(
                                "q%d matvec group %d %s rows %lld cols %lld simd %d: %d bad (max "
                                "err/bound %.3g)\n",
                                bits, groups[gi], dt_name(dts[di]), (long long)rows,
                                (long long)cols, simd, bad, ratio);
                            failures++;
                        }
                    }
                    free(yv);
                    free(x), free(y), free(yex);
                    qmat_free(&m);
                }
    lmc_quant_use_simd(true);
    assert_int_equal(failures, 0);
}

static void test_qmatmul_fast_extremes(void **state) {
    (void)state;
    enum { rows = 6, cols = 256, ng = cols / 64 };
    float x[2 * cols], y[2 * rows], yex[2 * rows];
    for (int i = 0; i < cols; i++) x[i] = 1.0f, x[cols + i] = (i % 3) ? -2.5f : 2.5f;
    for (int bits = 4; bits <= 8; bits += 4) {
        const int qmax = (1 << bits) - 1;
        qmat m = {0};
        uint8_t *packed = calloc(1, (size_t)(rows * cols * bits / 8));
        uint16_t *sc = malloc(sizeof(uint16_t) * rows * ng),
                 *bs = malloc(sizeof(uint16_t) * rows * ng);
        m.deq = malloc(sizeof(double) * rows * cols);
        for (int r = 0; r < rows; r++) {
            for (int j = 0; j < ng; j++) {
                sc[r * ng + j] = lmc_f32_to_bf16(r % 2 ? 0.01f : -0.03f);
                bs[r * ng + j] = lmc_f32_to_bf16(r % 3 ? 1.0f : -0.5f);
            }
            for (int c = 0; c < cols; c++) {
                int q = (c % 64 == 5 || (r >= 3 && c % 2)) ? 0 : qmax;
                if (bits == 8)
                    packed[r * cols + c] = (uint8_t)q;
                else
                    packed[(r * cols + c) / 2] |= (uint8_t)(q << (4 * (c % 2)));
                int gi = r * ng + c / 64;
                m.deq[r * cols + c] = (double)lmc_bf16_to_f32(sc[gi]) * q + lmc_bf16_to_f32(bs[gi]);
            }
        }
        m.packed = (uint32_t *)packed, m.scales = sc, m.biases = bs;
        m.w = (lmc_qweight){.packed = m.packed,
                            .scales = sc,
                            .biases = bs,
                            .scale_dtype = LMC_DTYPE_BF16,
                            .bits = bits,
                            .group_size = 64,
                            .rows = rows,
                            .cols = cols};
        assert_int_equal(lmc_qweight_check(&m.w, "m"), LMC_OK);
        for (int simd = 0; simd < 2; simd++) {
            lmc_quant_use_simd(simd);
            for (int64_t T = 1; T <= 2; T++) {
                lmc_set_exact(1);
                lmc_qmatmul(&m.w, x, T, yex);
                lmc_set_exact(0);
                lmc_qmatmul(&m.w, x, T, y);
                double ratio = 0;
                bool differs = false;
                assert_int_equal(check_fast(&m, x, T, y, yex, &ratio, &differs), 0);
            }
            float xn[cols];
            memcpy(xn, x, sizeof xn);
            xn[77] = NAN;
            lmc_qmatmul(&m.w, xn, 1, y);
            for (int r = 0; r < rows; r++) assert_true(isnan(y[r]));
        }
        qmat_free(&m);
    }
    lmc_quant_use_simd(true);
}

/* The activation quantizer's generic C and AVX2 paths: the same bytes and
 * floats for every span (0: natural order; 2, 4: the 4-bit SIMD kernels'),
 * whole and partial spans, batches that start past block 0, zeros, values
 * at the rounding ties and at the clamp, tiny and huge scales; both report
 * a NaN or an infinity. */
static void test_qblocks_paths_agree(void **state) {
    (void)state;
    if (!lmc_cpu_has_avx2_fma_f16c()) {
        printf("test_qblocks_paths_agree: skipped, no AVX2 on this CPU\n");
        skip();
    }
    enum { NB = 23, COLS = NB * QUANT_QBLOCK };
    static float x[COLS];
    static int8_t h[2][COLS], l[2][COLS];
    float d[2][NB];
    int32_t sums[2][NB];
    int cases = 0;
    for (int trial = 0; trial < 40; trial++) {
        for (int i = 0; i < COLS; i++) {
            float scale = trial % 5 == 0 ? 1e-30f : trial % 5 == 1 ? 1e30f : 1.0f;
            x[i] = nrand() * scale * (i / 32 % 3 == 1 ? 0.001f : 1.0f);
        }
        for (int i = 0; i < 64; i++) x[64 * (trial % (NB / 2)) + i] = 0.0f; /* d = 0 */
        /* a pair of blocks scaled by exactly 1 (max QUANT_QMAX) whose values
         * are ties, k + 0.5, both signs, and the clamp */
        for (int i = 0; i < 64; i++) {
            float *xb = x + 64 * ((trial + 5) % (NB / 2));
            xb[i] = i == 0 ? (float)QUANT_QMAX
                    : i == 1
                        ? -(float)QUANT_QMAX
                        : (i % 2 ? -1.0f : 1.0f) * ((float)(i * 1013 % (QUANT_QMAX - 1)) + 0.5f);
        }
        for (int span = 0; span <= 4; span += 2)
            for (int64_t k0 = 0; k0 < NB; k0 += 8) {
                int64_t n = NB - k0 < 8 ? NB - k0 : 8;
                memset(h, 0x55, sizeof h), memset(l, 0x55, sizeof l);
                bool ok0 =
                    quant_qblocks_generic(x + k0 * 32, k0, n, NB, span, h[0], l[0], d[0], sums[0]);
                bool ok1 =
                    quant_qblocks_avx2(x + k0 * 32, k0, n, NB, span, h[1], l[1], d[1], sums[1]);
                assert_true(ok0 && ok1);
                assert_memory_equal(h[0], h[1], sizeof h[0]);
                assert_memory_equal(l[0], l[1], sizeof l[0]);
                assert_memory_equal(d[0], d[1], sizeof(float) * (size_t)n);
                assert_memory_equal(sums[0], sums[1], sizeof(int32_t) * (size_t)n);
                /* a pair of blocks shares the scale of its 64 columns */
                for (int64_t j = 0; j < n; j++) {
                    const int64_t p = j & ~1, m = p + 1 < n ? 64 : 32;
                    float amax = 0.0f;
                    for (int64_t c = 0; c < m; c++) amax = fmaxf(amax, fabsf(x[(k0 + p) * 32 + c]));
                    assert_true(d[0][j] == amax / (float)QUANT_QMAX);
                }
                cases++;
            }
    }
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int b = 0; b < 3; b++) {
        for (int i = 0; i < COLS; i++) x[i] = nrand();
        x[32 * 4 + 17] = bad[b];
        assert_false(quant_qblocks_generic(x, 0, NB, NB, 4, h[0], l[0], d[0], sums[0]));
        assert_false(quant_qblocks_avx2(x, 0, NB, NB, 4, h[1], l[1], d[1], sums[1]));
    }
    assert_true(cases > 100);
}

static void test_exact_switch(void **state) {
    (void)state;
    lmc_set_exact(1);
    assert_int_equal(lmc_get_exact(), 1);
    lmc_set_exact(0);
    assert_int_equal(lmc_get_exact(), 0);
}

static void test_qmatmul_rows_and_views(void **state) {
    (void)state;
    /* a stacked [E=3, 10, 256] 4-bit weight; expert 1 through a row view,
     * and rows [3, 9) of it written with a wider ldy */
    qmat m;
    qmat_make(&m, 30, 256, 4, 64, LMC_DTYPE_F16);
    lmc_set_exact(1);
    float x[3 * 256], y[3 * 20];
    for (int i = 0; i < 3 * 256; i++) x[i] = nrand();
    for (int simd = 0; simd < 2; simd++) {
        lmc_quant_use_simd(simd);
        for (int64_t T = 1; T <= 3; T++) {
            lmc_qweight e1 = lmc_qweight_rows(&m.w, 10, 10);
            memset(y, 0, sizeof y);
            lmc_qmatmul_rows(&e1, 3, 9, x, T, y, 20);
            /* the reference for expert 1's rows 3..8 are rows 13..18 of m */
            assert_int_equal(check_matmul(&m, x, T, 13, 19, y, 20, 2e-6), 0);
            for (int64_t t = 0; t < T; t++)
                for (int k = 6; k < 20; k++) assert_true(y[t * 20 + k] == 0.0f);
        }
    }
    lmc_quant_use_simd(true);
    lmc_set_exact(0);
    assert_int_equal(lmc_qweight_nbytes(&m.w), 30 * 128 + 2 * 30 * 4 * 2);
    qmat_free(&m);
}

/* ---- checks ------------------------------------------------------------------------ */

static void test_qweight_check_rejects(void **state) {
    (void)state;
    uint32_t packed[64] = {0};
    uint16_t s[8] = {0}, b[8] = {0};
    lmc_qweight ok = {.packed = packed,
                      .scales = s,
                      .biases = b,
                      .scale_dtype = LMC_DTYPE_F16,
                      .bits = 4,
                      .group_size = 64,
                      .rows = 2,
                      .cols = 128};
    assert_int_equal(lmc_qweight_check(&ok, "w"), LMC_OK);
    lmc_qweight w = ok;
    w.bits = 7;
    assert_int_equal(lmc_qweight_check(&w, "layer.q_proj"), LMC_ERR_UNSUPPORTED);
    assert_non_null(strstr(lmc_last_error(), "layer.q_proj"));
    assert_non_null(strstr(lmc_last_error(), "7-bit"));
    w.bits = 1;
    assert_int_equal(lmc_qweight_check(&w, NULL), LMC_ERR_UNSUPPORTED);
    w.bits = 16;
    assert_int_equal(lmc_qweight_check(&w, NULL), LMC_ERR_UNSUPPORTED);
    w = ok, w.group_size = 16;
    assert_int_equal(lmc_qweight_check(&w, NULL), LMC_ERR_UNSUPPORTED);
    w = ok, w.group_size = 256;
    assert_int_equal(lmc_qweight_check(&w, NULL), LMC_ERR_UNSUPPORTED);
    w = ok, w.cols = 96; /* not a multiple of 64 */
    assert_int_equal(lmc_qweight_check(&w, "x"), LMC_ERR_SHAPE);
    assert_non_null(strstr(lmc_last_error(), "multiple of the group size"));
    w = ok, w.rows = 0;
    assert_int_equal(lmc_qweight_check(&w, NULL), LMC_ERR_SHAPE);
    w = ok, w.scale_dtype = LMC_DTYPE_I32;
    assert_int_equal(lmc_qweight_check(&w, NULL), LMC_ERR_UNSUPPORTED);
    w = ok, w.scales = NULL;
    assert_int_equal(lmc_qweight_check(&w, NULL), LMC_ERR_INVALID_ARG);
    assert_int_equal(lmc_qweight_check(NULL, NULL), LMC_ERR_INVALID_ARG);
}

static lmc_tensor tensor2(lmc_dtype dt, int64_t a, int64_t b, const void *data, size_t esize) {
    lmc_tensor t = {.name = "t", .dtype = dt, .ndim = 2, .shape = {a, b}, .data = data};
    t.nbytes = (uint64_t)(a * b) * esize;
    return t;
}

static void test_from_tensors(void **state) {
    (void)state;
    static uint32_t packed[3 * 2 * 64];
    static uint16_t s[3 * 2 * 4], b[3 * 2 * 4];
    /* 4-bit, g64, [2, 512]: packed [2, 64], scales [2, 8] */
    lmc_tensor tw = tensor2(LMC_DTYPE_U32, 2, 64, packed, 4);
    lmc_tensor ts = tensor2(LMC_DTYPE_F16, 2, 8, s, 2), tb = tensor2(LMC_DTYPE_F16, 2, 8, b, 2);
    lmc_qweight q;
    assert_int_equal(lmc_qweight_from_tensors(&tw, &ts, &tb, 4, 64, "lin", &q), LMC_OK);
    assert_int_equal(q.rows, 2);
    assert_int_equal(q.cols, 512);
    /* the same tensors read as 8-bit or group 32: the widths disagree */
    assert_int_equal(lmc_qweight_from_tensors(&tw, &ts, &tb, 8, 64, "lin", &q), LMC_ERR_SHAPE);
    assert_non_null(strstr(lmc_last_error(), "packed width"));
    assert_int_equal(lmc_qweight_from_tensors(&tw, &ts, &tb, 4, 32, "lin", &q), LMC_ERR_SHAPE);
    assert_int_equal(lmc_qweight_from_tensors(&tw, &ts, &tb, 3, 64, "lin", &q), LMC_ERR_SHAPE);
    assert_int_equal(lmc_qweight_from_tensors(&tw, &ts, &tb, 7, 64, "lin", &q),
                     LMC_ERR_UNSUPPORTED);
    /* 3-bit: 512 values = 48 words; scales [2, 8] */
    lmc_tensor tw3 = tensor2(LMC_DTYPE_U32, 2, 48, packed, 4);
    assert_int_equal(lmc_qweight_from_tensors(&tw3, &ts, &tb, 3, 64, "lin", &q), LMC_OK);
    assert_int_equal(q.cols, 512);
    /* packed width not a whole number of 5-bit values */
    lmc_tensor tw63 = tensor2(LMC_DTYPE_U32, 2, 63, packed, 4); /* 63*32 % 5 != 0 */
    assert_int_equal(lmc_qweight_from_tensors(&tw63, &ts, &tb, 5, 64, "lin", &q), LMC_ERR_SHAPE);
    /* dtypes */
    lmc_tensor bad = tw;
    bad.dtype = LMC_DTYPE_F32;
    assert_int_equal(lmc_qweight_from_tensors(&bad, &ts, &tb, 4, 64, "lin", &q), LMC_ERR_FORMAT);
    lmc_tensor tbb = tb;
    tbb.dtype = LMC_DTYPE_BF16;
    assert_int_equal(lmc_qweight_from_tensors(&tw, &ts, &tbb, 4, 64, "lin", &q), LMC_ERR_FORMAT);
    /* row mismatch */
    lmc_tensor ts1 = tensor2(LMC_DTYPE_F16, 1, 8, s, 2);
    assert_int_equal(lmc_qweight_from_tensors(&tw, &ts1, &ts1, 4, 64, "lin", &q), LMC_ERR_SHAPE);
    /* short data */
    lmc_tensor tshort = tw;
    tshort.nbytes -= 4;
    assert_int_equal(lmc_qweight_from_tensors(&tshort, &ts, &tb, 4, 64, "lin", &q), LMC_ERR_FORMAT);
    /* stacked experts [3, 2, 64] fold into 6 rows */
    lmc_tensor e = {.name = "e",
                    .dtype = LMC_DTYPE_U32,
                    .ndim = 3,
                    .shape = {3, 2, 64},
                    .data = packed,
                    .nbytes = sizeof packed};
    lmc_tensor es = {.name = "es",
                     .dtype = LMC_DTYPE_F16,
                     .ndim = 3,
                     .shape = {3, 2, 4},
                     .data = s,
                     .nbytes = sizeof s};
    lmc_tensor eb = es;
    eb.data = b;
    assert_int_equal(lmc_qweight_from_tensors(&e, &es, &eb, 4, 128, "experts", &q), LMC_OK);
    assert_int_equal(q.rows, 6);
    assert_int_equal(q.cols, 512);
}

static void test_quantize_rejects(void **state) {
    (void)state;
    float w[256] = {0};
    uint32_t p[64];
    uint16_t s[8], b[8];
    assert_int_equal(lmc_quantize_affine(w, 2, 128, 7, 64, LMC_DTYPE_F16, p, s, b),
                     LMC_ERR_UNSUPPORTED);
    assert_int_equal(lmc_quantize_affine(w, 2, 128, 4, 48, LMC_DTYPE_F16, p, s, b),
                     LMC_ERR_UNSUPPORTED);
    assert_int_equal(lmc_quantize_affine(w, 4, 64, 4, 128, LMC_DTYPE_F16, p, s, b), LMC_ERR_SHAPE);
    assert_int_equal(lmc_quantize_affine(w, 2, 128, 4, 64, LMC_DTYPE_U8, p, s, b),
                     LMC_ERR_UNSUPPORTED);
    assert_int_equal(lmc_quantize_affine(NULL, 2, 128, 4, 64, LMC_DTYPE_F16, p, s, b),
                     LMC_ERR_INVALID_ARG);
    /* an all-zero matrix: scale = -eps (f16 rounds it to -1.19e-7), bias 0, q 0 */
    assert_int_equal(lmc_quantize_affine(w, 2, 128, 4, 64, LMC_DTYPE_F16, p, s, b), LMC_OK);
    for (int i = 0; i < 32; i++) assert_int_equal(p[i], 0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(b[i], 0);
        assert_true(lmc_f16_to_f32(s[i]) == lmc_f16_to_f32(lmc_f32_to_f16(-(float)1e-7)));
    }
}

static void test_half_conversions(void **state) {
    (void)state;
    /* every half round-trips; f32 -> f16 rounds to nearest even */
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = lmc_f16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        assert_int_equal(lmc_f32_to_f16(f), h);
    }
    assert_int_equal(lmc_f32_to_f16(1.0f + 1.0f / 2048), 0x3C00); /* tie -> even */
    assert_int_equal(lmc_f32_to_f16(1.0f + 3.0f / 2048), 0x3C02); /* tie -> even */
    assert_int_equal(lmc_f32_to_f16(65520.0f), 0x7C00);           /* overflow */
    assert_int_equal(lmc_f32_to_f16(1e-8f), 0x0000);              /* underflow */
    assert_int_equal(lmc_f32_to_f16(3e-8f), 0x0001);              /* > half min */
    assert_int_equal(lmc_f32_to_bf16(1.0f + 1.0f / 256), 0x3F80);
    assert_int_equal(lmc_f32_to_bf16(1.0f + 3.0f / 256), 0x3F82);
    assert_int_equal(lmc_f32_to_bf16(NAN), 0x7FC0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_half_conversions),
        cmocka_unit_test(test_quantizer_matches_reference),
        cmocka_unit_test(test_default_variant_is_cpu),
        cmocka_unit_test(test_dequant_matches_reference),
        cmocka_unit_test(test_qmatmul_matches_double),
        cmocka_unit_test(test_qmatmul_fast_matches_double),
        cmocka_unit_test(test_qmatvec_shapes),
        cmocka_unit_test(test_qmatmul_fast_extremes),
        cmocka_unit_test(test_qblocks_paths_agree),
        cmocka_unit_test(test_exact_switch),
        cmocka_unit_test(test_qmatmul_rows_and_views),
        cmocka_unit_test(test_qweight_check_rejects),
        cmocka_unit_test(test_from_tensors),
        cmocka_unit_test(test_quantize_rejects),
    };
    return cmocka_run_group_tests(tests, load_vectors, free_vectors);
}
