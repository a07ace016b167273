/* Long words: BPE merges words of many symbols through rank buckets instead
 * of a heap. Both orders are HF's (lowest rank, then leftmost), so every
 * text gives the same ids whichever runs: checked on the real tokenizers
 * (make test fetches them) with the bucket path forced on every word, and
 * the cost of a 4 MB single word is bounded in time and memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "helpers/skip.h"
#include "lmc.h"
#include "tokenizer/tok_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

static const char *const NAMES[] = {"llama3", "qwen3", "gemma3", "llama2"};

static char *mixed_text(size_t *len) {
    /* words, spaces, digits, accents, CJK, emoji, long runs */
    static const char *const pieces[] = {"In the beginning God created the heaven and the earth. ",
                                         "  \t\n ",
                                         "1234567 3.14 ",
                                         "caf\xC3\xA9 na\xC3\xAFve ",
                                         "\xE4\xB8\xAD\xE6\x96\x87 ",
                                         "\xF0\x9F\x98\x80 ",
                                         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                                         "abababababababababababababab ",
                                         "Supercalifragilisticexpialidocious",
                                         "<|end|> <s> </s> ",
                                         "\r\n\r\n"};
    size_t cap = 1 << 20, n = 0;
    char *t = malloc(cap);
    assert_non_null(t);
    unsigned x = 12345;
    while (n + 64 < cap) {
        x = x * 1103515245u + 12345u;
        const char *p = pieces[(x >> 16) % (sizeof pieces / sizeof pieces[0])];
        size_t k = strlen(p);
        memcpy(t + n, p, k);
        n += k;
    }
    /* and one long word of random letters */
    for (size_t i = 0; i < 20000 && n + 1 < cap; i++) {
        x = x * 1103515245u + 12345u;
        t[n++] = (char)('a' + (x >> 16) % 26);
    }
    t[n] = '\0';
    *len = n;
    return t;
}

static void test_same_ids_both_paths(void **state) {
    (void)state;
    size_t len;
    char *text = mixed_text(&len);
    int tested = 0;
    for (size_t k = 0; k < sizeof NAMES / sizeof NAMES[0]; k++) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s/tokenizers/%s", LMC_BINARY_DIR, NAMES[k]);
        lmc_tokenizer *tok = NULL;
        if (lmc_tokenizer_load(dir, &tok) != LMC_OK) {
            print_message("no %s tokenizer: %s\n", NAMES[k], lmc_last_error());
            continue;
        }
        int32_t *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        size_t saved = tok_bpe_bucket_threshold;
        tok_bpe_bucket_threshold = (size_t)-1; /* the heap everywhere */
        assert_int_equal(lmc_tokenizer_encode(tok, text, len, 0, &a, &na), LMC_OK);
        tok_bpe_bucket_threshold = 2; /* the buckets everywhere */
        assert_int_equal(lmc_tokenizer_encode(tok, text, len, 0, &b, &nb), LMC_OK);
        tok_bpe_bucket_threshold = saved;
        assert_int_equal(na, nb);
        assert_memory_equal(a, b, na * sizeof *a);
        print_message("%s: %zu ids, the same from the heap and the buckets\n", NAMES[k], na);
        lmc_free(a);
        lmc_free(b);
        lmc_tokenizer_free(tok);
        tested++;
    }
    free(text);
    if (!tested)
        TEST_SKIP_UNLESS_CI("no real tokenizers in build/tokenizers (make test fetches them)");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A 4 MB word without spaces (Llama 3's tokenizer): linear time and
 * under 20 bytes of memory a byte beyond the tokenizer (issue 14). */
static void test_long_word_bounded(void **state) {
    (void)state;
    lmc_tokenizer *tok = NULL;
    if (lmc_tokenizer_load(LMC_BINARY_DIR "/tokenizers/llama3", &tok) != LMC_OK) {
        TEST_SKIP_UNLESS_CI("no build/tokenizers/llama3 (make test fetches it)");
        return;
    }
    const size_t n = 4 << 20;
    char *w = malloc(n);
    assert_non_null(w);
    unsigned x = 7;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        w[i] = (char)('a' + (x >> 16) % 26);
    }
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    double t0 = now_s();
    int32_t *ids = NULL;
    size_t k = 0;
    assert_int_equal(lmc_tokenizer_encode(tok, w, n, 0, &ids, &k), LMC_OK);
    double dt = now_s() - t0;
    getrusage(RUSAGE_SELF, &after);
    double per_byte = (double)(after.ru_maxrss - before.ru_maxrss) * 1024.0 / (double)n;
    print_message("4 MB word: %zu ids in %.2f s, peak RSS +%.1f bytes per input byte\n", k, dt,
                  per_byte);
    assert_true(k > n / 8);
#ifndef SANITIZED /* the sanitizers' redzones and shadow are not the tokenizer's */
    if (per_byte >= 20) fail_msg("%.1f bytes of memory per input byte", per_byte);
#endif
    if (dt > 10) fail_msg("%.2f s for 4 MB", dt);
    lmc_free(ids);
    free(w);
    /* past the per-call limit: a clear error, at once (nothing is read) */
    ids = NULL;
    assert_int_equal(lmc_tokenizer_encode(tok, "x", LMC_TOKENIZER_MAX_INPUT + 1, 0, &ids, &k),
                     LMC_ERR_LIMIT);
    assert_non_null(strstr(lmc_last_error(), "over the limit"));
    assert_null(ids);
    lmc_tokenizer_free(tok);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_long_word_bounded),
        cmocka_unit_test(test_same_ids_both_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
