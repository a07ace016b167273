/* The blocked prefill GEMMs (kernels/qgemm*.c, gemm*.c) on every SIMD path
 * the host supports (generic C, AVX2, AVX-512; the ones it lacks are named
 * as skipped) against double-precision references with the error bound of
 * the activation rounding, and against each other. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "kernels/gemm_internal.h"
#include "kernels/kernels.h"
#include "kernels/quant_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *isa_names[3] = {"generic", "avx2", "avx512"};

static uint64_t rng = 0x243f6a8885a308d3ull;
static float frand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void report_skipped(void) {
    static bool done;
    if (done) return;
    done = true;
    for (int isa = 1; isa < 3; isa++)
        if (!gemm_isa_force(isa))
            print_message("test_gemm: %s path skipped (CPU lacks it or LMC_NO_AVX512)\n",
                          isa_names[isa]);
    gemm_isa_force(-1);
}

typedef struct qcase {
    int bits, group;
    lmc_dtype sdt;
    int64_t rows, cols, T;
} qcase;

/* One output in double: the dot product, the sum of |x w| and the bound
 * of the activation rounding (max|x| / vmax / 2 per group, times |w|). */
static void reference(const float *xt, const double *wr, int64_t cols, int g, int ablock,
                      double vmax, double *ref, double *mag, double *qb) {
    *ref = *mag = *qb = 0;
    const int win = ablock > g ? ablock : g; /* columns of one activation scale, or more */
    for (int64_t k = 0; k < cols; k += g) {
        double amax = 0, sw = 0;
        for (int i = 0; i < g; i++) {
            *ref += (double)xt[k + i] * wr[k + i];
            *mag += fabs((double)xt[k + i] * wr[k + i]);
            sw += fabs(wr[k + i]);
        }
        for (int64_t c = k - k % win; c < k - k % win + win && c < cols; c++)
            amax = fmax(amax, fabs((double)xt[c]));
        *qb += amax / vmax / 2.0 * sw;
    }
}

/* Error bound of the int16 path for one output: the activation rounding
 * (|x - d v| <= d/2, d = max|x|/32767 per weight group) times |w|, plus f32
 * accumulation (1e-5 of sum |x w|). */
