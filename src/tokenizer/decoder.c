/* Decoders: tokenizers/src/decoders/{byte_fallback.rs,fuse.rs,strip.rs,
 * wordpiece.rs,bpe.rs,sequence.rs}, pre_tokenizers/{byte_level.rs,
 * metaspace.rs} (Decoder impls) and normalizers/replace.rs. Each maps a list
 * of token strings to a new list (Decoder::decode_chain); the text is the
 * concatenation of the final list. */
#include "tok_internal.h"

#include <stdlib.h>
#include <string.h>

typedef enum {
    DEC_BYTE_LEVEL,
    DEC_METASPACE,
    DEC_BYTE_FALLBACK,
    DEC_FUSE,
    DEC_STRIP,
    DEC_REPLACE,
    DEC_WORDPIECE,
    DEC_BPE,
    DEC_SEQUENCE,
} dec_kind;

struct tok_decoder {
    dec_kind kind;
    char *text; /* Replace content, WordPiece prefix, BPE suffix */
    size_t text_len;
    tok_regex pattern;  /* Replace */
    int32_t ch;         /* Metaspace replacement, Strip content */
    bool prepend;       /* Metaspace: prepend_scheme != never */
    size_t start, stop; /* Strip */
    bool cleanup;       /* WordPiece */
    tok_decoder **children;
    size_t n_children;
};

void tok_decoder_free(tok_decoder *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n_children; i++) tok_decoder_free(d->children[i]);
    free(d->children);
    free(d->text);
    tok_regex_free(&d->pattern);
    free(d);
}

static lmc_status get_char(const json_t *j, const char *key, int32_t *cp) {
    const char *s = lmc_json_string(j, key, NULL, NULL);
    if (!s || !*s) return lmc_error(LMC_ERR_FORMAT, "decoder: \"%s\" must be one character", key);
    size_t l = lmc_utf8_decode(s, strlen(s), cp);
    if (s[l]) return lmc_error(LMC_ERR_FORMAT, "decoder: \"%s\" must be one character", key);
    return LMC_OK;
}

static lmc_status dup_string(const char *s, char **out, size_t *len) {
    *len = strlen(s);
    if (!(*out = lmc_strdup(s))) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
    return LMC_OK;
}

static lmc_status load(const json_t *j, int depth, tok_decoder **out) {
    *out = NULL;
    if (depth > 16) return lmc_error(LMC_ERR_FORMAT, "decoder: nested too deeply");
    if (!json_is_object(j)) return lmc_error(LMC_ERR_FORMAT, "decoder must be an object");
    const char *type = lmc_json_string(j, "type", NULL, NULL);
    if (!type) return lmc_error(LMC_ERR_FORMAT, "decoder: missing \"type\"");
    tok_decoder *d = calloc(1, sizeof *d);
    if (!d) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
    lmc_status st = LMC_OK;
    bool bad = false;
    if (!strcmp(type, "ByteLevel")) {
        d->kind = DEC_BYTE_LEVEL;
    } else if (!strcmp(type, "Metaspace")) {
        d->kind = DEC_METASPACE;
        st = get_char(j, "replacement", &d->ch);
        const char *scheme = lmc_json_string(j, "prepend_scheme", "always", &bad);
        d->prepend = strcmp(scheme, "never") != 0;
        if (!lmc_json_bool(j, "add_prefix_space", true, &bad)) d->prepend = false;
    } else if (!strcmp(type, "ByteFallback")) {
        d->kind = DEC_BYTE_FALLBACK;
    } else if (!strcmp(type, "Fuse")) {
        d->kind = DEC_FUSE;
    } else if (!strcmp(type, "Strip")) {
        d->kind = DEC_STRIP;
        st = get_char(j, "content", &d->ch);
        int64_t a = lmc_json_int(j, "start", 0, &bad), b = lmc_json_int(j, "stop", 0, &bad);
        if (a < 0 || b < 0) bad = true;
        d->start = (size_t)a;
        d->stop = (size_t)b;
    } else if (!strcmp(type, "Replace")) {
        d->kind = DEC_REPLACE;
        const char *c = lmc_json_string(j, "content", NULL, &bad);
        if (!c)
            st = lmc_error(LMC_ERR_FORMAT, "Replace decoder: missing \"content\"");
        else if ((st = dup_string(c, &d->text, &d->text_len)) == LMC_OK)
            st = tok_regex_from_json(&d->pattern, json_object_get(j, "pattern"), "Replace decoder");
    } else if (!strcmp(type, "WordPiece")) {
        d->kind = DEC_WORDPIECE;
        st = dup_string(lmc_json_string(j, "prefix", "##", &bad), &d->text, &d->text_len);
        d->cleanup = lmc_json_bool(j, "cleanup", true, &bad);
    } else if (!strcmp(type, "BPEDecoder")) {
        d->kind = DEC_BPE;
        st = dup_string(lmc_json_string(j, "suffix", "</w>", &bad), &d->text, &d->text_len);
    } else if (!strcmp(type, "Sequence")) {
        d->kind = DEC_SEQUENCE;
        const json_t *arr = json_object_get(j, "decoders");
        if (!json_is_array(arr)) {
            st = lmc_error(LMC_ERR_FORMAT, "Sequence decoder: \"decoders\" must be an array");
        } else if (json_array_size(arr)) {
            d->children = calloc(json_array_size(arr), sizeof *d->children);
            if (!d->children) st = lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
            for (size_t i = 0; st == LMC_OK && i < json_array_size(arr); i++) {
                st = load(json_array_get(arr, i), depth + 1, &d->children[i]);
                if (st == LMC_OK) d->n_children++;
            }
        }
    } else {
        st = lmc_error(LMC_ERR_UNSUPPORTED, "decoder type \"%s\" is not supported", type);
    }
    if (st == LMC_OK && bad) st = lmc_error(LMC_ERR_FORMAT, "%s decoder: bad field types", type);
    if (st != LMC_OK) {
        tok_decoder_free(d);
        return st;
    }
    *out = d;
    return LMC_OK;
}

