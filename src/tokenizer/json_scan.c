/* A small strict JSON scanner for the two huge values of tokenizer.json,
 * model.vocab (100k-250k entries) and model.merges (up to 500k). jansson
 * builds a tree of one malloc'd object per string and takes ~0.5 s on Llama
 * 3's file; scanning them in place keeps loading well under the 150 ms the
 * engine aims at. Everything else (added tokens, normalizers, ...) is parsed
 * by jansson from a copy of the file with these two values cut out. */
#include "tok_internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 128

typedef struct scan {
    const char *s;
    size_t n, i;
    tok_buf str; /* decoded string */
} scan;

static lmc_status bad(const scan *c, const char *what) {
    return lmc_error(LMC_ERR_FORMAT, "tokenizer.json: invalid JSON at byte %zu: %s", c->i, what);
}

static void skip_ws(scan *c) {
    while (c->i < c->n) {
        char ch = c->s[c->i];
        if (ch != ' ' && ch != '\n' && ch != '\r' && ch != '\t') break;
        c->i++;
    }
}

static int hex4(const char *p) {
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char h = p[k];
        v <<= 4;
        if (h >= '0' && h <= '9')
            v |= h - '0';
        else if (h >= 'a' && h <= 'f')
            v |= h - 'a' + 10;
        else if (h >= 'A' && h <= 'F')
            v |= h - 'A' + 10;
        else
            return -1;
    }
    return v;
}

/* Parses a string at c->i (which must be '"'); decoded bytes in c->str. */
static lmc_status scan_string(scan *c) {
    if (c->i >= c->n || c->s[c->i] != '"') return bad(c, "expected a string");
    c->i++;
    tok_buf_clear(&c->str);
    size_t run = c->i;
    lmc_status st;
    while (c->i < c->n) {
        unsigned char ch = (unsigned char)c->s[c->i];
        if (ch == '"') {
            if ((st = tok_buf_append(&c->str, c->s + run, c->i - run)) != LMC_OK) return st;
            c->i++;
            return LMC_OK;
        }
        if (ch < 0x20) return bad(c, "control character in string");
        if (ch >= 0x80) {
            /* Fast path: a two-byte sequence (ByteLevel's Ġ, Ċ, ...). */
            if (ch >= 0xC2 && ch <= 0xDF && c->i + 1 < c->n &&
                ((unsigned char)c->s[c->i + 1] & 0xC0) == 0x80) {
                c->i += 2;
                continue;
            }
            size_t ok = lmc_utf8_valid_prefix(c->s + c->i, c->n - c->i < 4 ? c->n - c->i : 4);
            if (!ok) return bad(c, "invalid UTF-8 in string");
            int32_t cp;
            c->i += lmc_utf8_decode(c->s + c->i, c->n - c->i, &cp);
            continue;
        }
        if (ch != '\\') {
            c->i++;
            continue;
        }
        if ((st = tok_buf_append(&c->str, c->s + run, c->i - run)) != LMC_OK) return st;
        if (c->i + 1 >= c->n) return bad(c, "truncated escape");
        char e = c->s[c->i + 1], out;
        c->i += 2;
        switch (e) {
        case '"':
            out = '"';
            break;
        case '\\':
            out = '\\';
            break;
        case '/':
            out = '/';
            break;
        case 'b':
            out = '\b';
            break;
        case 'f':
            out = '\f';
            break;
        case 'n':
            out = '\n';
            break;
        case 'r':
            out = '\r';
            break;
        case 't':
            out = '\t';
            break;
        case 'u': {
            if (c->i + 4 > c->n) return bad(c, "truncated \\u escape");
            int cp = hex4(c->s + c->i);
            if (cp < 0) return bad(c, "bad \\u escape");
            c->i += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                int lo = -1;
                if (c->i + 6 <= c->n && c->s[c->i] == '\\' && c->s[c->i + 1] == 'u')
                    lo = hex4(c->s + c->i + 2);
                if (lo < 0xDC00 || lo > 0xDFFF) return bad(c, "lone surrogate in \\u escape");
                c->i += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return bad(c, "lone surrogate in \\u escape");
            }
            char u[4];
            size_t k = lmc_utf8_encode(cp, u);
            if ((st = tok_buf_append(&c->str, u, k)) != LMC_OK) return st;
            run = c->i;
            continue;
        }
        default:
            return bad(c, "bad escape");
        }
        if ((st = tok_buf_append(&c->str, &out, 1)) != LMC_OK) return st;
        run = c->i;
    }
    return bad(c, "unterminated string");
}

