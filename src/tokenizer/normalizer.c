/* Normalizers: tokenizers/src/normalizers/{unicode.rs,utils.rs,replace.rs,
 * prepend.rs,strip.rs}. Unicode forms come from utf8proc. */
#include "tok_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

typedef enum {
    NORM_NFC,
    NORM_NFD,
    NORM_NFKC,
    NORM_NFKD,
    NORM_LOWERCASE,
    NORM_PREPEND,
    NORM_REPLACE,
    NORM_STRIP,
    NORM_SEQUENCE,
} norm_kind;

struct tok_normalizer {
    norm_kind kind;
    char *text; /* Prepend's prepend, Replace's content */
    size_t text_len;
    tok_regex pattern; /* Replace */
    bool left, right;  /* Strip */
    tok_normalizer **children;
    size_t n_children;
};

void tok_normalizer_free(tok_normalizer *n) {
    if (!n) return;
    for (size_t i = 0; i < n->n_children; i++) tok_normalizer_free(n->children[i]);
    free(n->children);
    free(n->text);
    tok_regex_free(&n->pattern);
    free(n);
}

static lmc_status copy_string(const json_t *j, const char *key, const char *what, char **out,
                              size_t *len) {
    const json_t *v = json_object_get(j, key);
    if (!json_is_string(v))
        return lmc_error(LMC_ERR_FORMAT, "%s: \"%s\" must be a string", what, key);
    *len = json_string_length(v);
    *out = malloc(*len + 1);
    if (!*out) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
    memcpy(*out, json_string_value(v), *len + 1);
    return LMC_OK;
}

static lmc_status load(const json_t *j, int depth, tok_normalizer **out) {
    *out = NULL;
    if (depth > 16) return lmc_error(LMC_ERR_FORMAT, "normalizer: nested too deeply");
    if (!json_is_object(j)) return lmc_error(LMC_ERR_FORMAT, "normalizer must be an object");
    const char *type = lmc_json_string(j, "type", NULL, NULL);
    if (!type) return lmc_error(LMC_ERR_FORMAT, "normalizer: missing \"type\"");
    tok_normalizer *n = calloc(1, sizeof *n);
    if (!n) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
    lmc_status st = LMC_OK;
    bool bad = false;
    if (!strcmp(type, "NFC"))
        n->kind = NORM_NFC;
    else if (!strcmp(type, "NFD"))
        n->kind = NORM_NFD;
    else if (!strcmp(type, "NFKC"))
        n->kind = NORM_NFKC;
    else if (!strcmp(type, "NFKD"))
        n->kind = NORM_NFKD;
    else if (!strcmp(type, "Lowercase"))
        n->kind = NORM_LOWERCASE;
    else if (!strcmp(type, "Prepend")) {
        n->kind = NORM_PREPEND;
        st = copy_string(j, "prepend", "Prepend normalizer", &n->text, &n->text_len);
    } else if (!strcmp(type, "Replace")) {
        n->kind = NORM_REPLACE;
        st = copy_string(j, "content", "Replace normalizer", &n->text, &n->text_len);
        if (st == LMC_OK)
            st = tok_regex_from_json(&n->pattern, json_object_get(j, "pattern"),
                                     "Replace normalizer");
    } else if (!strcmp(type, "Strip")) {
        n->kind = NORM_STRIP;
        n->left = lmc_json_bool(j, "strip_left", true, &bad);
        n->right = lmc_json_bool(j, "strip_right", true, &bad);
        if (bad) st = lmc_error(LMC_ERR_FORMAT, "Strip normalizer: flags must be booleans");
    } else if (!strcmp(type, "Sequence")) {
        n->kind = NORM_SEQUENCE;
        const json_t *arr = json_object_get(j, "normalizers");
        if (!json_is_array(arr)) {
            st = lmc_error(LMC_ERR_FORMAT, "Sequence normalizer: \"normalizers\" must be an array");
        } else if (json_array_size(arr)) {
            n->children = calloc(json_array_size(arr), sizeof *n->children);
            if (!n->children) st = lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
            for (size_t i = 0; st == LMC_OK && i < json_array_size(arr); i++) {
                st = load(json_array_get(arr, i), depth + 1, &n->children[i]);
                if (st == LMC_OK) n->n_children++;
            }
        }
    } else {
        st = lmc_error(LMC_ERR_UNSUPPORTED, "normalizer type \"%s\" is not supported", type);
    }
    if (st != LMC_OK) {
        tok_normalizer_free(n);
        return st;
    }
    *out = n;
    return LMC_OK;
}

lmc_status tok_normalizer_load(const json_t *j, tok_normalizer **out) {
    *out = NULL;
    if (!j || json_is_null(j)) return LMC_OK;
    return load(j, 0, out);
}

