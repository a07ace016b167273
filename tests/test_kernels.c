/* Dense kernels: conversions, dots and matmul on both kernel paths against
 * double-precision references. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "kernels/kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_f16_roundtrip_all(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t x = (uint16_t)h;
        if ((x & 0x7c00) == 0x7c00 && (x & 0x3ff)) continue; /* NaN payloads */
        float f = lmc_f16_to_f32(x);
        assert_int_equal(lmc_f32_to_f16(f), x);
    }
    /* round to nearest even at the halfway point between 1 and 1+2^-10 */
    assert_int_equal(lmc_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
    assert_int_equal(lmc_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
    assert_int_equal(lmc_f32_to_f16(65520.0f), 0x7c00); /* overflows to inf */
    assert_true(lmc_f16_to_f32(0x0001) == 0x1p-24f);
}

static void test_bf16_rounding(void **state) {
    (void)state;
    assert_int_equal(lmc_f32_to_bf16(1.0f), 0x3f80);
    float halfway;
    uint32_t bits = 0x3f808000; /* exactly between 0x3f80 and 0x3f81: ties to even */
    memcpy(&halfway, &bits, 4);
    assert_int_equal(lmc_f32_to_bf16(halfway), 0x3f80);
    bits = 0x3f818000;
    memcpy(&halfway, &bits, 4);
    assert_int_equal(lmc_f32_to_bf16(halfway), 0x3f82);
    for (uint32_t b = 0; b < 65536; b += 7) {
        uint16_t x = (uint16_t)b;
        if ((x & 0x7f80) == 0x7f80 && (x & 0x7f)) continue;
        assert_int_equal(lmc_f32_to_bf16(lmc_bf16_to_f32(x)), x);
    }
}

static float frand(void) {
    return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

static void check_matmul(lmc_dtype dt, int64_t rows, int64_t cols, int64_t T) {
    size_t es = lmc_dtype_size(dt);
    uint8_t *w = malloc((size_t)(rows * cols) * es);
    float *wf = malloc((size_t)(rows * cols) * sizeof(float));
    float *x = malloc((size_t)(T * cols) * sizeof(float));
    float *y = malloc((size_t)(T * rows) * sizeof(float));
    for (int64_t i = 0; i < rows * cols; i++) wf[i] = frand();
    lmc_convert_from_f32(dt, wf, w, rows * cols);
    lmc_convert_to_f32(dt, w, wf, rows * cols); /* the exact values the kernel sees */
    for (int64_t i = 0; i < T * cols; i++) x[i] = frand();
    lmc_tensor t = {.name = "w", .dtype = dt, .ndim = 2, .shape = {rows, cols}, .data = w};
    const lmc_kernel_table *paths[2] = {lmc_kernels_generic(), lmc_kernels_avx2()};
    for (int p = 0; p < 2; p++) {
        if (!paths[p]) continue;
        lmc_kernels_use(paths[p]);
        for (int k = 0; k < 4; k++) {
            int threads = 1 + k % 2, exact = k / 2;
            lmc_set_num_threads(threads);
            lmc_set_exact(exact);
            /* fast path, AVX-512: bf16 weights meet x rounded to bf16 (2^-9) */
            double xr =
                !exact && dt == LMC_DTYPE_BF16 && p > 0 && lmc_cpu_has_avx512() ? 0x1p-9 : 0;
            memset(y, 0, (size_t)(T * rows) * sizeof(float));
            assert_int_equal(lmc_matmul_dense(&t, x, T, y), LMC_OK);
            for (int64_t tt = 0; tt < T; tt++)
                for (int64_t r = 0; r < rows; r++) {
                    double ref = 0, mag = 0;
                    for (int64_t c = 0; c < cols; c++) {
                        ref += (double)wf[r * cols + c] * x[tt * cols + c];
                        mag += fabs((double)wf[r * cols + c] * x[tt * cols + c]);
                    }
                    double err = fabs(y[tt * rows + r] - ref);
                    if (err > (1e-5 + xr) * mag + 1e-6)
                        fail_msg("%s %s T=%lld r=%lld: %g vs %g", paths[p]->name,
                                 lmc_dtype_name(dt), (long long)tt, (long long)r, y[tt * rows + r],
                                 ref);
                }
        }
    }
    lmc_kernels_use(NULL);
    lmc_set_num_threads(0);
    lmc_set_exact(1);
    free(w);
    free(wf);
    free(x);
    free(y);
}

static void test_matmul_all_dtypes(void **state) {
    (void)state;
    const lmc_dtype dts[] = {LMC_DTYPE_F32, LMC_DTYPE_F16, LMC_DTYPE_BF16};
    for (int d = 0; d < 3; d++) {
        check_matmul(dts[d], 37, 67, 1);  /* odd sizes exercise the tails */
        check_matmul(dts[d], 50, 128, 9); /* T > 1: blocked path with a token tail */
        check_matmul(dts[d], 3, 8, 4);
    }
}

static void test_rmsnorm_and_softmax(void **state) {
    (void)state;
    float x[6] = {1, -2, 3, 0.5f, 0.25f, -1};
    float w[3] = {1, 2, 0.5f}, y[6];
    lmc_tensor t = {.dtype = LMC_DTYPE_F32, .ndim = 1, .shape = {3}, .data = w};
    lmc_rmsnorm(x, &t, 0.0f, 1e-6f, y, 2, 3);
    double inv = 1.0 / sqrt((1 + 4 + 9) / 3.0 + 1e-6);
    assert_float_equal(y[0], 1 * inv * 1, 1e-6);
    assert_float_equal(y[1], -2 * inv * 2, 1e-6);
    assert_float_equal(y[2], 3 * inv * 0.5, 1e-6);
    lmc_rmsnorm(x, &t, 1.0f, 1e-6f, y, 2, 3); /* gemma's (1 + w) */
    assert_float_equal(y[1], -2 * inv * 3, 1e-6);
    float s[3] = {1000, 1001, 999};
    lmc_softmax(s, 3);
    double e0 = exp(-1.0), e2 = exp(-2.0), z = e0 + 1 + e2;
    assert_float_equal(s[0], e0 / z, 1e-6);
    assert_float_equal(s[1], 1 / z, 1e-6);
}

/* SiLU (times u) on every table against double precision: both signs, the
 * tails the vectors leave, the clamp of the exp (|x| > 87), NaN through. */
static void test_silu_mul(void **state) {
    (void)state;
    const lmc_kernel_table *tables[2] = {lmc_kernels_generic(), lmc_kernels_avx2()};
    if (!tables[1]) printf("test_silu_mul: AVX2 skipped (not on this CPU)\n");
    enum { N = 203 };
    float x[N], u[N], y[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)((i * 7919) % 401 - 200) * 0.05f; /* -10 .. 10 */
        u[i] = 0.5f + (float)(i % 13) * 0.25f;
    }
    x[3] = 90.0f, x[4] = -90.0f, x[5] = 1e-8f, x[6] = -0.0f, x[7] = 200.0f, x[8] = -200.0f;
    for (int t = 0; t < 2; t++) {
        if (!tables[t]) continue;
        for (int with_u = 0; with_u < 2; with_u++) {
            memcpy(y, x, sizeof y);
            tables[t]->silu_mul(y, with_u ? u : NULL, N);
            for (int i = 0; i < N; i++) {
                double v = x[i], want = v / (1.0 + exp(-v)) * (with_u ? u[i] : 1.0);
                double tol = 4e-7 * fabs(want) + 1e-30;
                if (fabs(y[i] - want) > tol)
                    fail_msg("%s silu_mul(%g)%s = %.9g, want %.9g", tables[t]->name, v,
                             with_u ? " * u" : "", y[i], want);
            }
        }
        y[0] = NAN;
        tables[t]->silu_mul(y, NULL, 9);
        assert_true(isnan(y[0]));
    }
}

/* Attention's inner loops on every path the CPU has (the others are named
 * as skipped) against double-precision references: head sizes that are and
 * are not multiples of the vector widths, groups of 1-9 queries, runs of
 * keys around the 8- and 16-key blocks, exp over wide ranges. */
static void test_attn_kernels(void **state) {
    (void)state;
    const lmc_attn_kernels *paths[3] = {lmc_attn_kernels_generic(), lmc_attn_kernels_avx2(),
                                        lmc_attn_kernels_avx512()};
    const char *names[3] = {"generic", "avx2", "avx512"};
    const int64_t hds[] = {8, 16, 24, 40, 48, 64, 72, 80, 96, 128, 256};
    const int64_t ms[] = {1, 5, 8, 15, 16, 17, 33, 100};
    enum { MAXG = 9, MAXM = 100, MAXHD = 256 };
    float *q = malloc(sizeof(float) * MAXG * MAXHD), *kv = malloc(sizeof(float) * MAXM * MAXHD);
    float *s = malloc(sizeof(float) * MAXG * (MAXM + 3)), *o = malloc(sizeof(float) * MAXG * MAXHD);
    float *x = malloc(sizeof(float) * 3000);
    uint16_t *kvh = malloc(sizeof(uint16_t) * MAXM * MAXHD);
    assert_true(q && kv && s && o && x && kvh);
    for (int p = 0; p < 3; p++) {
        const lmc_attn_kernels *k = paths[p];
        if (!k) {
            print_message("attention kernels: %s not supported here, skipped\n", names[p]);
            continue;
        }
        for (size_t h = 0; h < sizeof hds / sizeof *hds; h++)
            for (int64_t g = 1; g <= MAXG; g++)
                for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++) {
                    int64_t hd = hds[h], m = ms[mi], lds = m + 3;
                    for (int64_t i = 0; i < g * hd; i++) q[i] = frand();
                    /* values an f16 cache can hold, for both kernels */
                    for (int64_t i = 0; i < m * hd; i++) {
                        kvh[i] = lmc_f32_to_f16(frand());
                        kv[i] = lmc_f16_to_f32(kvh[i]);
                    }
                    for (int f16 = 0; f16 < 2; f16++) {
                        if (f16)
                            k->scores_f16(q, g, hd, kvh, m, s, lds);
                        else
                            k->scores(q, g, hd, kv, m, s, lds);
                        for (int64_t gg = 0; gg < g; gg++)
                            for (int64_t i = 0; i < m; i++) {
                                double ref = 0, mag = 0;
                                for (int64_t d = 0; d < hd; d++) {
                                    ref += (double)q[gg * hd + d] * kv[i * hd + d];
                                    mag += fabs((double)q[gg * hd + d] * kv[i * hd + d]);
                                }
                                if (fabs(s[gg * lds + i] - ref) > 1e-5 * mag + 1e-6)
                                    fail_msg("%s scores%s hd %lld g %lld m %lld: %g vs %g", k->name,
                                             f16 ? "_f16" : "", (long long)hd, (long long)gg,
                                             (long long)m, s[gg * lds + i], ref);
                            }
                        for (int64_t i = 0; i < g * lds; i++) s[i] = frand();
                        for (int64_t i = 0; i < g * hd; i++) o[i] = q[i];
                        if (f16)
                            k->values_f16(s, lds, g, kvh, m, hd, o);
                        else
                            k->values(s, lds, g, kv, m, hd, o);
                        for (int64_t gg = 0; gg < g; gg++)
                            for (int64_t d = 0; d < hd; d++) {
                                double ref = q[gg * hd + d], mag = fabs(ref);
                                for (int64_t i = 0; i < m; i++) {
                                    ref += (double)s[gg * lds + i] * kv[i * hd + d];
                                    mag += fabs((double)s[gg * lds + i] * kv[i * hd + d]);
                                }
                                if (fabs(o[gg * hd + d] - ref) > 1e-5 * mag + 1e-6)
                                    fail_msg("%s values%s hd %lld g %lld m %lld: %g vs %g", k->name,
                                             f16 ? "_f16" : "", (long long)hd, (long long)gg,
                                             (long long)m, o[gg * hd + d], ref);
                            }
                    }
                }
        const int64_t ns[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 100, 2049};
        const float spreads[] = {1, 30, 200};
        for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
            for (int sp = 0; sp < 3; sp++) {
                int64_t n = ns[ni];
                double ref[2049], mx = -INFINITY, sum = 0;
                for (int64_t i = 0; i < n; i++) {
                    x[i] = frand() * spreads[sp] + 3;
                    mx = x[i] > mx ? x[i] : mx;
                }
                /* from the float difference the kernels take the exp of */
                for (int64_t i = 0; i < n; i++) sum += ref[i] = exp((double)(x[i] - (float)mx));
                float got = k->exp_sum(x, n);
                if (fabs(got - sum) > 1e-6 * sum)
                    fail_msg("%s exp_sum n %lld: sum %g vs %g", k->name, (long long)n, got, sum);
                for (int64_t i = 0; i < n; i++)
                    if (fabs(x[i] - ref[i]) > 4e-7 * ref[i] + 1e-37)
                        fail_msg("%s exp n %lld [%lld]: %g vs %g", k->name, (long long)n,
                                 (long long)i, x[i], ref[i]);
            }
        /* NaN stays NaN */
        x[0] = 0, x[1] = NAN;
        for (int i = 2; i < 20; i++) x[i] = -1;
        k->exp_sum(x, 20);
        assert_true(isnan(x[1]) || isnan(x[0]));
    }
    free(q);
    free(kv);
    free(s);
    free(o);
    free(x);
    free(kvh);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_roundtrip_all), cmocka_unit_test(test_bf16_rounding),
        cmocka_unit_test(test_matmul_all_dtypes), cmocka_unit_test(test_rmsnorm_and_softmax),
        cmocka_unit_test(test_attn_kernels),      cmocka_unit_test(test_silu_mul),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
