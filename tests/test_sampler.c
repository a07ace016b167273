/* The built-in logit processors and sampler against hand-computed values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "generate/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void dist(float temp, int32_t top_k, float top_p, float min_p, const float *logits,
                 int32_t V, int32_t *ids, float *probs, int32_t *n) {
    void *scratch = malloc((size_t)V * 8);
    lmc_sampler_state s = {temp, top_k, top_p, min_p, {{0, 0}}, scratch};
    lmc_sampler_distribution(&s, logits, V, ids, probs, n);
    free(scratch);
}

/* logits ln(4), ln(3), ln(2), ln(1): probabilities 0.4, 0.3, 0.2, 0.1 */
static const float L4[4] = {1.3862944f, 1.0986123f, 0.6931472f, 0.0f};

static void test_temperature_and_filters(void **state) {
    (void)state;
    int32_t ids[4], n;
    float p[4];
    dist(1.0f, 0, 1.0f, 0, L4, 4, ids, p, &n);
    assert_int_equal(n, 4);
    float want[4] = {0.4f, 0.3f, 0.2f, 0.1f};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(ids[i], i);
        assert_float_equal(p[i], want[i], 1e-6);
    }
    /* temperature 2: p ~ sqrt(4, 3, 2, 1) / sum */
    dist(2.0f, 0, 1.0f, 0, L4, 4, ids, p, &n);
    double z = 2 + sqrt(3.0) + sqrt(2.0) + 1;
    assert_float_equal(p[0], 2 / z, 1e-6);
    assert_float_equal(p[3], 1 / z, 1e-6);
    /* top-k 2: 4/7, 3/7 */
    dist(1.0f, 2, 1.0f, 0, L4, 4, ids, p, &n);
    assert_int_equal(n, 2);
    assert_float_equal(p[0], 4.0 / 7, 1e-6);
    assert_float_equal(p[1], 3.0 / 7, 1e-6);
    /* top-p 0.65: 0.4 + 0.3 reaches it -> 4/7, 3/7; 0.75 needs the third */
    dist(1.0f, 0, 0.65f, 0, L4, 4, ids, p, &n);
    assert_int_equal(n, 2);
    dist(1.0f, 0, 0.75f, 0, L4, 4, ids, p, &n);
    assert_int_equal(n, 3);
    assert_float_equal(p[2], 2.0 / 9, 1e-6);
    /* min-p 0.5: keep p >= 0.2 -> 4/9, 3/9, 2/9 */
    dist(1.0f, 0, 1.0f, 0.5f, L4, 4, ids, p, &n);
    assert_int_equal(n, 3);
    assert_float_equal(p[0], 4.0 / 9, 1e-6);
    /* order: top-k 3, then top-p 0.5 of the renormalized 4/9, 3/9, 2/9 -> 2 */
    dist(1.0f, 3, 0.5f, 0, L4, 4, ids, p, &n);
    assert_int_equal(n, 2);
    /* greedy */
    dist(0.0f, 0, 1.0f, 0, L4, 4, ids, p, &n);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 0);
    /* top-k keeps ties of the k-th value (transformers) */
    const float tie[4] = {1, 0, 0, -1};
    dist(1.0f, 2, 1.0f, 0, tie, 4, ids, p, &n);
    assert_int_equal(n, 3);
}

static void test_draws_follow_the_distribution(void **state) {
    (void)state;
    void *scratch = malloc(4 * 8);
    lmc_sampler_state s = {1.0f, 0, 1.0f, 0, {{0, 0}}, scratch};
    lmc_rng_seed(&s.rng, 42);
    int counts[4] = {0};
    const int N = 200000;
    for (int i = 0; i < N; i++) {
        int32_t t;
        assert_int_equal(lmc_sample_builtin(&s, L4, 4, &t), LMC_OK);
        counts[t]++;
    }
    float want[4] = {0.4f, 0.3f, 0.2f, 0.1f};
    for (int i = 0; i < 4; i++) assert_float_equal((double)counts[i] / N, want[i], 0.005);
    /* the same seed, the same draws */
    lmc_sampler_state a = s, b = s;
    lmc_rng_seed(&a.rng, 7);
    lmc_rng_seed(&b.rng, 7);
    for (int i = 0; i < 100; i++) {
        int32_t x, y;
        lmc_sample_builtin(&a, L4, 4, &x);
        lmc_sample_builtin(&b, L4, 4, &y);
        assert_int_equal(x, y);
    }
    free(scratch);
}

