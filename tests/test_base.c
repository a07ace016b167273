/* Base layer: errors, JSON helpers, file mapping, thread pool. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>

#include "base/base.h"
#include "base/json.h"
#include "base/text.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static atomic_int g_other_chunks;

static void slow_worker_body(void *ctx, int64_t b, int64_t e, int worker) {
    (void)ctx, (void)b, (void)e;
    if (worker != 0) {
        atomic_fetch_add(&g_other_chunks, 1);
        struct timespec t = {0, 10 * 1000 * 1000}; /* as if descheduled */
        nanosleep(&t, NULL);
    } else { /* 20 us of work: time for the worker to join */
        double t0 = lmc_time_now();
        while (lmc_time_now() - t0 < 20e-6) {
        }
    }
}

/* A worker that keeps the caller waiting (another process holds its core)
 * makes the pool run jobs on the caller alone, trying the pool again only
 * now and then. */
static void test_pool_runs_inline_when_workers_lag(void **state) {
    (void)state;
    lmc_set_num_threads(2);
    int joined = 0;
    for (int job = 0; job < 200; job++) {
        atomic_store(&g_other_chunks, 0);
        lmc_parallel_for(64, 1, slow_worker_body, NULL);
        joined += atomic_load(&g_other_chunks) > 0;
    }
    /* always on the pool, the worker would take part in nearly all 200 */
    if (joined > 10) fail_msg("the slow worker took part in %d of 200 jobs", joined);
    lmc_set_num_threads(0);
}

/* A stall: the worker sleeps 10 ms in its chunk (as if descheduled), the
 * caller works 600 us per chunk; either the caller waits for the worker or
 * does it all while the worker, not asleep, takes no part. */
static void stall_body(void *ctx, int64_t b, int64_t e, int worker) {
    (void)ctx, (void)b, (void)e;
    if (worker != 0) {
        struct timespec t = {0, 10 * 1000 * 1000};
        nanosleep(&t, NULL);
    } else {
        double t0 = lmc_time_now();
        while (lmc_time_now() - t0 < 600e-6) {
        }
    }
}

static atomic_int g_whole_calls, g_calls;

/* Counts the caller's calls that took the whole range (the job ran inline). */
static void range_body(void *ctx, int64_t b, int64_t e, int worker) {
    if (worker == 0) {
        atomic_fetch_add(&g_calls, 1);
        if (b == 0 && e == *(const int64_t *)ctx) atomic_fetch_add(&g_whole_calls, 1);
    }
}

/* true: the job ran on the caller alone */
static bool ran_inline(int64_t n) {
    atomic_store(&g_whole_calls, 0), atomic_store(&g_calls, 0);
    lmc_parallel_for(n, 1, range_body, &n);
    return atomic_load(&g_calls) == 1 && atomic_load(&g_whole_calls) == 1;
}

static atomic_bool g_worker_joined;

/* A short job (64 us on the caller alone, never a stall) that notes whether
 * a worker took part. */
static void join_body(void *ctx, int64_t b, int64_t e, int worker) {
    (void)ctx;
    if (worker != 0) atomic_store(&g_worker_joined, true);
    double t0 = lmc_time_now();
    while (lmc_time_now() - t0 < 1e-6 * (double)(e - b)) {
    }
}

/* Until a worker takes part in a job: the workers are then awake and
 * spinning, not asleep (a job whose woken worker comes late is no stall). */
static void wake_workers(void) {
    atomic_store(&g_worker_joined, false);
    for (int i = 0; i < 2000 && !atomic_load(&g_worker_joined); i++)
        lmc_parallel_for(64, 1, join_body, NULL);
}

/* One stall is a hiccup (the host took a virtual CPU away): the pool goes
 * on. Two in a row make every job run on the caller alone for a while (20
 * ms at first), and then the pool is tried again. Each stall_body job after
 * wake_workers is a stall whatever the worker does: it joins and keeps the
 * caller waiting 10 ms, or it is late and the caller runs 2.4 ms alone. On
 * a busy machine the scenario can fall apart (the two stalls more than
 * STALL_WINDOW apart while wake_workers waits for a descheduled worker, or
 * the worker asleep again when the stall job opens: then it is no stall),
 * so it gets up to 5 tries, each with a new pool; one must show the
 * backoff. */
static void test_pool_backs_off_after_stalls(void **state) {
    (void)state;
    bool backed_off = false;
    for (int attempt = 0; attempt < 5 && !backed_off; attempt++) {
        lmc_set_num_threads(2); /* a new pool: no stall seen, no timings */
        if (lmc_get_num_threads() < 2) skip();
        /* each job a size of its own: the per-kind timings start afresh (a
         * new kind runs on the pool first) and do not decide */
        wake_workers();
        lmc_parallel_for(4, 1, stall_body, NULL);
        assert_false(ran_inline(64));
        wake_workers();
        lmc_parallel_for(5, 1, stall_body, NULL);
        double t0 = lmc_time_now();
        bool inline1 = ran_inline(65), inline2 = ran_inline(1000);
        /* 20 ms alone; unless this thread was descheduled for most of that
         * (or runs under valgrind): then it says nothing */
        backed_off = (inline1 && inline2) || lmc_time_now() - t0 >= 0.015;
    }
    assert_true(backed_off);
    struct timespec t = {0, 40 * 1000 * 1000};
    nanosleep(&t, NULL);
    assert_false(ran_inline(66));
    lmc_set_num_threads(0);
}