static lmc_status scan_int(scan *c, int64_t *v) {
    size_t start = c->i;
    bool neg = false;
    if (c->i < c->n && c->s[c->i] == '-') {
        neg = true;
        c->i++;
    }
    int64_t x = 0;
    size_t digits = 0;
    while (c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9') {
        if (x > (INT64_MAX - 9) / 10) return bad(c, "integer too large");
        x = x * 10 + (c->s[c->i++] - '0');
        digits++;
    }
    if (!digits) {
        c->i = start;
        return bad(c, "expected an integer");
    }
    if (c->i < c->n && (c->s[c->i] == '.' || c->s[c->i] == 'e' || c->s[c->i] == 'E'))
        return bad(c, "expected an integer");
    *v = neg ? -x : x;
    return LMC_OK;
}

/* Skips a string without decoding it. Used for the values the real scans
 * (tok_json_scan_vocab/merges) or jansson read, which check them fully. */
static lmc_status skip_string(scan *c) {
    if (c->i >= c->n || c->s[c->i] != '"') return bad(c, "expected a string");
    for (size_t i = c->i + 1; i < c->n; i++) {
        char ch = c->s[i];
        if (ch == '\\') {
            i++;
        } else if (ch == '"') {
            c->i = i + 1;
            return LMC_OK;
        }
    }
    return bad(c, "unterminated string");
}

/* Skips any JSON value (checking its structure). */
static lmc_status skip_value(scan *c, int depth) {
    if (depth > MAX_DEPTH) return bad(c, "nesting too deep");
    skip_ws(c);
    if (c->i >= c->n) return bad(c, "unexpected end");
    char ch = c->s[c->i];
    lmc_status st;
    if (ch == '"') return skip_string(c);
    if (ch == '{' || ch == '[') {
        char close = ch == '{' ? '}' : ']';
        c->i++;
        skip_ws(c);
        if (c->i < c->n && c->s[c->i] == close) {
            c->i++;
            return LMC_OK;
        }
        for (;;) {
            if (ch == '{') {
                skip_ws(c);
                /* Keys too are checked later, by the real scans or jansson. */
                if ((st = skip_string(c)) != LMC_OK) return st;
                skip_ws(c);
                if (c->i >= c->n || c->s[c->i] != ':') return bad(c, "expected ':'");
                c->i++;
            }
            if ((st = skip_value(c, depth + 1)) != LMC_OK) return st;
            skip_ws(c);
            if (c->i >= c->n) return bad(c, "unexpected end");
            if (c->s[c->i] == ',') {
                c->i++;
                continue;
            }
            if (c->s[c->i] == close) {
                c->i++;
                return LMC_OK;
            }
            return bad(c, "expected ',' or a closing bracket");
        }
    }
    static const char *const words[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        size_t l = strlen(words[k]);
        if (c->n - c->i >= l && !memcmp(c->s + c->i, words[k], l)) {
            c->i += l;
            return LMC_OK;
        }
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        /* A number: digits with optional fraction and exponent. */
        size_t start = c->i;
        if (c->s[c->i] == '-') c->i++;
        while (c->i < c->n) {
            char d = c->s[c->i];
            if (!((d >= '0' && d <= '9') || d == '.' || d == 'e' || d == 'E' || d == '+' ||
                  d == '-'))
                break;
            c->i++;
        }
        if (c->i == start + (ch == '-')) return bad(c, "bad number");
        return LMC_OK;
    }
    return bad(c, "unexpected character");
}

/* Iterates the members of the object at c->i, stopping at each key. */
typedef lmc_status (*member_fn)(scan *c, void *ctx, const char *key, size_t key_len, int depth);

