/* Base layer: errors, JSON helpers, file mapping, thread pool. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/base.h"
#include "base/json.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_error_message(void **state) {
    (void)state;
    lmc_status st = lmc_error(LMC_ERR_FORMAT, "file %s: key %d", "a.json", 3);
    assert_int_equal(st, LMC_ERR_FORMAT);
    assert_string_equal(lmc_last_error(), "file a.json: key 3");
    lmc_error_prefix(st, "loading");
    assert_string_equal(lmc_last_error(), "loading: file a.json: key 3");
    assert_string_equal(lmc_status_string(LMC_ERR_SHAPE), "shape mismatch");
}

static void test_json_lookups(void **state) {
    (void)state;
    json_t *j = NULL;
    const char *txt = "{\"a\": 3, \"b\": 2.5, \"c\": true, \"d\": \"x\", \"e\": null, \"f\": 4.0}";
    assert_int_equal(lmc_json_parse(txt, strlen(txt), "t", &j), LMC_OK);
    bool bad = false;
    assert_int_equal(lmc_json_int(j, "a", 0, &bad), 3);
    assert_int_equal(lmc_json_int(j, "f", 0, &bad), 4);
    assert_int_equal(lmc_json_int(j, "e", 7, &bad), 7);
    assert_int_equal(lmc_json_int(j, "zz", 9, &bad), 9);
    assert_false(bad);
    assert_true(lmc_json_number(j, "b", 0, &bad) == 2.5);
    assert_true(lmc_json_bool(j, "c", false, &bad));
    assert_string_equal(lmc_json_string(j, "d", NULL, &bad), "x");
    assert_false(bad);
    lmc_json_int(j, "d", 0, &bad);
    assert_true(bad);
    json_decref(j);
    assert_int_equal(lmc_json_parse("{\"a\": ", 6, "cfg.json", &j), LMC_ERR_FORMAT);
    assert_non_null(strstr(lmc_last_error(), "cfg.json"));
}

static void test_map_missing_file(void **state) {
    (void)state;
    lmc_mapped_file f;
    assert_int_equal(lmc_map_file("/nonexistent/x.bin", &f), LMC_ERR_IO);
    assert_non_null(strstr(lmc_last_error(), "/nonexistent/x.bin"));
}

typedef struct {
    atomic_llong sum;
    atomic_int calls;
    int *hits;
} pf_ctx;

static void pf_body(void *ctx, int64_t b, int64_t e, int worker) {
    pf_ctx *c = ctx;
    assert_true(worker >= 0 && worker < lmc_get_num_threads());
    for (int64_t i = b; i < e; i++) {
        atomic_fetch_add(&c->sum, i);
        c->hits[i]++;
    }
    atomic_fetch_add(&c->calls, 1);
}

static void test_parallel_for_covers_range_once(void **state) {
    (void)state;
    for (int threads = 1; threads <= 3; threads++) {
        lmc_set_num_threads(threads);
        for (int64_t n = 0; n < 2000; n += 97) {
            pf_ctx c = {0};
            c.hits = calloc((size_t)n + 1, sizeof(int));
            lmc_parallel_for(n, 3, pf_body, &c);
            assert_int_equal(atomic_load(&c.sum), n * (n - 1) / 2);
            for (int64_t i = 0; i < n; i++) assert_int_equal(c.hits[i], 1);
            free(c.hits);
        }
    }
    lmc_set_num_threads(0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_message),
        cmocka_unit_test(test_json_lookups),
        cmocka_unit_test(test_map_missing_file),
        cmocka_unit_test(test_parallel_for_covers_range_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