/* The pool's workers block every signal, so a process-directed one (a
 * Ctrl-C) goes to an application thread that waits for it (a Ctrl-C taken
 * by a sleeping worker never woke lmc chat's pselect). Read from
 * /proc/self/task: other threads (OpenBLAS's, a sanitizer's) are not ours. */
static void test_workers_leave_signals_to_the_application(void **state) {
    (void)state;
    lmc_set_num_threads(3);
    pf_ctx c = {0};
    c.hits = calloc(1000, sizeof(int));
    lmc_parallel_for(1000, 1, pf_body, &c); /* the workers are running */
    free(c.hits);
    DIR *d = opendir("/proc/self/task");
    if (!d) {
        lmc_set_num_threads(0);
        skip();
    }
    int workers = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[300], line[256], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (!fgets(comm, sizeof comm, f)) comm[0] = 0;
        fclose(f);
        if (strncmp(comm, "lmc-worker", 10)) continue;
        workers++;
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        f = fopen(path, "r");
        assert_non_null(f);
        unsigned long long blk = 0;
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "SigBlk:", 7)) blk = strtoull(line + 7, NULL, 16);
        fclose(f);
        const unsigned long long want =
            1ull << (SIGINT - 1) | 1ull << (SIGTERM - 1) | 1ull << (SIGUSR1 - 1);
        if ((blk & want) != want) fail_msg("worker %s: SigBlk %llx", e->d_name, blk);
    }
    closedir(d);
    assert_int_equal(workers, 2);
    lmc_set_num_threads(0);
}

static void test_float_repr_as_python(void **state) {
    (void)state;
    /* expected strings are Python 3's repr() of the same doubles */
    static const struct {
        double x;
        const char *repr;
    } cases[] = {
        {0.0, "0.0"},
        {-0.0, "-0.0"},
        {1.0, "1.0"},
        {0.1, "0.1"},
        {1.5, "1.5"},
        {100.0, "100.0"},
        {1e16, "1e+16"},
        {1e15, "1000000000000000.0"},
        {0.0001, "0.0001"},
        {0.00001, "1e-05"},
        {1.0 / 3, "0.3333333333333333"},
        {-2.5e-7, "-2.5e-07"},
        {1e300, "1e+300"},
        {5e-324, "5e-324"},
        {1.7976931348623157e308, "1.7976931348623157e+308"},
        {123456.789, "123456.789"},
        {1e-5 * 3, "3.0000000000000004e-05"},
    };
    char out[LMC_FLOAT_REPR_MAX];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lmc_float_repr(cases[i].x, out);
        assert_string_equal(out, cases[i].repr);
    }
    lmc_float_repr(NAN, out);
    assert_string_equal(out, "nan");
    lmc_float_repr(-INFINITY, out);
    assert_string_equal(out, "-inf");
    /* the JSON writer spells them as json.dumps does */
    json_t *a = json_pack("[f,f,f]", 0.1, 1e16, -0.0);
    char *text = lmc_json_dumps_python(a, 0);
    assert_non_null(text);
    assert_string_equal(text, "[\n0.1,\n1e+16,\n-0.0\n]");
    free(text);
    json_decref(a);
}

static void test_utf8_codec(void **state) {
    (void)state;
    int32_t cp;
    char enc[4];
    assert_int_equal(lmc_utf8_decode("\xE2\x82\xAC", 3, &cp), 3);
    assert_int_equal(cp, 0x20AC);
    assert_int_equal(lmc_utf8_decode("\xF0\x9F\x98\x80", 4, &cp), 4);
    assert_int_equal(cp, 0x1F600);
    /* overlong, surrogate, truncated, stray continuation: one U+FFFD byte */
    const char *bad[] = {"\xC0\xAF", "\xED\xA0\x80", "\xE2\x82", "\x80", "\xF5\x80\x80\x80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(lmc_utf8_decode(bad[i], strlen(bad[i]), &cp), 1);
        assert_int_equal(cp, 0xFFFD);
    }
    size_t sub = 0;
    assert_int_equal(lmc_utf8_sequence("\xE2\x82"
                                       "x",
                                       3, &sub),
                     0);
    assert_int_equal(sub, 2); /* the maximal invalid subpart */
    assert_int_equal(lmc_utf8_encode(0x20AC, enc), 3);
    assert_memory_equal(enc, "\xE2\x82\xAC", 3);
    assert_int_equal(lmc_utf8_encode(0xD800, enc), 3);
    assert_memory_equal(enc, "\xEF\xBF\xBD", 3);
    assert_int_equal(lmc_utf8_valid_prefix("ab\xE2\x82\xAC"
                                           "c\xFF"
                                           "d",
                                           8),
                     6);
    assert_int_equal(lmc_utf8_length("a\xE2\x82\xAC\xFF", 5), 3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_message),
        cmocka_unit_test(test_float_repr_as_python),
        cmocka_unit_test(test_utf8_codec),
        cmocka_unit_test(test_json_lookups),
        cmocka_unit_test(test_map_missing_file),
        cmocka_unit_test(test_parallel_for_covers_range_once),
        cmocka_unit_test(test_pool_backs_off_after_stalls),
        cmocka_unit_test(test_workers_leave_signals_to_the_application),
        cmocka_unit_test(test_pool_runs_inline_when_workers_lag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