static lmc_status scan_object(scan *c, int depth, member_fn fn, void *ctx) {
    skip_ws(c);
    if (c->i >= c->n || c->s[c->i] != '{') return bad(c, "expected an object");
    c->i++;
    skip_ws(c);
    if (c->i < c->n && c->s[c->i] == '}') {
        c->i++;
        return LMC_OK;
    }
    lmc_status st;
    tok_buf key = {0}; /* the value's scan reuses c->str */
    for (;;) {
        skip_ws(c);
        if ((st = scan_string(c)) != LMC_OK) break;
        tok_buf_clear(&key);
        if ((st = tok_buf_append(&key, c->str.data, c->str.len)) != LMC_OK) break;
        size_t key_len = key.len;
        skip_ws(c);
        if (c->i >= c->n || c->s[c->i] != ':') {
            st = bad(c, "expected ':'");
            break;
        }
        c->i++;
        skip_ws(c);
        if ((st = fn(c, ctx, key.data, key_len, depth)) != LMC_OK) break;
        skip_ws(c);
        if (c->i < c->n && c->s[c->i] == ',') {
            c->i++;
            continue;
        }
        if (c->i < c->n && c->s[c->i] == '}') {
            c->i++;
            break;
        }
        st = bad(c, "expected ',' or '}'");
        break;
    }
    tok_buf_free(&key);
    return st;
}

typedef struct cut_ctx {
    tok_model_json *raw;
    size_t vocab_at, merges_at; /* start offsets of the values; SIZE_MAX none */
} cut_ctx;

static lmc_status model_member(scan *c, void *vctx, const char *key, size_t key_len, int depth) {
    cut_ctx *x = vctx;
    size_t start = c->i;
    lmc_status st = skip_value(c, depth + 1);
    if (st != LMC_OK) return st;
    if (key_len == 5 && !memcmp(key, "vocab", 5)) {
        x->raw->vocab = c->s + start;
        x->raw->vocab_len = c->i - start;
    } else if (key_len == 6 && !memcmp(key, "merges", 6)) {
        x->raw->merges = c->s + start;
        x->raw->merges_len = c->i - start;
    }
    return LMC_OK;
}

static lmc_status top_member(scan *c, void *ctx, const char *key, size_t key_len, int depth) {
    if (key_len == 5 && !memcmp(key, "model", 5) && c->i < c->n && c->s[c->i] == '{') {
        cut_ctx *x = ctx;
        x->raw->vocab = x->raw->merges = NULL; /* a later "model" key wins */
        return scan_object(c, depth + 1, model_member, ctx);
    }
    return skip_value(c, depth + 1);
}

lmc_status tok_json_cut_model(const char *text, size_t len, tok_model_json *raw, char **rest,
                              size_t *rest_len) {
    memset(raw, 0, sizeof *raw);
    *rest = NULL;
    scan c = {.s = text, .n = len};
    /* A UTF-8 byte order mark is whitespace, as lmc_json_parse (which reads
     * the rest, BOM included) takes it. */
    if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) c.i = 3;
    cut_ctx x = {.raw = raw};
    lmc_status st = scan_object(&c, 0, top_member, &x);
    if (st == LMC_OK) {
        skip_ws(&c);
        if (c.i != c.n) st = bad(&c, "trailing characters after the top-level object");
    }
    tok_buf_free(&c.str);
    if (st != LMC_OK) return st;
    /* The rest: the file with both values replaced by null, for jansson. */
    char *out = malloc(len + 16);
    if (!out) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
    const char *cuts[2] = {raw->vocab, raw->merges};
    size_t cut_len[2] = {raw->vocab_len, raw->merges_len};
    if (cuts[0] && cuts[1] && cuts[1] < cuts[0]) {
        const char *t = cuts[0];
        cuts[0] = cuts[1];
        cuts[1] = t;
        size_t tl = cut_len[0];
        cut_len[0] = cut_len[1];
        cut_len[1] = tl;
    }
    size_t o = 0, from = 0;
    for (int k = 0; k < 2; k++) {
        if (!cuts[k]) continue;
        size_t at = (size_t)(cuts[k] - text);
        memcpy(out + o, text + from, at - from);
        o += at - from;
        memcpy(out + o, "null", 4);
        o += 4;
        from = at + cut_len[k];
    }
    memcpy(out + o, text + from, len - from);
    o += len - from;
    out[o] = 0;
    *rest = out;
    *rest_len = o;
    return LMC_OK;
}

