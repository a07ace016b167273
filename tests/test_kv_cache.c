/* Decoding with the KV cache gives the same logits as recomputing the whole
 * sequence in one batch (rel L2 <= 1e-5 at every position), for several
 * split points, a sliding-window model and a cache that has to grow. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "helpers/fixtures.h"
#include "models/model.h"
#include "nn/nn.h"

#include <math.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define T 40

static void check_model(const char *dir, int64_t vocab_limit) {
    /* f32 activations: the fast path rounds x differently for a whole
     * prompt (bf16 GEMM) than for a token at a time */
    lmc_set_exact(1);
    lmc_model *m;
    assert_int_equal(lmc_model_load(dir, &m), LMC_OK);
    lmc_model_info info;
    lmc_model_get_info(m, &info);
    size_t V = (size_t)info.vocab_size;
    int32_t toks[T];
    srand(7);
    for (int i = 0; i < T; i++)
        toks[i] = (int32_t)((size_t)rand() % (vocab_limit ? (size_t)vocab_limit : V));
    float *full = malloc(T * V * sizeof(float));
    float *step = malloc(T * V * sizeof(float));
    lmc_session *s;
    assert_int_equal(lmc_session_create(m, T, &s), LMC_OK);
    assert_int_equal(lmc_session_forward(s, toks, T, 1, full), LMC_OK);
    /* splits: one at a time; prefill 1 then steps; chunks of 7; prefill 30 then steps */
    const int firsts[] = {1, 13, 30};
    for (size_t f = 0; f < 3; f++) {
        lmc_session_reset(s);
        int first = firsts[f];
        assert_int_equal(lmc_session_forward(s, toks, first, 1, step), LMC_OK);
        for (int t = first; t < T; t++)
            assert_int_equal(lmc_session_forward(s, toks + t, 1, 0, step + t * V), LMC_OK);
        assert_int_equal(lmc_session_position(s), T);
        for (int t = 0; t < T; t++) {
            double e = rel_l2(step + t * V, full + t * V, V);
            if (e > 1e-5) fail_msg("%s: split %d, position %d: rel_l2 %.3g", dir, first, t, e);
        }
    }
    lmc_session_reset(s);
    for (int t = 0; t < T; t += 7) {
        int n = T - t < 7 ? T - t : 7;
        assert_int_equal(lmc_session_forward(s, toks + t, n, 1, step + t * V), LMC_OK);
    }
    for (int t = 0; t < T; t++) assert_true(rel_l2(step + t * V, full + t * V, V) <= 1e-5);
    /* The session's context is full now. */
    assert_int_equal(lmc_session_forward(s, toks, 1, 0, step), LMC_ERR_RANGE);
    lmc_session_free(s);
    free(full);
    free(step);
    lmc_model_free(m);
}

static void test_llama(void **state) {
    (void)state;
    check_model(LMC_SOURCE_DIR "/tests/fixtures/models/llama-f32", 0);
}

static void test_mistral_sliding_window(void **state) {
    (void)state;
    check_model(LMC_SOURCE_DIR "/tests/fixtures/models/mistral-sliding", 0);
}

static void test_bf16_gqa(void **state) {
    (void)state;
    check_model(LMC_SOURCE_DIR "/tests/fixtures/models/llama-bf16", 0);
}

/* A max_kv_size cache (sinks + rotating window) against attention computed
 * by hand over every key with the same visibility. */
