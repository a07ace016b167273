/* Several sessions on one model, each on its own thread, give exactly the
 * logits of one session running alone (bitwise), with the kernels' pool
 * shared by all of them: dense, MoE and quantized models, one token at a
 * time and in prompt batches. Also run under ThreadSanitizer (make tsan). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "lmc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_THREADS = 4, T = 48, PROMPT = 9 };

typedef struct job {
    lmc_model *model;
    const int32_t *toks;
    const float *expect; /* [T, V]: PROMPT positions, then one token at a time */
    size_t V;
    int reps;
    int mismatches; /* positions whose logits differ */
    lmc_status status;
} job;

/* A prompt batch (all positions), then one token at a time. */
static lmc_status run_sequence(lmc_session *s, const int32_t *toks, size_t V, float *out) {
    lmc_session_reset(s);
    lmc_status st = lmc_session_forward(s, toks, PROMPT, 1, out);
    for (int t = PROMPT; t < T && st == LMC_OK; t++)
        st = lmc_session_forward(s, toks + t, 1, 0, out + (size_t)t * V);
    return st;
}

static void *worker(void *arg) {
    job *j = arg;
    lmc_session *s = NULL;
    float *got = malloc((size_t)T * j->V * sizeof(float));
    j->status = got ? lmc_session_create(j->model, T, &s) : LMC_ERR_NOMEM;
    for (int r = 0; r < j->reps && j->status == LMC_OK; r++) {
        j->status = run_sequence(s, j->toks, j->V, got);
        for (int t = 0; t < T && j->status == LMC_OK; t++)
            if (memcmp(got + (size_t)t * j->V, j->expect + (size_t)t * j->V, j->V * sizeof(float)))
                j->mismatches++;
    }
    lmc_session_free(s);
    free(got);
    return NULL;
}

static void check_model(const char *rel, int reps) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/%s", LMC_SOURCE_DIR, rel);
    lmc_model *m;
    lmc_status st = lmc_model_load(dir, &m);
    if (st != LMC_OK) fprintf(stderr, "%s: %s\n", dir, lmc_last_error());
    assert_int_equal(st, LMC_OK);
    lmc_model_info info;
    lmc_model_get_info(m, &info);
    size_t V = (size_t)info.vocab_size;
    int32_t toks[T];
    for (int i = 0; i < T; i++) toks[i] = (int32_t)((size_t)(i * 7919 + 13) % V);
    float *expect = malloc((size_t)T * V * sizeof(float));
    assert_non_null(expect);
    /* the reference: this thread alone */
    lmc_session *s;
    assert_int_equal(lmc_session_create(m, T, &s), LMC_OK);
    assert_int_equal(run_sequence(s, toks, V, expect), LMC_OK);
    lmc_session_free(s);

    pthread_t th[N_THREADS];
    job jobs[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        jobs[i] = (job){.model = m, .toks = toks, .expect = expect, .V = V, .reps = reps};
        assert_int_equal(pthread_create(&th[i], NULL, worker, &jobs[i]), 0);
    }
    int bad = 0;
    for (int i = 0; i < N_THREADS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(jobs[i].status, LMC_OK);
        bad += jobs[i].mismatches;
    }
    if (bad)
        fprintf(stderr, "%s: %d of %d positions differ from the single-threaded run\n", rel, bad,
                N_THREADS * reps * T);
    assert_int_equal(bad, 0);
    free(expect);
    lmc_model_free(m);
}

static int reps(void) {
    const char *e = getenv("LMC_TEST_REPS");
    return e && atoi(e) > 0 ? atoi(e) : 20;
}

static void test_dense(void **state) {
    (void)state;
    check_model("models/llama-f32", reps());
}

static void test_moe(void **state) {
    (void)state;
    check_model("models/mixtral-f32", reps());
}

static void test_quantized(void **state) {
    (void)state;
    check_model("quant-models/llama-q4-g64-f16", reps());
}

static void test_moe_quantized(void **state) {
    (void)state;
    check_model("quant-models/mixtral-q4-g64-f16", reps());
}

/* Changing the pool's size while other threads run sessions. */
static void *resizer(void *arg) {
    (void)arg;
    for (int i = 0; i < 20; i++) lmc_set_num_threads(1 + i % 3);
    return NULL;
}

static void test_resize_while_running(void **state) {
    (void)state;
    pthread_t r;
    assert_int_equal(pthread_create(&r, NULL, resizer, NULL), 0);
    check_model("models/llama-f32", 2);
    pthread_join(r, NULL);
    lmc_set_num_threads(2);
}

int main(void) {
    /* a pool of two threads at least, so that it is really shared */
    lmc_set_num_threads(2);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense),
        cmocka_unit_test(test_moe),
        cmocka_unit_test(test_quantized),
        cmocka_unit_test(test_moe_quantized),
        cmocka_unit_test(test_resize_while_running),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
