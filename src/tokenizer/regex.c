/* PCRE2 wrapper for the pre-tokenizer, normalizer and decoder patterns.
 * HF compiles them with Oniguruma (tokenizers/src/utils/onig.rs, SysRegex);
 * PCRE2 with UTF + UCP accepts the same syntax for the patterns models ship
 * (\p{L}, \p{N}, (?i:...), lookahead). String patterns are matched literally,
 * as HF regex-escapes them. */
#include "tok_internal.h"

#include <string.h>

lmc_status tok_regex_compile(tok_regex *re, const char *pattern, size_t len, bool literal) {
    int err = 0;
    PCRE2_SIZE off = 0;
    uint32_t opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF;
    opts |= literal ? PCRE2_LITERAL : PCRE2_UCP;
    re->code = pcre2_compile((PCRE2_SPTR)pattern, len, opts, &err, &off, NULL);
    if (!re->code && (err == PCRE2_ERROR_HEAP_FAILED || err == PCRE2_ERROR_NOMEMORY))
        return lmc_error(LMC_ERR_NOMEM, "out of memory compiling a regex");
    if (!re->code) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(err, msg, sizeof msg);
        return lmc_error(LMC_ERR_UNSUPPORTED, "regex /%.*s/ does not compile at offset %zu: %s",
                         (int)(len > 120 ? 120 : len), pattern, (size_t)off, (char *)msg);
    }
    /* JIT is an optimisation only: when it is unavailable the interpreter runs. */
    pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);
    return LMC_OK;
}

void tok_regex_free(tok_regex *re) {
    if (re->code) pcre2_code_free(re->code);
    re->code = NULL;
}

int tok_regex_next(const tok_regex *re, pcre2_match_data *md, const char *s, size_t n, size_t from,
                   size_t *ms, size_t *me) {
    while (from <= n) {
        int rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, from, 0, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) return 0;
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT || rc == PCRE2_ERROR_MATCHLIMIT ||
            rc == PCRE2_ERROR_DEPTHLIMIT) {
            /* The JIT stack is small by default; the interpreter keeps its
             * backtracking state on the heap. */
            rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, from, PCRE2_NO_JIT, md, NULL);
            if (rc == PCRE2_ERROR_NOMATCH) return 0;
        }
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return -(int)lmc_error(LMC_ERR_LIMIT, "regex match failed: %s", (char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (ov[1] > ov[0]) {
            *ms = ov[0];
            *me = ov[1];
            return 1;
        }
        /* An empty match yields no piece; go on from the next character. */
        size_t p = ov[0];
        if (p >= n) return 0;
        int32_t cp;
        from = p + lmc_utf8_decode(s + p, n - p, &cp);
    }
    return 0;
}

lmc_status tok_regex_from_json(tok_regex *re, const json_t *pattern, const char *what) {
    const json_t *v;
    if (json_is_object(pattern) && (v = json_object_get(pattern, "String")) && json_is_string(v))
        return tok_regex_compile(re, json_string_value(v), json_string_length(v), true);
    if (json_is_object(pattern) && (v = json_object_get(pattern, "Regex")) && json_is_string(v))
        return tok_regex_compile(re, json_string_value(v), json_string_length(v), false);
    return lmc_error(LMC_ERR_FORMAT, "%s: pattern must be {\"String\": ...} or {\"Regex\": ...}",
                     what);
}
