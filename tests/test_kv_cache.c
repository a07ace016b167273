/* Decoding with the KV cache gives the same logits as recomputing the whole
 * sequence in one batch (rel L2 <= 1e-5 at every position), for several
 * split points, a sliding-window model and a cache that has to grow. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "helpers/fixtures.h"

#include <stdlib.h>
#include <string.h>

#define T 40

static void check_model(const char *dir, int64_t vocab_limit) {
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama),
        cmocka_unit_test(test_mistral_sliding_window),
        cmocka_unit_test(test_bf16_gqa),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