static void check_rotating_with_sinks(int f16, int64_t hd) {
    enum { HD = 64, P = 300, W = 37, K = 4, B = 16 };
    lmc_set_kv_f16(f16);
    lmc_kv_cache c;
    assert_int_equal(lmc_kv_cache_init(&c, 1, 1, hd, 100000), LMC_OK);
    lmc_set_kv_f16(0);
    assert_int_equal(c.dtype, f16 ? LMC_DTYPE_F16 : LMC_DTYPE_F32);
    assert_int_equal(lmc_kv_cache_set_rotating(&c, 0, W, K), LMC_OK);
    static float keys[P][HD], vals[P][HD], q[B][HD], out[B][HD];
    uint64_t x = 12345;
    for (int p = 0; p < P; p++)
        for (int d = 0; d < HD; d++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            keys[p][d] = (float)((x >> 11) % 2001) / 1000.0f - 1.0f;
            vals[p][d] = (float)((x >> 30) % 2001) / 1000.0f - 1.0f;
            if (f16) { /* the values an f16 cache holds */
                keys[p][d] = lmc_f16_to_f32(lmc_f32_to_f16(keys[p][d]));
                vals[p][d] = lmc_f16_to_f32(lmc_f32_to_f16(vals[p][d]));
            }
        }
    lmc_attention_params ap = {1, 1, hd, 0.35f, 0, 0, 0};
    double worst = 0;
    for (int start = 0; start < P; start += B) {
        int nb = P - start < B ? P - start : B;
        assert_int_equal(lmc_kv_cache_reserve(&c, start + nb), LMC_OK);
        /* rows of hd floats */
        static float kin[B * HD], vin[B * HD], qin[B * HD], oin[B * HD];
        for (int t = 0; t < nb; t++)
            for (int d = 0; d < hd; d++) {
                kin[t * hd + d] = keys[start + t][d];
                vin[t * hd + d] = vals[start + t][d];
                q[t][d] = keys[(start + t) * 7 % P][d];
                qin[t * hd + d] = q[t][d];
            }
        lmc_kv_cache_store(&c, 0, start, kin, vin, nb);
        assert_int_equal(lmc_attention(&ap, &c, 0, qin, start, nb, oin), LMC_OK);
        for (int t = 0; t < nb; t++)
            for (int d = 0; d < hd; d++) out[t][d] = oin[t * hd + d];
        c.length = start + nb;
        for (int t = 0; t < nb; t++) {
            int pos = start + t;
            double sc[P], m = -1e300, z = 0, o[HD] = {0};
            for (int j = 0; j <= pos; j++) {
                bool seen = j < K || j > pos - W;
                sc[j] = -INFINITY;
                if (!seen) continue;
                double dot = 0;
                for (int d = 0; d < hd; d++) dot += (double)q[t][d] * keys[j][d];
                sc[j] = dot * 0.35;
                m = sc[j] > m ? sc[j] : m;
            }
            for (int j = 0; j <= pos; j++) z += sc[j] == -INFINITY ? 0 : exp(sc[j] - m);
            for (int j = 0; j <= pos; j++)
                if (sc[j] != -INFINITY)
                    for (int d = 0; d < hd; d++) o[d] += exp(sc[j] - m) / z * vals[j][d];
            for (int d = 0; d < hd; d++) {
                double e = fabs(o[d] - out[t][d]);
                worst = e > worst ? e : worst;
            }
        }
    }
    if (worst >= 1e-5) fail_msg("f16 %d, head_dim %lld: worst %g", f16, (long long)hd, worst);
    /* the memory stays bounded: sinks + window + one batch */
    assert_true(c.layers[0].capacity <= K + W + c.max_batch - 1);
    lmc_kv_cache_free(&c);
}

/* head_dim 8 takes the vector kernels on AVX2 only, 64 on every path, 12
 * none (generic C); each with an f32 and an f16 cache (the reference then
 * holds the f16-rounded keys and values). */
static void test_rotating_with_sinks(void **state) {
    (void)state;
    const int64_t hds[] = {8, 12, 64};
    for (int f16 = 0; f16 < 2; f16++)
        for (int i = 0; i < 3; i++) check_rotating_with_sinks(f16, hds[i]);
}

/* An f16 cache: decoding token by token stays within 1e-3 (rel L2) of the
 * f32 cache's logits, and its prompt-cache files load into an f32 session
 * and back (converted), continuing as the session that saved them. */
