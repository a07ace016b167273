/* Fault injection: every allocation (malloc, calloc, realloc, aligned_alloc)
 * made by a model load, a tokenizer load, a template render and a
 * generation fails in turn, the Nth call for N = 1, 2, ... until the path
 * runs through. Each failing run must return an error (or succeed where the
 * allocation was optional), never crash, and give back all it took: the
 * blocks it allocated are all freed (the wrappers count them).
 * The distinct allocation sites reached (return addresses) are counted and
 * printed. The allocator functions are wrapped here, in the test program,
 * over glibc's own (__libc_malloc...). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "lmc.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LMC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define LMC_ASAN 1
#endif
#endif

#define SHIPPED LMC_SOURCE_DIR "/models/kjv-llama-11m-4bit"

#ifdef LMC_ASAN
int main(void) {
    printf("SKIPPED: fault injection wraps malloc, which the sanitizer owns\n");
    return 0;
}
#else
static _Thread_local bool t_armed; /* only the test's thread counts */
static long g_count, g_fail_at = -1;
static bool g_failed;
static void *g_failed_site;
#define MAX_SITES 4096
static void *g_sites[MAX_SITES];
static int g_n_sites;

static bool should_fail(void *site) {
    if (!t_armed) return false;
    t_armed = false; /* the bookkeeping below allocates nothing, but be safe */
    long n = ++g_count;
    bool seen = false;
    for (int i = 0; i < g_n_sites && !seen; i++) seen = g_sites[i] == site;
    if (!seen && g_n_sites < MAX_SITES) g_sites[g_n_sites++] = site;
    t_armed = true;
    if (n == g_fail_at) {
        g_failed = true;
        g_failed_site = site;
        return true;
    }
    return false;
}

/* Blocks allocated minus blocks freed by the armed thread: a run that
 * frees all it allocated ends where it began. */
static long g_live;

static void *counted(void *p) {
    if (p && t_armed) g_live++;
    return p;
}
void *malloc(size_t n) {
    return should_fail(__builtin_return_address(0)) ? NULL : counted(__libc_malloc(n));
}
void *calloc(size_t a, size_t b) {
    return should_fail(__builtin_return_address(0)) ? NULL : counted(__libc_calloc(a, b));
}
void *realloc(void *p, size_t n) {
    if (should_fail(__builtin_return_address(0))) return NULL;
    void *q = __libc_realloc(p, n);
    if (t_armed) {
        if (!p && q) g_live++;
        if (p && !n) g_live--;
    }
    return q;
}
void *aligned_alloc(size_t align, size_t n) {
    return should_fail(__builtin_return_address(0)) ? NULL : counted(__libc_memalign(align, n));
}
void free(void *p) {
    if (p && t_armed) g_live--;
    __libc_free(p);
}

static size_t in_use(void) {
    return (size_t)g_live;
}

typedef lmc_status (*path_fn)(void);

/* What a run produced (ids or text), to check that a tolerated failure
 * changed nothing. */
static char g_result[1 << 16];
static size_t g_result_len;

static void keep(const void *data, size_t len) {
    if (len > sizeof g_result) len = sizeof g_result;
    memcpy(g_result, data, len);
    g_result_len = len;
}

static lmc_model *g_model;
static lmc_tokenizer *g_tok;

static lmc_status path_model_load(void) {
    lmc_model *m = NULL;
    lmc_status st = lmc_model_load(SHIPPED, &m);
    lmc_model_free(m);
    return st;
}

static lmc_status path_tokenizer_load(void) {
    lmc_tokenizer *t = NULL;
    lmc_status st = lmc_tokenizer_load(SHIPPED, &t);
    if (st == LMC_OK) {
        int32_t *ids = NULL;
        size_t n = 0;
        st = lmc_tokenizer_encode(t, "In the beginning <|end|> God", 28, LMC_ENCODE_ADD_SPECIAL,
                                  &ids, &n);
        if (st == LMC_OK) keep(ids, n * sizeof *ids);
        lmc_free(ids);
    }
    lmc_tokenizer_free(t);
    return st;
}

static lmc_status path_template(void) {
    char *out = NULL;
    size_t len = 0;
    lmc_status st = lmc_chat_template_render(
        SHIPPED,
        "[{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": \"Hi\"}]",
        1, NULL, &out, &len);
    if (st == LMC_OK) keep(out, len);
    lmc_free(out);
    return st;
}

static const int32_t prompt[] = {0, 303, 394, 395, 18};

static void sampling_params(lmc_generate_params *p, int32_t max_tokens) {
    lmc_generate_params_default(p);
    p->max_tokens = max_tokens;
    p->seed = 7;
    p->temperature = 0.7f;
    p->top_p = 0.9f;
    p->repetition_penalty = 1.1f;
}