typedef struct vocab_ctx {
    tok_json_kv_fn fn;
    void *ctx;
} vocab_ctx;

static lmc_status vocab_member(scan *c, void *vctx, const char *key, size_t key_len, int depth) {
    vocab_ctx *x = vctx;
    int64_t v = 0;
    lmc_status st = scan_int(c, &v);
    if (st != LMC_OK) return st;
    return x->fn(x->ctx, key, key_len, v);
}

lmc_status tok_json_scan_vocab(const char *s, size_t n, tok_json_kv_fn fn, void *ctx) {
    scan c = {.s = s, .n = n};
    vocab_ctx x = {fn, ctx};
    lmc_status st = scan_object(&c, 0, vocab_member, &x);
    tok_buf_free(&c.str);
    if (st != LMC_OK) return lmc_error_prefix(st, "model.vocab");
    return LMC_OK;
}

lmc_status tok_json_scan_merges(const char *s, size_t n, tok_json_merge_fn fn, void *ctx) {
    scan c = {.s = s, .n = n};
    tok_buf first = {0};
    lmc_status st = LMC_OK;
    size_t index = 0;
    skip_ws(&c);
    if (c.i >= c.n || c.s[c.i] != '[') {
        st = bad(&c, "merges must be an array");
        goto done;
    }
    c.i++;
    skip_ws(&c);
    if (c.i < c.n && c.s[c.i] == ']') goto done;
    for (;; index++) {
        skip_ws(&c);
        if (c.i < c.n && c.s[c.i] == '"') {
            if ((st = scan_string(&c)) != LMC_OK) goto done;
            /* HF convert_merges_to_hashmap: skip "#version" lines, then
             * exactly two parts split on ' '. */
            const char *d = c.str.data ? c.str.data : "";
            size_t dl = c.str.len;
            if (dl >= 8 && !memcmp(d, "#version", 8)) {
                index--;
            } else {
                const char *sp = memchr(d, ' ', dl);
                if (sp && memchr(sp + 1, ' ', dl - (size_t)(sp + 1 - d))) sp = NULL;
                st = sp ? fn(ctx, index, d, (size_t)(sp - d), sp + 1, dl - (size_t)(sp + 1 - d))
                        : fn(ctx, index, d, dl, NULL, 0);
                if (st != LMC_OK) goto done;
            }
        } else if (c.i < c.n && c.s[c.i] == '[') {
            c.i++;
            skip_ws(&c);
            if ((st = scan_string(&c)) != LMC_OK) goto done;
            tok_buf_clear(&first);
            if ((st = tok_buf_append(&first, c.str.data, c.str.len)) != LMC_OK) goto done;
            skip_ws(&c);
            if (c.i >= c.n || c.s[c.i] != ',') {
                st = bad(&c, "a merge pair must hold two strings");
                goto done;
            }
            c.i++;
            skip_ws(&c);
            if ((st = scan_string(&c)) != LMC_OK) goto done;
            skip_ws(&c);
            if (c.i >= c.n || c.s[c.i] != ']') {
                st = bad(&c, "a merge pair must hold two strings");
                goto done;
            }
            c.i++;
            st = fn(ctx, index, first.data, first.len, c.str.data ? c.str.data : "", c.str.len);
            if (st != LMC_OK) goto done;
        } else {
            st = bad(&c, "a merge must be a string or a pair of strings");
            goto done;
        }
        skip_ws(&c);
        if (c.i < c.n && c.s[c.i] == ',') {
            c.i++;
            continue;
        }
        if (c.i < c.n && c.s[c.i] == ']') break;
        st = bad(&c, "expected ',' or ']'");
        goto done;
    }
done:
    tok_buf_free(&c.str);
    tok_buf_free(&first);
    if (st != LMC_OK) return lmc_error_prefix(st, "model.merges");
    return LMC_OK;
}