static void test_processors(void **state) {
    (void)state;
    int32_t counts[6] = {0};
    const int32_t hist[] = {1, 2, 2, 5, 2};
    /* repetition 2 over the whole history: positive / 2, negative * 2, once each */
    float lg[6] = {1, 2, -2, 3, 4, -1};
    lmc_penalty_state rep = {2.0f, 0, counts};
    lmc_process_repetition(&rep, lg, 6, hist, 5, 1);
    float want_rep[6] = {1, 1, -4, 3, 4, -2};
    assert_memory_equal(lg, want_rep, sizeof lg);
    for (int i = 0; i < 6; i++) assert_int_equal(counts[i], 0); /* scratch left clean */
    /* the context window: only the last 2 tokens (5, 2) */
    float lw[6] = {1, 2, -2, 3, 4, -1};
    rep.context = 2;
    lmc_process_repetition(&rep, lw, 6, hist, 5, 1);
    float want_w[6] = {1, 2, -4, 3, 4, -2};
    assert_memory_equal(lw, want_w, sizeof lw);
    /* presence 0.5: each distinct token once; frequency 0.25: per occurrence */
    float lp[6] = {0};
    lmc_penalty_state pres = {0.5f, 0, counts};
    lmc_process_presence(&pres, lp, 6, hist, 5, 1);
    float want_p[6] = {0, -0.5f, -0.5f, 0, 0, -0.5f};
    assert_memory_equal(lp, want_p, sizeof lp);
    float lf[6] = {0};
    lmc_penalty_state freq = {0.25f, 0, counts};
    lmc_process_frequency(&freq, lf, 6, hist, 5, 1);
    float want_f[6] = {0, -0.25f, -0.75f, 0, 0, -0.25f};
    assert_memory_equal(lf, want_f, sizeof lf);
    /* logit bias, out-of-range ids ignored */
    lmc_logit_bias b[2] = {{3, 1.5f}, {99, 1.0f}};
    lmc_bias_state bs = {b, 2};
    float lb[6] = {0};
    lmc_process_logit_bias(&bs, lb, 6, hist, 5, 1);
    assert_float_equal(lb[3], 1.5f, 0);
}

/* The reference: every candidate sorted, then the filters (no shortcuts). */
typedef struct rc {
    double p;
    int32_t id;
} rc;
static int cmp_rc(const void *a, const void *b) {
    const rc *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return x->id - y->id;
}

static void test_matches_a_full_sort(void **state) {
    (void)state;
    enum { V = 20000 };
    static float logits[V], probs[V];
    static int32_t ids[V];
    static rc ref[V];
    uint64_t x = 88172645463325252ull;
    for (int trial = 0; trial < 24; trial++) {
        float temp = 0.5f + 0.25f * (float)(trial % 4);
        for (int i = 0; i < V; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            logits[i] = (float)((x >> 11) % 100000) / 100000.0f * (float)(4 + trial % 5) * 2.0f;
            /* a few spikes over a long flat tail that holds much of the mass */
            if (trial % 3 != 2) logits[i] = i % 500 == 0 ? 6.2f * temp + 0.4f : logits[i] * 0.05f;
        }
        int32_t top_k = trial % 3 == 0 ? 0 : 10 + 97 * trial;
        float top_p = trial % 2 ? 0.9f : 1.0f, min_p = trial % 4 == 3 ? 0.05f : 0.0f;
        if (!top_k && top_p == 1.0f && min_p == 0) top_p = 0.5f;
        int32_t n;
        dist(temp, top_k, top_p, min_p, logits, V, ids, probs, &n);
        /* reference with the same float arithmetic for the probabilities */
        float m = logits[0];
        for (int i = 1; i < V; i++) m = logits[i] > m ? logits[i] : m;
        double sum = 0;
        for (int i = 0; i < V; i++) sum += expf((logits[i] - m) / temp);
        for (int i = 0; i < V; i++) {
            ref[i].p = (float)(expf((logits[i] - m) / temp) / sum);
            ref[i].id = i;
        }
        qsort(ref, V, sizeof *ref, cmp_rc);
        int32_t k = V;
        if (top_k > 0 && top_k < k) {
            k = top_k;
            while (k < V && ref[k].p == ref[top_k - 1].p) k++;
        }
        if (top_p < 1) {
            double total = 0, cum = 0;
            for (int i = 0; i < k; i++) total += ref[i].p;
            int32_t j = 0;
            while (j < k) {
                cum += ref[j++].p;
                if (cum >= top_p * total) break;
            }
            k = j;
        }
        if (min_p > 0) {
            int32_t j = 1;
            while (j < k && ref[j].p >= ref[0].p * min_p) j++;
            k = j;
        }
        assert_int_equal(n, k);
        for (int i = 0; i < n; i++) assert_int_equal(ids[i], ref[i].id);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_temperature_and_filters),
        cmocka_unit_test(test_draws_follow_the_distribution),
        cmocka_unit_test(test_processors),
        cmocka_unit_test(test_matches_a_full_sort),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