static void check_q(const qcase *c) {
    const int64_t rows = c->rows, cols = c->cols, T = c->T, ng = cols / c->group;
    float *wf = malloc(sizeof(float) * (size_t)(rows * cols));
    for (int64_t i = 0; i < rows * cols; i++) wf[i] = 0.05f * frand();
    uint32_t *packed = malloc((size_t)(rows * cols * c->bits / 8));
    void *sc = malloc((size_t)(rows * ng) * 4), *bi = malloc((size_t)(rows * ng) * 4);
    assert_int_equal(lmc_quantize_affine(wf, rows, cols, c->bits, c->group, c->sdt, packed, sc, bi),
                     LMC_OK);
    lmc_qweight w = {.packed = packed,
                     .scales = sc,
                     .biases = bi,
                     .scale_dtype = c->sdt,
                     .bits = c->bits,
                     .group_size = c->group,
                     .rows = rows,
                     .cols = cols};
    double *deq = malloc(sizeof(double) * (size_t)(rows * cols));
    float *row = malloc(sizeof(float) * (size_t)cols);
    for (int64_t r = 0; r < rows; r++) {
        lmc_qdequant_row(&w, r, row);
        for (int64_t k = 0; k < cols; k++) deq[r * cols + k] = row[k];
    }
    float *x = malloc(sizeof(float) * (size_t)(T * cols));
    for (int64_t i = 0; i < T * cols; i++)
        x[i] = frand() * (i % 89 == 7 ? 10.0f : 1.0f) * (i / 32 % 7 == 2 ? 0.01f : 1.0f);
    for (int64_t i = 0; i < c->group; i++) x[cols + i] = 0.0f; /* a zero group */
    float *y[3] = {0};
    for (int isa = 0; isa < 3; isa++) {
        if (!gemm_isa_force(isa)) continue;
        y[isa] = malloc(sizeof(float) * (size_t)(T * rows));
        if (isa == GEMM_GENERIC) lmc_quant_use_simd(false);
        for (int threads = 1; threads <= 2; threads++) {
            lmc_set_num_threads(threads);
            memset(y[isa], 0xff, sizeof(float) * (size_t)(T * rows));
            assert_true(qgemm_run(&w, 0, rows, x, T, y[isa], rows));
            int bad = 0;
            for (int64_t t = 0; t < T; t++)
                for (int64_t r = 0; r < rows; r++) {
                    double ref, mag, qb;
                    reference(x + t * cols, deq + r * cols, cols, c->group, 0, 32767.0, &ref, &mag,
                              &qb);
                    double err = fabs(y[isa][t * rows + r] - ref);
                    if (!(err <= qb * 1.001 + 1e-5 * mag + 1e-30) && bad++ < 3)
                        print_error("%s %d-bit g%d %s [%lld x %lld] T %lld threads %d: t %lld r "
                                    "%lld: %.9g vs %.9g (bound %.3g)\n",
                                    isa_names[isa], c->bits, c->group, lmc_dtype_name(c->sdt),
                                    (long long)rows, (long long)cols, (long long)T, threads,
                                    (long long)t, (long long)r, y[isa][t * rows + r], ref, qb);
                }
            assert_int_equal(bad, 0);
        }
        /* decode sizes through lmc_qmatmul: the matvec of this level
         * (AVX-512: qgemv_avx512.c for groups 64/128; else the two-digit
         * int16 matvec of quant.c) */
        /* one token (the matvec kernels of 4 bits take rows a quarter of
         * the range apart) and up to 8 */
        for (int pass = 0; pass < 2; pass++) {
            int64_t Td = pass ? (T < 8 ? T : 8) : 1;
            lmc_set_exact(0);
            memset(y[isa], 0xff, sizeof(float) * (size_t)(T * rows));
            lmc_qmatmul(&w, x, Td, y[isa]);
            for (int64_t t = 0; t < Td; t++)
                for (int64_t r = 0; r < rows; r++) {
                    double ref, mag, qb;
                    reference(x + t * cols, deq + r * cols, cols, c->group, 2 * QUANT_QBLOCK,
                              QUANT_QMAX, &ref, &mag, &qb);
                    double err = fabs(y[isa][t * rows + r] - ref);
                    if (!(err <= qb * 1.001 + 1e-5 * mag + 1e-30))
                        fail_msg("decode %s %d-bit g%d T %lld: t %lld r %lld: %.9g vs %.9g",
                                 isa_names[isa], c->bits, c->group, (long long)Td, (long long)t,
                                 (long long)r, y[isa][t * rows + r], ref);
                }
        }
        lmc_set_exact(1);
        lmc_quant_use_simd(true);
    }
    /* the SIMD paths compute the generic path's integer dots: only the f32
     * summation order differs */
    double rms = 0;
    for (int64_t i = 0; i < T * rows; i++) rms += (double)y[0][i] * y[0][i];
    rms = sqrt(rms / (double)(T * rows));
    for (int isa = 1; isa < 3; isa++) {
        if (!y[isa]) continue;
        for (int64_t i = 0; i < T * rows; i++) {
            double a = y[0][i], b = y[isa][i];
            if (fabs(a - b) > 1e-5 * rms)
                fail_msg("%s vs generic at %lld: %.9g vs %.9g", isa_names[isa], (long long)i, b, a);
        }
    }
    gemm_isa_force(-1);
    lmc_set_num_threads(0);
    for (int isa = 0; isa < 3; isa++) free(y[isa]);
    free(wf), free(packed), free(sc), free(bi), free(deq), free(row), free(x);
}

