#include "json.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

lmc_status lmc_json_load_file(const char *path, json_t **out) {
    char *text = NULL;
    size_t len = 0;
    lmc_status st = lmc_read_file(path, &text, &len);
    if (st != LMC_OK) return st;
    st = lmc_json_parse(text, len, path, out);
    free(text);
    return st;
}

/* ---- integer literals beyond int64 ----------------------------------------
 * jansson stores integers as json_int_t (int64) and refuses larger literals
 * ("too big integer"); Python's json reads them as ints. Meta's Llama
 * tokenizer_config.json has "model_max_length": 1000000000000000019884624838656
 * (int(1e30)). Such literals are read as reals: jansson parses a copy of the
 * text in which each of them has ".0" appended. */

#define NO_BIG_INT SIZE_MAX

static bool is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Whether the digits d[0..n) (no sign) are beyond int64 (neg: below it). A
 * literal with a leading zero is invalid JSON and left for jansson. */
static bool beyond_int64(const char *d, size_t n, bool neg) {
    if (n > 1 && d[0] == '0') return false;
    if (n != 19) return n > 19;
    return memcmp(d, neg ? "9223372036854775808" : "9223372036854775807", 19) > 0;
}

/* From *at, outside strings (escapes honoured), finds the next integer
 * literal that int64 cannot hold; returns the offset just past it (where
 * ".0" goes) and moves *at there, or returns NO_BIG_INT. */
static size_t next_big_int(const char *s, size_t len, size_t *at) {
    size_t i = *at;
    while (i < len) {
        char c = s[i];
        if (c == '"') {
            for (i++; i < len && s[i] != '"'; i++)
                if (s[i] == '\\') i++;
            i++;
            continue;
        }
        if (c != '-' && !(c >= '0' && c <= '9')) {
            /* Words (true, null, invalid tokens) are skipped whole, so a
             * digit inside one is never taken for a number. */
            if (is_word_char(c))
                while (i < len && is_word_char(s[i])) i++;
            else
                i++;
            continue;
        }
        bool neg = c == '-';
        size_t d = i + neg, e = d;
        while (e < len && s[e] >= '0' && s[e] <= '9') e++;
        i = e;
        if (e < len && (s[e] == '.' || s[e] == 'e' || s[e] == 'E' || is_word_char(s[e]))) {
            while (i < len && (is_word_char(s[i]) || s[i] == '.' || s[i] == '+' || s[i] == '-'))
                i++;
            continue;
        }
        if (beyond_int64(s + d, e - d, neg)) {
            *at = e;
            return e;
        }
    }
    *at = len;
    return NO_BIG_INT;
}

/* Maps a jansson error in the rewritten copy back onto the text as given:
 * the ".0"s appended before the error position on its line come off the
 * column (they hold no newline, so the line is right as it is). */
static void unshift_error(const char *s, size_t len, json_error_t *err) {
    if (err->position < 0) return;
    size_t pos = (size_t)err->position, orig = pos, at = 0, end, k = 0;
    while ((end = next_big_int(s, len, &at)) != NO_BIG_INT) {
        size_t copy_at = end + 2 * k; /* where this ".0" sits in the copy */
        if (copy_at >= pos) break;
        k++;
        orig = pos < copy_at + 2 ? end : pos - 2 * k;
    }
    if (orig > len) orig = len;
    size_t line_start = orig, on_line = 0;
    while (line_start > 0 && s[line_start - 1] != '\n') line_start--;
    at = 0;
    for (size_t j = 0; j < k && (end = next_big_int(s, len, &at)) != NO_BIG_INT; j++)
        if (end >= line_start) on_line++;
    err->position = (int)orig;
    if (err->column > (int)(2 * on_line)) err->column -= (int)(2 * on_line);
}

/* jansson 2.14 ignores some failed allocations in its lexer and then drops
 * the characters it could not store: a parse under memory pressure can
 * return wrong strings with no error. Its allocations go through these
 * wrappers (chained to whatever was installed before), which note a failure
 * for the parse in progress on this thread, so that parse is refused. */
static json_malloc_t g_prev_malloc;
static json_free_t g_prev_free;
static _Thread_local bool t_alloc_failed;
static pthread_once_t g_alloc_once = PTHREAD_ONCE_INIT;