lmc_status tok_decoder_load(const json_t *j, tok_decoder **out) {
    *out = NULL;
    if (!j || json_is_null(j)) return LMC_OK;
    return load(j, 0, out);
}

/* ---- decoding ---------------------------------------------------------- */

static lmc_status byte_level(const tok_list *in, tok_list *out, tok_buf *tmp) {
    /* Tokens whose every char maps to a byte become those bytes, others
     * stay as UTF-8; the whole is read with String::from_utf8_lossy. */
    tok_buf bytes = *tmp; /* the caller's buffer, its capacity kept */
    bytes.len = 0;
    lmc_status st = LMC_OK;
    for (size_t i = 0; st == LMC_OK && i < in->n; i++) {
        const char *s = tok_list_str(in, i);
        size_t n = in->v[i].len, start = bytes.len;
        bool all = true;
        for (size_t k = 0; all && k < n;) {
            int32_t cp;
            size_t cl = lmc_utf8_decode(s + k, n - k, &cp);
            int b = tok_char_byte(cp);
            if (b < 0) {
                all = false;
                break;
            }
            char c = (char)b;
            st = tok_buf_append(&bytes, &c, 1);
            if (st != LMC_OK) break;
            k += cl;
        }
        if (st == LMC_OK && !all) {
            bytes.len = start;
            st = tok_buf_append(&bytes, s, n);
        }
    }
    if (st == LMC_OK) st = tok_list_push(out, "", 0, -1, false);
    if (st == LMC_OK) {
        size_t before = out->text.len;
        st = tok_utf8_lossy_append(&out->text, bytes.data ? bytes.data : "", bytes.len);
        out->v[0].len = out->text.len - before;
    }
    *tmp = bytes;
    return st;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static lmc_status flush_bytes(tok_buf *bytes, size_t count, tok_list *out) {
    /* Valid UTF-8 becomes one token; otherwise one U+FFFD per byte token. */
    lmc_status st = LMC_OK;
    if (!count) return LMC_OK;
    if (lmc_utf8_valid_prefix(bytes->data, bytes->len) == bytes->len) {
        st = tok_list_push(out, bytes->data, bytes->len, -1, false);
    } else {
        for (size_t k = 0; st == LMC_OK && k < count; k++)
            st = tok_list_push(out, "\xEF\xBF\xBD", 3, -1, false);
    }
    tok_buf_clear(bytes);
    return st;
}

static lmc_status byte_fallback(const tok_list *in, tok_list *out, tok_buf *tmp) {
    tok_buf bytes = *tmp; /* the caller's buffer, its capacity kept */
    bytes.len = 0;
    size_t count = 0;
    lmc_status st = LMC_OK;
    for (size_t i = 0; st == LMC_OK && i < in->n; i++) {
        const char *s = tok_list_str(in, i);
        size_t n = in->v[i].len;
        /* u8::from_str_radix(&token[3..5], 16) on "<0xHH>" */
        if (n == 6 && !memcmp(s, "<0x", 3) && s[5] == '>' && hexval(s[3]) >= 0 &&
            hexval(s[4]) >= 0) {
            char b = (char)(hexval(s[3]) * 16 + hexval(s[4]));
            st = tok_buf_append(&bytes, &b, 1);
            count++;
            continue;
        }
        if ((st = flush_bytes(&bytes, count, out)) != LMC_OK) break;
        count = 0;
        st = tok_list_push(out, s, n, -1, false);
    }
    if (st == LMC_OK) st = flush_bytes(&bytes, count, out);
    *tmp = bytes;
    return st;
}

static lmc_status strip(const tok_decoder *d, const tok_list *in, tok_list *out) {
    lmc_status st = LMC_OK;
    for (size_t i = 0; st == LMC_OK && i < in->n; i++) {
        const char *s = tok_list_str(in, i);
        size_t b = 0, e = in->v[i].len;
        for (size_t k = 0; k < d->start && b < e; k++) {
            int32_t cp;
            size_t cl = lmc_utf8_decode(s + b, e - b, &cp);
            if (cp != d->ch) break;
            b += cl;
        }
        for (size_t k = 0; k < d->stop && e > b; k++) {
            size_t p = e - 1;
            while (p > b && ((uint8_t)s[p] & 0xC0) == 0x80) p--;
            int32_t cp;
            lmc_utf8_decode(s + p, e - p, &cp);
            if (cp != d->ch) break;
            e = p;
        }
        st = tok_list_push(out, s + b, e - b, -1, false);
    }
    return st;
}

static lmc_status replace_all(const tok_regex *re, const char *with, size_t with_len, const char *s,
                              size_t n, tok_list *out, pcre2_match_data *md) {
    lmc_status st = tok_list_push(out, "", 0, -1, false);
    size_t from = 0, ms, me;
    while (st == LMC_OK) {
        int r = tok_regex_next(re, md, s, n, from, &ms, &me);
        if (r < 0) return (lmc_status)-r;
        if (r == 0) break;
        if ((st = tok_list_extend(out, s + from, ms - from)) == LMC_OK)
            st = tok_list_extend(out, with, with_len);
        from = me;
    }
    return st == LMC_OK ? tok_list_extend(out, s + from, n - from) : st;
}

static lmc_status replace_literal(const char *pat, size_t pat_len, const char *with,
                                  size_t with_len, const char *s, size_t n, tok_list *out) {
    lmc_status st = tok_list_push(out, "", 0, -1, false);
    size_t from = 0;
    while (st == LMC_OK && pat_len && from + pat_len <= n) {
        const char *hit = memmem(s + from, n - from, pat, pat_len);
        if (!hit) break;
        size_t at = (size_t)(hit - s);
        if ((st = tok_list_extend(out, s + from, at - from)) == LMC_OK)
            st = tok_list_extend(out, with, with_len);
        from = at + pat_len;
    }
    return st == LMC_OK ? tok_list_extend(out, s + from, n - from) : st;
}

static lmc_status wordpiece(const tok_decoder *d, const tok_list *in, tok_list *out) {
    static const char *const cleanups[][2] = {
        {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
        {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
        {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    tok_list a = {0}, b = {0};
    lmc_status st = LMC_OK;
    for (size_t i = 0; st == LMC_OK && i < in->n; i++) {
        const char *s = tok_list_str(in, i);
        size_t n = in->v[i].len;
        tok_list_clear(&a);
        if (i != 0 && n >= d->text_len && !memcmp(s, d->text, d->text_len))
            st = tok_list_push(&a, s + d->text_len, n - d->text_len, -1, false);
        else if (i != 0 && (st = tok_list_push(&a, " ", 1, -1, false)) == LMC_OK)
            st = tok_list_extend(&a, s, n);
        else if (i == 0)
            st = tok_list_push(&a, s, n, -1, false);
        for (size_t k = 0; st == LMC_OK && d->cleanup && k < sizeof cleanups / sizeof *cleanups;
             k++) {
            tok_list_clear(&b);
            st = replace_literal(cleanups[k][0], strlen(cleanups[k][0]), cleanups[k][1],
                                 strlen(cleanups[k][1]), tok_list_str(&a, 0), a.v[0].len, &b);
            tok_list_swap(&a, &b);
        }
        if (st == LMC_OK) st = tok_list_push(out, tok_list_str(&a, 0), a.v[0].len, -1, false);
    }
    tok_list_free(&a);
    tok_list_free(&b);
    return st;
}

static lmc_status decode_one(const tok_decoder *d, const tok_list *in, tok_list *out, tok_buf *tmp,
                             pcre2_match_data *md) {
    lmc_status st = LMC_OK;
    tok_list_clear(out);
    switch (d->kind) {
    case DEC_BYTE_LEVEL:
        return byte_level(in, out, tmp);
    case DEC_BYTE_FALLBACK:
        return byte_fallback(in, out, tmp);
    case DEC_FUSE:
        st = tok_list_push(out, "", 0, -1, false);
        for (size_t i = 0; st == LMC_OK && i < in->n; i++)
            st = tok_list_extend(out, tok_list_str(in, i), in->v[i].len);
        return st;
    case DEC_STRIP:
        return strip(d, in, out);
    case DEC_REPLACE:
        for (size_t i = 0; st == LMC_OK && i < in->n; i++)
            st = replace_all(&d->pattern, d->text, d->text_len, tok_list_str(in, i), in->v[i].len,
                             out, md);
        return st;
    case DEC_METASPACE:
        for (size_t i = 0; st == LMC_OK && i < in->n; i++) {
            const char *s = tok_list_str(in, i);
            size_t n = in->v[i].len;
            st = tok_list_push(out, "", 0, -1, false);
            for (size_t k = 0; st == LMC_OK && k < n;) {
                int32_t cp;
                size_t cl = lmc_utf8_decode(s + k, n - k, &cp);
                /* Every replacement char of the first token is dropped when
                 * a prefix was prepended (metaspace.rs decode_chain). */
                if (cp == d->ch)
                    st = (i == 0 && d->prepend) ? LMC_OK : tok_list_extend(out, " ", 1);
                else
                    st = tok_list_extend(out, s + k, cl);
                k += cl;
            }
        }
        return st;
    case DEC_WORDPIECE:
        return wordpiece(d, in, out);
    case DEC_BPE:
        for (size_t i = 0; st == LMC_OK && i < in->n; i++)
            st = replace_literal(d->text, d->text_len, i + 1 == in->n ? "" : " ",
                                 i + 1 == in->n ? 0 : 1, tok_list_str(in, i), in->v[i].len, out);
        return st;
    case DEC_SEQUENCE:
        break;
    }
    return lmc_error(LMC_ERR_INVALID_ARG, "decoder: bad kind");
}

lmc_status tok_decode_chain(const tok_decoder *d, tok_list *tokens, tok_list *scratch, tok_buf *tmp,
                            pcre2_match_data *md) {
    lmc_status st = LMC_OK;
    if (!d) {
        /* No decoder: tokens.join(" ") */
        tok_list_clear(scratch);
        st = tok_list_push(scratch, "", 0, -1, false);
        for (size_t i = 0; st == LMC_OK && i < tokens->n; i++) {
            if (i) st = tok_list_extend(scratch, " ", 1);
            if (st == LMC_OK)
                st = tok_list_extend(scratch, tok_list_str(tokens, i), tokens->v[i].len);
        }
        if (st == LMC_OK) tok_list_swap(tokens, scratch);
        return st;
    }
    if (d->kind == DEC_SEQUENCE) {
        for (size_t i = 0; st == LMC_OK && i < d->n_children; i++)
            st = tok_decode_chain(d->children[i], tokens, scratch, tmp, md);
        return st;
    }
    if ((st = decode_one(d, tokens, scratch, tmp, md)) == LMC_OK) tok_list_swap(tokens, scratch);
    return st;
}