static lmc_status path_generate(void) {
    lmc_session *s = NULL;
    lmc_status st = lmc_session_create(g_model, 64, &s);
    if (st != LMC_OK) return st;
    lmc_generate_params p;
    sampling_params(&p, 8);
    lmc_generate_result r = {0};
    st = lmc_generate(s, g_tok, prompt, 5, &p, NULL, NULL, &r);
    if (st == LMC_OK) keep(r.tokens, (size_t)r.n_tokens * sizeof *r.tokens);
    lmc_generate_result_clear(&r);
    lmc_session_free(s);
    return st;
}

/* Allocations of one generation of n tokens after a 5-token prompt (none
 * failing). */
static long generate_allocations(int32_t n) {
    lmc_session *s = NULL;
    assert_int_equal(lmc_session_create(g_model, 256, &s), LMC_OK);
    lmc_generate_params p;
    sampling_params(&p, n);
    p.ignore_eos = 1;
    lmc_generate_result r = {0};
    g_count = 0;
    g_fail_at = -1;
    t_armed = true;
    lmc_status st = lmc_generate(s, g_tok, prompt, 5, &p, NULL, NULL, &r);
    t_armed = false;
    assert_int_equal(st, LMC_OK);
    assert_int_equal(r.n_tokens, n);
    lmc_generate_result_clear(&r);
    lmc_session_free(s);
    return g_count;
}

/* Runs fn with the Nth allocation failing, N = 1, 2, ...; returns the
 * number of allocations of the run that went through. */
static long inject(const char *name, path_fn fn) {
    /* warm up: process-wide pools and caches are made once, not leaked */
    assert_int_equal(fn(), LMC_OK);
    assert_int_equal(fn(), LMC_OK);
    static char want[sizeof g_result];
    size_t want_len = g_result_len;
    memcpy(want, g_result, want_len);
    long total = 0, failures = 0, tolerated = 0;
    g_n_sites = 0;
    for (long n = 1;; n++) {
        size_t before = in_use();
        g_count = 0;
        g_fail_at = n;
        g_failed = false;
        g_result_len = 0;
        t_armed = true;
        lmc_status st = fn();
        t_armed = false;
        size_t after = in_use();
        if (!g_failed) {
            assert_int_equal(st, LMC_OK);
            total = g_count;
            break;
        }
        if (st == LMC_OK) {
            tolerated++; /* an optional allocation (a cache): the same result */
            if (g_result_len != want_len || memcmp(g_result, want, want_len))
                fail_msg("%s: allocation %ld failing (called from %p) changed the result", name, n,
                         g_failed_site);
        } else {
            failures++;
            if (st != LMC_ERR_NOMEM)
                fail_msg("%s: allocation %ld failing gave %s, not out of memory: %s", name, n,
                         lmc_status_string(st), lmc_last_error());
        }
        if (after > before)
            fail_msg("%s: allocation %ld failing (status %s: %s) leaked %zu blocks", name, n,
                     lmc_status_string(st), lmc_last_error(), after - before);
    }
    print_message("%s: %ld allocations from %d sites; each failure returned an error (%ld) or "
                  "was tolerated (%ld), nothing leaked\n",
                  name, total, g_n_sites, failures, tolerated);
    return total;
}

static void test_model_load(void **state) {
    (void)state;
    inject("model load", path_model_load);
}
static void test_tokenizer_load(void **state) {
    (void)state;
    inject("tokenizer load + encode", path_tokenizer_load);
}
static void test_template_render(void **state) {
    (void)state;
    inject("template render", path_template);
}
static void test_generate(void **state) {
    (void)state;
    assert_int_equal(lmc_model_load(SHIPPED, &g_model), LMC_OK);
    assert_int_equal(lmc_tokenizer_load(SHIPPED, &g_tok), LMC_OK);
    inject("generate", path_generate);
    /* the decode loop allocates nothing per token: only the growing result
     * arrays (doubling) add a few allocations from 16 to 128 tokens (it was
     * 46 a token: per-call buffers, the detokenizer's lists, qsort's) */
    generate_allocations(16);
    long a16 = generate_allocations(16), a128 = generate_allocations(128);
    print_message("generate: %ld allocations for 16 tokens, %ld for 128\n", a16, a128);
    if (a128 - a16 > 8)
        fail_msg("decode allocates per token: %ld more for 112 more tokens", a128 - a16);
    lmc_tokenizer_free(g_tok);
    lmc_model_free(g_model);
}

int main(void) {
    lmc_set_num_threads(1); /* worker threads would allocate outside the count */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_load),
        cmocka_unit_test(test_tokenizer_load),
        cmocka_unit_test(test_template_render),
        cmocka_unit_test(test_generate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