static void *json_alloc(size_t n) {
    void *p = g_prev_malloc ? g_prev_malloc(n) : malloc(n);
    if (!p) t_alloc_failed = true;
    return p;
}

static void json_dealloc(void *p) {
    if (g_prev_free)
        g_prev_free(p);
    else
        free(p);
}

static void install_alloc(void) {
    json_get_alloc_funcs(&g_prev_malloc, &g_prev_free);
    json_set_alloc_funcs(json_alloc, json_dealloc);
}

/* jansson's own allocation failing is not bad JSON */
static lmc_status load_failure(const json_error_t *err) {
    if (json_error_code(err) == json_error_out_of_memory || (!err->text[0] && err->line < 0))
        return lmc_error(LMC_ERR_NOMEM, "out of memory parsing JSON");
    return LMC_ERR_FORMAT;
}

static json_t *load(const char *text, size_t len, size_t flags, json_error_t *err) {
    pthread_once(&g_alloc_once, install_alloc);
    t_alloc_failed = false;
    json_t *j = json_loadb(text, len, flags, err);
    if (t_alloc_failed) {
        json_decref(j);
        j = NULL;
        err->text[0] = '\0';
        err->line = err->column = -1;
    }
    return j;
}

lmc_status lmc_json_loadb(const char *text, size_t len, size_t flags, json_t **out,
                          json_error_t *err) {
    size_t at = 0, n_big = 0;
    while (next_big_int(text, len, &at) != NO_BIG_INT) n_big++;
    if (!n_big) {
        *out = load(text, len, flags, err);
        return *out ? LMC_OK : load_failure(err);
    }
    char *copy = len <= (SIZE_MAX - 1) / 3 ? malloc(len + 2 * n_big) : NULL;
    if (!copy) {
        *out = NULL;
        return lmc_error(LMC_ERR_NOMEM, "out of memory");
    }
    size_t from = 0, o = 0, end;
    at = 0;
    while ((end = next_big_int(text, len, &at)) != NO_BIG_INT) {
        memcpy(copy + o, text + from, end - from);
        o += end - from;
        memcpy(copy + o, ".0", 2);
        o += 2;
        from = end;
    }
    memcpy(copy + o, text + from, len - from);
    o += len - from;
    *out = load(copy, o, flags, err);
    free(copy);
    if (*out) return LMC_OK;
    unshift_error(text, len, err);
    return load_failure(err);
}

lmc_status lmc_json_parse(const char *text, size_t len, const char *what, json_t **out) {
    /* A UTF-8 byte order mark (Windows editors write one) is whitespace. */
    if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) {
        text += 3;
        len -= 3;
    }
    json_error_t err;
    lmc_status st = lmc_json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, out, &err);
    if (st == LMC_ERR_FORMAT)
        return lmc_error(LMC_ERR_FORMAT, "%s: invalid JSON at line %d, column %d: %s", what,
                         err.line, err.column, err.text);
    if (st != LMC_OK) return lmc_error_prefix(st, "%s", what);
    return LMC_OK;
}

static const json_t *lookup(const json_t *obj, const char *key) {
    if (!obj || !json_is_object(obj)) return NULL;
    const json_t *v = json_object_get(obj, key);
    return (v && !json_is_null(v)) ? v : NULL;
}

int64_t lmc_json_int(const json_t *obj, const char *key, int64_t def, bool *bad) {
    const json_t *v = lookup(obj, key);
    if (!v) return def;
    if (json_is_integer(v)) return (int64_t)json_integer_value(v);
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == floor(d) && fabs(d) < 9e15) return (int64_t)d;
    }
    if (bad) *bad = true;
    return def;
}

double lmc_json_number(const json_t *obj, const char *key, double def, bool *bad) {
    const json_t *v = lookup(obj, key);
    if (!v) return def;
    if (json_is_number(v)) return json_number_value(v);
    if (bad) *bad = true;
    return def;
}

bool lmc_json_bool(const json_t *obj, const char *key, bool def, bool *bad) {
    const json_t *v = lookup(obj, key);
    if (!v) return def;
    if (json_is_boolean(v)) return json_is_true(v);
    if (bad) *bad = true;
    return def;
}

const char *lmc_json_string(const json_t *obj, const char *key, const char *def, bool *bad) {
    const json_t *v = lookup(obj, key);
    if (!v) return def;
    if (json_is_string(v)) return json_string_value(v);
    if (bad) *bad = true;
    return def;
}