static void test_qgemm_paths(void **state) {
    (void)state;
    report_skipped();
    const qcase cases[] = {
        {4, 64, LMC_DTYPE_BF16, 64, 512, 16},
        {8, 64, LMC_DTYPE_BF16, 64, 512, 16},
        {4, 32, LMC_DTYPE_F16, 37, 1152, 13},
        {8, 32, LMC_DTYPE_F32, 45, 1152, 9},
        {4, 128, LMC_DTYPE_F32, 33, 640, 70},
        {8, 128, LMC_DTYPE_F16, 17, 256, 11},
        {4, 64, LMC_DTYPE_F16, 5, 2048, 10},
        {8, 64, LMC_DTYPE_BF16, 96, 64, 130},
        {4, 32, LMC_DTYPE_BF16, 1, 32, 9},
        {8, 32, LMC_DTYPE_BF16, 3, 96, 2},
        {4, 32, LMC_DTYPE_BF16, 9, 33024, 2}, /* > 1022 groups a row: scales per segment */
        /* with the 9 .. 130 above, every count of tokens past the AVX-512
         * tile's steps of 8 (0 to 7) */
        {4, 64, LMC_DTYPE_BF16, 40, 256, 15},
        {8, 64, LMC_DTYPE_F16, 24, 128, 12},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_q(&cases[i]);
}

/* The prefill activation quantizer: AVX2 and generic C give the same int16
 * values, scales and sums for each group size (ties at k + 0.5 after the
 * scaling, the clamp, a zero group, tiny and huge scales); both report a
 * NaN or an infinity. */
static void test_quantize_row_paths(void **state) {
    (void)state;
    if (!lmc_cpu_has_avx2_fma_f16c()) {
        print_message("test_quantize_row_paths: skipped, no AVX2 on this CPU\n");
        skip();
    }
    enum { COLS = 1024 };
    static float x[COLS];
    static int16_t v[2][COLS];
    static float d[2][COLS / 32], gs[2][COLS / 32];
    for (int trial = 0; trial < 12; trial++) {
        float scale = trial % 3 == 0 ? 1e-30f : trial % 3 == 1 ? 1e30f : 1.0f;
        for (int i = 0; i < COLS; i++) x[i] = frand() * scale * (i / 64 % 4 == 1 ? 1e-3f : 1.0f);
        for (int i = 0; i < 32; i++) x[128 + i] = 0.0f;
        /* a group scaled by exactly 1 (max 32767): its values are ties */
        for (int i = 0; i < 32; i++)
            x[256 + i] =
                i == 0 ? 32767.0f : (i % 2 ? -1.0f : 1.0f) * ((float)(i * 977 % 32766) + 0.5f);
        for (int g = 32; g <= 128; g *= 2) {
            memset(v, 0x55, sizeof v);
            assert_true(qgemm_quantize_row_generic(x, COLS, g, v[0], d[0], gs[0]));
            assert_true(qgemm_quantize_row_avx2(x, COLS, g, v[1], d[1], gs[1]));
            assert_memory_equal(v[0], v[1], sizeof v[0]);
            assert_memory_equal(d[0], d[1], sizeof(float) * (size_t)(COLS / g));
            assert_memory_equal(gs[0], gs[1], sizeof(float) * (size_t)(COLS / g));
        }
    }
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int b = 0; b < 3; b++) {
        x[700] = bad[b];
        assert_false(qgemm_quantize_row_generic(x, COLS, 64, v[0], d[0], gs[0]));
        assert_false(qgemm_quantize_row_avx2(x, COLS, 64, v[1], d[1], gs[1]));
    }
}

/* Through lmc_qmatmul: more than QUANT_FAST_MAX_T tokens take the GEMM on
 * the fast path, the exact path stays f32 (matches itself bit for bit). */