static void test_f16_cache(void **state) {
    (void)state;
    lmc_set_exact(1);
    lmc_model *m;
    assert_int_equal(lmc_model_load(LMC_SOURCE_DIR "/tests/fixtures/models/llama-f32", &m), LMC_OK);
    lmc_model_info info;
    lmc_model_get_info(m, &info);
    size_t V = (size_t)info.vocab_size;
    int32_t toks[T];
    srand(11);
    for (int i = 0; i < T; i++) toks[i] = (int32_t)((size_t)rand() % V);
    float *full = malloc(T * V * sizeof(float)), *step = malloc(T * V * sizeof(float));
    float *other = malloc(V * sizeof(float));
    lmc_session *s, *h, *back;
    assert_int_equal(lmc_session_create(m, T, &s), LMC_OK);
    lmc_set_kv_f16(1);
    assert_int_equal(lmc_session_create(m, T, &h), LMC_OK);
    lmc_set_kv_f16(0);
    assert_int_equal(lmc_session_forward(s, toks, T, 1, full), LMC_OK);
    assert_int_equal(lmc_session_forward(h, toks, 1, 1, step), LMC_OK);
    for (int t = 1; t < T; t++)
        assert_int_equal(lmc_session_forward(h, toks + t, 1, 0, step + t * V), LMC_OK);
    double worst = 0;
    for (int t = 0; t < T; t++) {
        double e = rel_l2(step + t * V, full + t * V, V);
        worst = e > worst ? e : worst;
    }
    print_message("f16 KV cache: worst rel L2 %.2e over %d positions\n", worst, T);
    assert_true(worst > 0 && worst < 1e-3);
    /* f16 file -> f32 session: the same keys, so the same next logits */
    char path[] = "/tmp/lmc-f16-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(lmc_session_truncate(h, T - 1), LMC_OK);
    assert_int_equal(lmc_session_save(h, path), LMC_OK);
    assert_int_equal(lmc_session_create(m, T, &back), LMC_OK);
    assert_int_equal(lmc_session_load(back, path), LMC_OK);
    assert_int_equal(lmc_session_position(back), T - 1);
    assert_int_equal(lmc_session_forward(back, toks + T - 1, 1, 0, other), LMC_OK);
    assert_int_equal(lmc_session_forward(h, toks + T - 1, 1, 0, step), LMC_OK);
    assert_true(rel_l2(other, step, V) < 1e-4);
    /* f32 file -> f16 session */
    assert_int_equal(lmc_session_truncate(s, T - 1), LMC_OK);
    assert_int_equal(lmc_session_save(s, path), LMC_OK);
    assert_int_equal(lmc_session_load(h, path), LMC_OK);
    assert_int_equal(lmc_session_forward(h, toks + T - 1, 1, 0, other), LMC_OK);
    assert_true(rel_l2(other, full + (T - 1) * V, V) < 1e-3);
    unlink(path);
    lmc_session_free(back);
    lmc_session_free(h);
    lmc_session_free(s);
    free(full);
    free(step);
    free(other);
    lmc_model_free(m);
}

/* Generation with max_kv_size runs past the cache's size; a large one
 * changes nothing; models that keep their own layout refuse it. */
static void test_max_kv_size_generation(void **state) {
    (void)state;
    lmc_model *m = NULL;
    assert_int_equal(lmc_model_load(LMC_SOURCE_DIR "/tests/fixtures/models/llama-f32", &m), LMC_OK);
    lmc_session *s = NULL;
    assert_int_equal(lmc_session_create(m, 0, &s), LMC_OK);
    lmc_generate_params p;
    lmc_generate_params_default(&p);
    p.temperature = 0;
    p.ignore_eos = 1;
    p.max_tokens = 60;
    int32_t prompt[5] = {1, 15, 27, 100, 7};
    lmc_generate_result a, b;
    assert_int_equal(lmc_generate(s, NULL, prompt, 5, &p, NULL, NULL, &a), LMC_OK);
    p.max_kv_size = 1000; /* larger than anything here: the same tokens */
    assert_int_equal(lmc_generate(s, NULL, prompt, 5, &p, NULL, NULL, &b), LMC_OK);
    assert_int_equal(b.stats.cached_tokens, 0); /* the layout changed: recomputed */
    assert_memory_equal(a.tokens, b.tokens, sizeof(int32_t) * 60);
    lmc_generate_result_clear(&b);
    p.max_kv_size = 24; /* small: bounded memory, different attention */
    assert_int_equal(lmc_generate(s, NULL, prompt, 5, &p, NULL, NULL, &b), LMC_OK);
    assert_int_equal(b.n_tokens, 60);
    assert_memory_equal(a.tokens, b.tokens, sizeof(int32_t) * 19); /* same until it rotates */
    assert_true(s->kv.layers[0].capacity < 64);
    assert_int_equal(lmc_session_save(s, "/tmp/lmc-never-saved"), LMC_ERR_UNSUPPORTED);
    p.max_kv_size = 3;
    assert_int_equal(lmc_generate(s, NULL, prompt, 5, &p, NULL, NULL, NULL), LMC_ERR_INVALID_ARG);
    lmc_generate_result_clear(&a);
    lmc_generate_result_clear(&b);
    lmc_session_free(s);
    lmc_model_free(m);
    assert_int_equal(lmc_model_load(LMC_SOURCE_DIR "/tests/fixtures/models/mistral-sliding", &m),
                     LMC_OK);
    assert_int_equal(lmc_session_create(m, 0, &s), LMC_OK);
    p.max_kv_size = 64;
    assert_int_equal(lmc_generate(s, NULL, prompt, 5, &p, NULL, NULL, NULL), LMC_ERR_UNSUPPORTED);
    lmc_session_free(s);
    lmc_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama),     cmocka_unit_test(test_mistral_sliding_window),
        cmocka_unit_test(test_bf16_gqa),  cmocka_unit_test(test_rotating_with_sinks),
        cmocka_unit_test(test_f16_cache), cmocka_unit_test(test_max_kv_size_generation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