static lmc_status unicode_form(norm_kind k, const char *s, size_t len, tok_buf *out) {
    /* ASCII is unchanged by every normalization form: skip utf8proc. */
    size_t i = 0;
    while (i < len && (uint8_t)s[i] < 0x80) i++;
    if (i == len) return tok_buf_append(out, s, len);
    int opts = UTF8PROC_STABLE;
    if (k == NORM_NFC || k == NORM_NFKC)
        opts |= UTF8PROC_COMPOSE;
    else
        opts |= UTF8PROC_DECOMPOSE;
    if (k == NORM_NFKC || k == NORM_NFKD) opts |= UTF8PROC_COMPAT;
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)len, &dst,
                                      (utf8proc_option_t)opts);
    if (r < 0) {
        free(dst);
        return lmc_error(LMC_ERR_INVALID_ARG, "normalizer: %s", utf8proc_errmsg(r));
    }
    lmc_status st = tok_buf_append(out, dst, (size_t)r);
    free(dst);
    return st;
}

static lmc_status lowercase(const char *s, size_t len, tok_buf *out) {
    /* Rust char::to_lowercase: the simple mapping, except U+0130 which
     * lowercases to "i\u0307" (SpecialCasing.txt, unconditional). */
    lmc_status st = tok_buf_reserve(out, len + 8);
    for (size_t i = 0; st == LMC_OK && i < len;) {
        int32_t cp;
        size_t cl = lmc_utf8_decode(s + i, len - i, &cp);
        if (cp < 0x80) {
            char c = (char)(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
            st = tok_buf_append(out, &c, 1);
        } else if (cp == 0x130) {
            st = tok_buf_append(out, "i\xCC\x87", 3);
        } else {
            char u[4];
            st = tok_buf_append(out, u, lmc_utf8_encode(utf8proc_tolower(cp), u));
        }
        i += cl;
    }
    return st;
}

static lmc_status strip(const tok_normalizer *n, const char *s, size_t len, tok_buf *out) {
    size_t b = 0, e = len;
    while (n->left && b < e) {
        int32_t cp;
        size_t cl = lmc_utf8_decode(s + b, e - b, &cp);
        if (!tok_is_whitespace(cp)) break;
        b += cl;
    }
    while (n->right && e > b) {
        size_t k = e - 1;
        while (k > b && ((uint8_t)s[k] & 0xC0) == 0x80) k--;
        int32_t cp;
        lmc_utf8_decode(s + k, e - k, &cp);
        if (!tok_is_whitespace(cp)) break;
        e = k;
    }
    return tok_buf_append(out, s + b, e - b);
}

/* Normalized text may grow (NFKC, Prepend, Replace), but not without bound:
 * a chain of Replace normalizers whose content holds their own pattern
 * multiplies the text at each step (a 2 KB tokenizer.json made 5 bytes
 * into a gigabyte; found by fuzzing). */
static size_t growth_limit(size_t len) {
    return len > (SIZE_MAX - 65536) / 64 ? SIZE_MAX : 64 * len + 65536;
}

static lmc_status too_long(size_t len) {
    return lmc_error(LMC_ERR_LIMIT,
                     "tokenizer: the normalizers make %zu bytes of input into more than %zu", len,
                     growth_limit(len));
}

static lmc_status replace(const tok_normalizer *n, const char *s, size_t len, tok_buf *out,
                          pcre2_match_data *md) {
    size_t from = 0, ms, me;
    lmc_status st;
    for (;;) {
        int r = tok_regex_next(&n->pattern, md, s, len, from, &ms, &me);
        if (r < 0) return (lmc_status)-r;
        if (r == 0) break;
        if ((st = tok_buf_append(out, s + from, ms - from)) != LMC_OK ||
            (st = tok_buf_append(out, n->text, n->text_len)) != LMC_OK)
            return st;
        if (out->len > growth_limit(len)) return too_long(len);
        from = me;
    }
    return tok_buf_append(out, s + from, len - from);
}

lmc_status tok_normalize(const tok_normalizer *n, const char *s, size_t len, tok_buf *out,
                         pcre2_match_data *md) {
    tok_buf_clear(out);
    if (!n) return tok_buf_append(out, s, len);
    switch (n->kind) {
    case NORM_NFC:
    case NORM_NFD:
    case NORM_NFKC:
    case NORM_NFKD:
        return unicode_form(n->kind, s, len, out);
    case NORM_LOWERCASE:
        return lowercase(s, len, out);
    case NORM_PREPEND: {
        /* Prepend only touches non-empty strings (normalizers/prepend.rs). */
        lmc_status st = len ? tok_buf_append(out, n->text, n->text_len) : LMC_OK;
        return st == LMC_OK ? tok_buf_append(out, s, len) : st;
    }
    case NORM_REPLACE:
        return replace(n, s, len, out, md);
    case NORM_STRIP:
        return strip(n, s, len, out);
    case NORM_SEQUENCE: {
        lmc_status st = tok_buf_append(out, s, len);
        tok_buf tmp = {0};
        for (size_t i = 0; st == LMC_OK && i < n->n_children; i++) {
            st = tok_normalize(n->children[i], out->data, out->len, &tmp, md);
            tok_buf t = *out;
            *out = tmp;
            tmp = t;
            if (st == LMC_OK && out->len > growth_limit(len)) st = too_long(len);
        }
        tok_buf_free(&tmp);
        return st;
    }
    }
    return lmc_error(LMC_ERR_INVALID_ARG, "normalizer: bad kind");
}