static void test_qmatmul_dispatch(void **state) {
    (void)state;
    const int64_t rows = 40, cols = 256, T = 20;
    float *wf = malloc(sizeof(float) * rows * cols);
    for (int64_t i = 0; i < rows * cols; i++) wf[i] = frand();
    uint32_t *packed = malloc((size_t)(rows * cols / 2));
    uint16_t *sc = malloc(2 * rows * cols / 64), *bi = malloc(2 * rows * cols / 64);
    assert_int_equal(lmc_quantize_affine(wf, rows, cols, 4, 64, LMC_DTYPE_BF16, packed, sc, bi),
                     LMC_OK);
    lmc_qweight w = {packed, sc, bi, LMC_DTYPE_BF16, 4, 64, rows, cols};
    float *x = malloc(sizeof(float) * T * cols), *y0 = malloc(sizeof(float) * T * rows),
          *y1 = malloc(sizeof(float) * T * rows), *y2 = malloc(sizeof(float) * T * rows);
    for (int64_t i = 0; i < T * cols; i++) x[i] = frand();
    lmc_set_exact(1);
    lmc_qmatmul(&w, x, T, y0);
    lmc_set_exact(0);
    lmc_qmatmul(&w, x, T, y1);
    assert_true(qgemm_run(&w, 0, rows, x, T, y2, rows));
    assert_memory_equal(y1, y2, sizeof(float) * T * rows);
    double e = 0, n = 0;
    for (int64_t i = 0; i < T * rows; i++)
        e += (y1[i] - y0[i]) * (y1[i] - y0[i]), n += y0[i] * y0[i];
    assert_true(sqrt(e / n) < 1e-2);
    assert_true(e > 0); /* it did take the int8 path */
    x[5] = NAN;         /* non-finite input: the exact path, NaN out */
    lmc_qmatmul(&w, x, T, y1);
    assert_true(isnan(y1[0]));
    lmc_set_exact(1);
    free(wf), free(packed), free(sc), free(bi), free(x), free(y0), free(y1), free(y2);
}

/* lmc_qmatmul_multi (q/k/v, gate/up over one x) gives what one lmc_qmatmul
 * per weight gives, bit for bit, on the matvec (T <= 8) and GEMM paths. */
static void test_qmatmul_multi(void **state) {
    (void)state;
    const int64_t rows[3] = {40, 16, 24}, cols = 256;
    uint32_t *packed[3];
    uint16_t *sc[3], *bi[3];
    lmc_qweight w[3];
    const lmc_qweight *ws[3];
    float *wf = malloc(sizeof(float) * 40 * cols);
    for (int i = 0; i < 3; i++) {
        for (int64_t k = 0; k < rows[i] * cols; k++) wf[k] = frand();
        packed[i] = malloc((size_t)(rows[i] * cols / 2));
        sc[i] = malloc((size_t)(2 * rows[i] * cols / 64));
        bi[i] = malloc((size_t)(2 * rows[i] * cols / 64));
        assert_int_equal(
            lmc_quantize_affine(wf, rows[i], cols, 4, 64, LMC_DTYPE_BF16, packed[i], sc[i], bi[i]),
            LMC_OK);
        w[i] = (lmc_qweight){packed[i], sc[i], bi[i], LMC_DTYPE_BF16, 4, 64, rows[i], cols};
        ws[i] = &w[i];
    }
    const int64_t Ts[3] = {1, 5, 20};
    float *x = malloc(sizeof(float) * 20 * cols), *a[3], *b[3];
    for (int64_t k = 0; k < 20 * cols; k++) x[k] = frand();
    for (int i = 0; i < 3; i++) {
        a[i] = malloc(sizeof(float) * 20 * (size_t)rows[i]);
        b[i] = malloc(sizeof(float) * 20 * (size_t)rows[i]);
    }
    for (int exact = 0; exact < 2; exact++)
        for (int ti = 0; ti < 3; ti++) {
            lmc_set_exact(exact);
            lmc_qmatmul_multi(ws, 3, x, Ts[ti], a);
            for (int i = 0; i < 3; i++) {
                lmc_qmatmul(ws[i], x, Ts[ti], b[i]);
                assert_memory_equal(a[i], b[i], sizeof(float) * (size_t)(Ts[ti] * rows[i]));
            }
        }
    lmc_set_exact(1);
    for (int i = 0; i < 3; i++) free(packed[i]), free(sc[i]), free(bi[i]), free(a[i]), free(b[i]);
    free(wf), free(x);
}

/* Dense weights: the f32 tiles (AVX2, AVX-512) within f32 rounding of the
 * double reference, exact or not; the AVX-512 bf16 tile (bf16 weights, fast
 * path) within the bf16 rounding of x (2^-9 relative) as well. */
