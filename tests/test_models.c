/* Every reference model (the project's fixtures, ../shared/conformance and
 * ../shared/real-models): logits at every position within the set's relative
 * L2 tolerance of transformers, and the greedy ids equal, on the generic and
 * the SIMD kernels. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "helpers/fixtures.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct greedy_out {
    int32_t ids[256];
    int n;
} greedy_out;

static int collect(int32_t tok, void *ud) {
    greedy_out *g = ud;
    if (g->n < 256) g->ids[g->n++] = tok;
    return 0;
}

/* Model types and layouts this build runs; others are skipped by name. */
static bool supported(const ref_case *c) {
    static const char *types[] = {"llama", "mistral", "qwen2", "gemma", "phi3", "mixtral"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (c->model_type && !strcmp(c->model_type, types[i])) return true;
    return false;
}

static int check_case(const ref_case *c) {
    lmc_model *m = NULL;
    lmc_session *s = NULL;
    int failures = 0;
    if (lmc_model_load(c->dir, &m) != LMC_OK) {
        print_error("%s: load failed: %s\n", c->name, lmc_last_error());
        return 1;
    }
    lmc_model_info info;
    lmc_model_get_info(m, &info);
    assert_int_equal((size_t)info.vocab_size, c->vocab);
    float *logits = malloc(c->n_prompt * c->vocab * sizeof(float));
    assert_int_equal(lmc_session_create(m, 0, &s), LMC_OK);
    assert_int_equal(lmc_session_forward(s, c->prompt, (int32_t)c->n_prompt, 1, logits), LMC_OK);
    double err = rel_l2(logits, c->logits, c->n_prompt * c->vocab);
    if (err > c->rtol) {
        print_error("%s: logits rel_l2 %.3g > %.3g\n", c->name, err, c->rtol);
        failures++;
    }
    lmc_session_reset(s);
    lmc_generate_params p;
    lmc_generate_params_default(&p);
    p.temperature = 0;
    p.max_tokens = (int32_t)c->n_greedy;
    p.ignore_eos = 1; /* the references do not stop at EOS */
    greedy_out g = {0};
    assert_int_equal(lmc_generate(s, c->prompt, (int32_t)c->n_prompt, &p, collect, &g, NULL),
                     LMC_OK);
    if ((size_t)g.n != c->n_greedy || memcmp(g.ids, c->greedy, c->n_greedy * sizeof(int32_t))) {
        print_error("%s: greedy ids differ\n", c->name);
        failures++;
    }
    json_t *story = json_object_get(c->expect, "story");
    if (story) {
        size_t np, ng;
        int32_t *sp = json_int_array(json_object_get(story, "prompt_tokens"), &np);
        int32_t *sg = json_int_array(json_object_get(story, "greedy_tokens"), &ng);
        lmc_session_reset(s);
        greedy_out gs = {0};
        p.max_tokens = (int32_t)ng;
        assert_int_equal(lmc_generate(s, sp, (int32_t)np, &p, collect, &gs, NULL), LMC_OK);
        if ((size_t)gs.n != ng || memcmp(gs.ids, sg, ng * sizeof(int32_t))) {
            print_error("%s: story ids differ\n", c->name);
            failures++;
        }
        free(sp);
        free(sg);
    }
    print_message("%-28s rel_l2 %.2e greedy %s\n", c->name, err, failures ? "FAIL" : "ok");
    free(logits);
    lmc_session_free(s);
    lmc_model_free(m);
    return failures;
}

static void run_set(const char *set, bool required) {
    ref_case *cs;
    size_t n = ref_cases_load(set, &cs);
    if (n == 0) {
        if (required) fail_msg("reference set %s is missing", set);
        print_message("set %s absent: skipped\n", set);
        skip();
    }
    int failures = 0, ran = 0;
    const lmc_kernel_table *paths[2] = {lmc_kernels_generic(), lmc_kernels_avx2()};
    for (int k = 0; k < 2; k++) {
        if (!paths[k]) continue;
        lmc_kernels_use(paths[k]);
        print_message("kernels: %s\n", paths[k]->name);
        for (size_t i = 0; i < n; i++) {
            if (!supported(&cs[i])) {
                if (k == 0) print_message("%-28s skipped (not supported yet)\n", cs[i].name);
                continue;
            }
            failures += check_case(&cs[i]);
            ran++;
        }
    }
    lmc_kernels_use(NULL);
    ref_cases_free(cs, n);
    assert_true(ran > 0);
    assert_int_equal(failures, 0);
}

static void test_project_fixtures(void **state) {
    (void)state;
    run_set(LMC_SOURCE_DIR "/tests/fixtures/models", true);
}

static void test_shared_conformance(void **state) {
    (void)state;
    run_set(LMC_SHARED_DIR "/conformance", false);
}

static void test_shared_real_models(void **state) {
    (void)state;
    run_set(LMC_SHARED_DIR "/real-models", false);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_project_fixtures),
        cmocka_unit_test(test_shared_conformance),
        cmocka_unit_test(test_shared_real_models),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