static void check_dense(lmc_dtype dt, int64_t rows, int64_t cols, int64_t T) {
    size_t es = lmc_dtype_size(dt);
    uint8_t *w = malloc((size_t)(rows * cols) * es);
    float *wf = malloc(sizeof(float) * (size_t)(rows * cols));
    float *x = malloc(sizeof(float) * (size_t)(T * cols));
    float *y = malloc(sizeof(float) * (size_t)(T * rows));
    for (int64_t i = 0; i < rows * cols; i++) wf[i] = frand();
    lmc_convert_from_f32(dt, wf, w, rows * cols);
    lmc_convert_to_f32(dt, w, wf, rows * cols);
    for (int64_t i = 0; i < T * cols; i++) x[i] = frand();
    lmc_tensor t = {.name = "w", .dtype = dt, .ndim = 2, .shape = {rows, cols}, .data = w};
    for (int isa = 1; isa < 3; isa++) {
        if (!gemm_isa_force(isa)) continue;
        for (int exact = 0; exact < 2; exact++) {
            lmc_set_exact(exact);
            bool bf16 = isa == GEMM_AVX512 && dt == LMC_DTYPE_BF16 && !exact && T != 1;
            for (int threads = 1; threads <= 2; threads++) {
                lmc_set_num_threads(threads);
                memset(y, 0xff, sizeof(float) * (size_t)(T * rows));
                /* T < 4: the decode kernels (one token: f32 x on either
                 * ISA; two or three: bf16 on AVX-512 where it takes the
                 * weight), else the tiles */
                if (!(T < 4 && gemv_dense_run(&t, 0, rows, x, T, y, rows)))
                    assert_true(gemm_dense_run(&t, 0, rows, x, T, y, rows));
                for (int64_t tt = 0; tt < T; tt++)
                    for (int64_t r = 0; r < rows; r++) {
                        double ref = 0, mag = 0;
                        for (int64_t c = 0; c < cols; c++) {
                            ref += (double)wf[r * cols + c] * x[tt * cols + c];
                            mag += fabs((double)wf[r * cols + c] * x[tt * cols + c]);
                        }
                        double bound = (bf16 ? 0x1p-9 : 0) * mag + 1e-5 * mag + 1e-6;
                        if (!(fabs(y[tt * rows + r] - ref) <= bound))
                            fail_msg("%s %s exact %d [%lld x %lld] T %lld: t %lld r %lld: %g vs "
                                     "%g",
                                     isa_names[isa], lmc_dtype_name(dt), exact, (long long)rows,
                                     (long long)cols, (long long)T, (long long)tt, (long long)r,
                                     y[tt * rows + r], ref);
                    }
            }
        }
    }
    gemm_isa_force(-1);
    lmc_set_exact(1);
    lmc_set_num_threads(0);
    free(w), free(wf), free(x), free(y);
}

static void test_dense_gemm_paths(void **state) {
    (void)state;
    report_skipped();
    const lmc_dtype dts[] = {LMC_DTYPE_F32, LMC_DTYPE_F16, LMC_DTYPE_BF16};
    for (int d = 0; d < 3; d++) {
        check_dense(dts[d], 64, 512, 16);
        check_dense(dts[d], 37, 67, 13);  /* row, column and token tails */
        check_dense(dts[d], 33, 600, 70); /* a short last chunk */
        check_dense(dts[d], 5, 1030, 4);
        check_dense(dts[d], 100, 16, 9);
        /* one to three tokens (decode): rows in fours a quarter apart and
         * their remainder, a column tail */
        for (int64_t T = 1; T <= 3; T++) {
            check_dense(dts[d], 67, 1030, T);
            check_dense(dts[d], 3, 64, T);
            check_dense(dts[d], 160, 2048, T);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qgemm_paths),      cmocka_unit_test(test_quantize_row_paths),
        cmocka_unit_test(test_qmatmul_dispatch), cmocka_unit_test(test_dense_gemm_paths),
        cmocka_unit_test(test_qmatmul_multi),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
