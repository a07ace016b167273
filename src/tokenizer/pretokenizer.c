/* Pre-tokenizers: tokenizers/src/pre_tokenizers/{byte_level.rs,split.rs,
 * metaspace.rs,digits.rs,punctuation.rs,whitespace.rs,sequence.rs} and the
 * split behaviours of NormalizedString::split (tokenizer/normalizer.rs). */
#include "tok_internal.h"

#include <stdlib.h>
#include <string.h>

typedef enum {
    PT_BYTE_LEVEL,
    PT_SPLIT,
    PT_METASPACE,
    PT_DIGITS,
    PT_PUNCTUATION,
    PT_WHITESPACE,
    PT_WHITESPACE_SPLIT,
    PT_SEQUENCE,
} pretok_kind;

typedef enum {
    SPLIT_REMOVED,
    SPLIT_ISOLATED,
    SPLIT_MERGED_WITH_PREVIOUS,
    SPLIT_MERGED_WITH_NEXT,
    SPLIT_CONTIGUOUS,
} split_behavior;

typedef enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER } prepend_scheme;

struct tok_pretok {
    pretok_kind kind;
    bool add_prefix_space, use_regex; /* ByteLevel */
    tok_regex re;                     /* ByteLevel (GPT-2), Split, Whitespace */
    split_behavior behavior;          /* Split, Punctuation */
    bool invert;                      /* Split */
    char rep[4];                      /* Metaspace replacement, UTF-8 */
    size_t rep_len;
    int32_t rep_cp;
    prepend_scheme prepend;
    bool split;             /* Metaspace */
    bool individual_digits; /* Digits */
    tok_pretok **children;
    size_t n_children;
};

/* pre_tokenizers/byte_level.rs */
static const char GPT2_RE[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
/* pre_tokenizers/whitespace.rs */
static const char WHITESPACE_RE[] = "\\w+|[^\\w\\s]+";

void tok_pretok_free(tok_pretok *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n_children; i++) tok_pretok_free(p->children[i]);
    free(p->children);
    tok_regex_free(&p->re);
    free(p);
}

static lmc_status parse_behavior(const json_t *j, split_behavior def, split_behavior *out) {
    const char *b = lmc_json_string(j, "behavior", NULL, NULL);
    *out = def;
    if (!b) return LMC_OK;
    static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious",
                                        "MergedWithNext", "Contiguous"};
    for (int i = 0; i < 5; i++)
        if (!strcmp(b, names[i])) {
            *out = (split_behavior)i;
            return LMC_OK;
        }
    return lmc_error(LMC_ERR_FORMAT, "pre-tokenizer: unknown split behavior \"%s\"", b);
}

static lmc_status load_metaspace(const json_t *j, tok_pretok *p) {
    const char *rep = lmc_json_string(j, "replacement", NULL, NULL);
    if (!rep || !*rep) return lmc_error(LMC_ERR_FORMAT, "Metaspace: missing \"replacement\"");
    p->rep_len = lmc_utf8_decode(rep, strlen(rep), &p->rep_cp);
    if (rep[p->rep_len])
        return lmc_error(LMC_ERR_FORMAT, "Metaspace: replacement must be one character");
    memcpy(p->rep, rep, p->rep_len);
    bool bad = false;
    /* MetaspaceHelper: prepend_scheme defaults to always; a legacy
     * add_prefix_space false forces never. */
    p->prepend = PREPEND_ALWAYS;
    const char *scheme = lmc_json_string(j, "prepend_scheme", NULL, &bad);
    if (scheme) {
        if (!strcmp(scheme, "always"))
            p->prepend = PREPEND_ALWAYS;
        else if (!strcmp(scheme, "first"))
            p->prepend = PREPEND_FIRST;
        else if (!strcmp(scheme, "never"))
            p->prepend = PREPEND_NEVER;
        else
            return lmc_error(LMC_ERR_FORMAT, "Metaspace: unknown prepend_scheme \"%s\"", scheme);
    }
    if (!lmc_json_bool(j, "add_prefix_space", true, &bad)) p->prepend = PREPEND_NEVER;
    p->split = lmc_json_bool(j, "split", true, &bad);
    if (bad) return lmc_error(LMC_ERR_FORMAT, "Metaspace: bad field types");
    return LMC_OK;
}

static lmc_status load(const json_t *j, int depth, tok_pretok **out) {
    *out = NULL;
    if (depth > 16) return lmc_error(LMC_ERR_FORMAT, "pre-tokenizer: nested too deeply");
    if (!json_is_object(j)) return lmc_error(LMC_ERR_FORMAT, "pre_tokenizer must be an object");
    const char *type = lmc_json_string(j, "type", NULL, NULL);
    if (!type) return lmc_error(LMC_ERR_FORMAT, "pre-tokenizer: missing \"type\"");
    tok_pretok *p = calloc(1, sizeof *p);
    if (!p) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
    lmc_status st = LMC_OK;
    bool bad = false;
    if (!strcmp(type, "ByteLevel")) {
        p->kind = PT_BYTE_LEVEL;
        p->add_prefix_space = lmc_json_bool(j, "add_prefix_space", true, &bad);
        p->use_regex = lmc_json_bool(j, "use_regex", true, &bad);
        if (p->use_regex) st = tok_regex_compile(&p->re, GPT2_RE, sizeof GPT2_RE - 1, false);
    } else if (!strcmp(type, "Split")) {
        p->kind = PT_SPLIT;
        p->invert = lmc_json_bool(j, "invert", false, &bad);
        st = parse_behavior(j, SPLIT_ISOLATED, &p->behavior);
        if (st == LMC_OK && !json_object_get(j, "behavior"))
            st = lmc_error(LMC_ERR_FORMAT, "Split pre-tokenizer: missing \"behavior\"");
        if (st == LMC_OK)
            st = tok_regex_from_json(&p->re, json_object_get(j, "pattern"), "Split pre-tokenizer");
    } else if (!strcmp(type, "Metaspace")) {
        p->kind = PT_METASPACE;
        st = load_metaspace(j, p);
    } else if (!strcmp(type, "Digits")) {
        p->kind = PT_DIGITS;
        p->individual_digits = lmc_json_bool(j, "individual_digits", false, &bad);
    } else if (!strcmp(type, "Punctuation")) {
        p->kind = PT_PUNCTUATION;
        st = parse_behavior(j, SPLIT_ISOLATED, &p->behavior);
    } else if (!strcmp(type, "Whitespace")) {
        p->kind = PT_WHITESPACE;
        st = tok_regex_compile(&p->re, WHITESPACE_RE, sizeof WHITESPACE_RE - 1, false);
    } else if (!strcmp(type, "WhitespaceSplit")) {
        p->kind = PT_WHITESPACE_SPLIT;
    } else if (!strcmp(type, "Sequence")) {
        p->kind = PT_SEQUENCE;
        const json_t *arr = json_object_get(j, "pretokenizers");
        if (!json_is_array(arr)) {
            st = lmc_error(LMC_ERR_FORMAT,
                           "Sequence pre-tokenizer: \"pretokenizers\" must be an array");
        } else if (json_array_size(arr)) {
            p->children = calloc(json_array_size(arr), sizeof *p->children);
            if (!p->children) st = lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
            for (size_t i = 0; st == LMC_OK && i < json_array_size(arr); i++) {
                st = load(json_array_get(arr, i), depth + 1, &p->children[i]);
                if (st == LMC_OK) p->n_children++;
            }
        }
    } else {
        st = lmc_error(LMC_ERR_UNSUPPORTED, "pre-tokenizer type \"%s\" is not supported", type);
    }
    if (st == LMC_OK && bad)
        st = lmc_error(LMC_ERR_FORMAT, "%s pre-tokenizer: bad field types", type);
    if (st != LMC_OK) {
        tok_pretok_free(p);
        return st;
    }
    *out = p;
    return LMC_OK;
}

lmc_status tok_pretok_load(const json_t *j, tok_pretok **out) {
    *out = NULL;
    if (!j || json_is_null(j)) return LMC_OK;
    return load(j, 0, out);
}

/* ---- splitting --------------------------------------------------------- */

typedef struct seg {
    size_t b, e;
    bool match;
} seg;

typedef struct segs {
    seg *v;
    size_t n, cap;
} segs;

static lmc_status seg_push(segs *s, size_t b, size_t e, bool match) {
    if (s->n == s->cap) {
        size_t c = s->cap ? s->cap * 2 : 64;
        seg *v = realloc(s->v, c * sizeof *v);
        if (!v) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
        s->v = v;
        s->cap = c;
    }
    s->v[s->n++] = (seg){b, e, match};
    return LMC_OK;
}

/* Pattern::find_matches for a regex: matches and the gaps between them. */
static lmc_status regex_segments(const tok_regex *re, pcre2_match_data *md, const char *s, size_t n,
                                 segs *out) {
    size_t prev = 0, ms, me;
    lmc_status st;
    for (;;) {
        int r = tok_regex_next(re, md, s, n, prev, &ms, &me);
        if (r < 0) return (lmc_status)-r;
        if (r == 0) break;
        if (ms > prev && (st = seg_push(out, prev, ms, false)) != LMC_OK) return st;
        if ((st = seg_push(out, ms, me, true)) != LMC_OK) return st;
        prev = me;
    }
    if (prev < n) return seg_push(out, prev, n, false);
    return LMC_OK;
}

typedef enum { CHARS_NUMERIC, CHARS_PUNCT, CHARS_WHITESPACE, CHARS_EQUAL } char_class;

/* Pattern::find_matches for Fn(char) -> bool: each matching character is
 * its own match, runs of others are one gap. */
static lmc_status char_segments(char_class k, int32_t want, const char *s, size_t n, segs *out) {
    size_t last = 0;
    lmc_status st;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t cl = lmc_utf8_decode(s + i, n - i, &cp);
        bool m = k == CHARS_NUMERIC      ? tok_is_numeric(cp)
                 : k == CHARS_PUNCT      ? tok_is_punctuation(cp)
                 : k == CHARS_WHITESPACE ? tok_is_whitespace(cp)
                                         : cp == want;
        if (m) {
            if (last < i && (st = seg_push(out, last, i, false)) != LMC_OK) return st;
            if ((st = seg_push(out, i, i + cl, true)) != LMC_OK) return st;
            last = i + cl;
        }
        i += cl;
    }
    if (last < n) return seg_push(out, last, n, false);
    return LMC_OK;
}

/* NormalizedString::split: applies the behaviour to the segments in place
 * (seg.match afterwards means "remove"). */
static void apply_behavior(split_behavior b, bool invert, segs *s) {
    if (invert)
        for (size_t i = 0; i < s->n; i++) s->v[i].match = !s->v[i].match;
    size_t o = 0;
    bool prev = false;
    switch (b) {
    case SPLIT_ISOLATED:
        for (size_t i = 0; i < s->n; i++) s->v[i].match = false;
        return;
    case SPLIT_REMOVED:
        return;
    case SPLIT_MERGED_WITH_PREVIOUS:
        for (size_t i = 0; i < s->n; i++) {
            seg x = s->v[i];
            if (x.match && !prev && o > 0)
                s->v[o - 1].e = x.e;
            else
                s->v[o++] = (seg){x.b, x.e, false};
            prev = x.match;
        }
        break;
    case SPLIT_MERGED_WITH_NEXT:
        /* Folded from the end, as HF does. */
        o = s->n;
        for (size_t i = s->n; i-- > 0;) {
            seg x = s->v[i];
            if (x.match && !prev && o < s->n)
                s->v[o].b = x.b;
            else
                s->v[--o] = (seg){x.b, x.e, false};
            prev = x.match;
        }
        memmove(s->v, s->v + o, (s->n - o) * sizeof *s->v);
        o = s->n - o;
        break;
    case SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < s->n; i++) {
            seg x = s->v[i];
            if (x.match == prev && o > 0)
                s->v[o - 1].e = x.e;
            else
                s->v[o++] = (seg){x.b, x.e, false};
            prev = x.match;
        }
        break;
    }
    s->n = o;
}

static lmc_status emit_segments(const segs *s, const char *text, bool at_start, tok_list *out) {
    lmc_status st;
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i].match || s->v[i].e == s->v[i].b) continue;
        if ((st = tok_list_push(out, text + s->v[i].b, s->v[i].e - s->v[i].b, -1,
                                at_start && s->v[i].b == 0)) != LMC_OK)
            return st;
    }
    return LMC_OK;
}

static lmc_status byte_level_push(const char *s, size_t n, bool at_start, tok_list *out) {
    lmc_status st = tok_list_push(out, "", 0, -1, at_start);
    if (st != LMC_OK) return st;
    if ((st = tok_buf_reserve(&out->text, n * 2 + 1)) != LMC_OK) return st;
    const tok_byte_char_t *byte_chars = tok_byte_chars();
    char *d = out->text.data + out->text.len;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)s[i];
        *d++ = byte_chars[b].s[0];
        if (byte_chars[b].n == 2) *d++ = byte_chars[b].s[1];
    }
    size_t len = (size_t)(d - (out->text.data + out->text.len));
    out->text.len += len;
    out->text.data[out->text.len] = 0;
    out->v[out->n - 1].len = len;
    return LMC_OK;
}

/* Splits one text piece into out. */
static lmc_status split_piece(const tok_pretok *p, const char *s, size_t n, bool at_start,
                              tok_list *out, segs *sg, tok_buf *tmp, pcre2_match_data *md) {
    lmc_status st = LMC_OK;
    sg->n = 0;
    switch (p->kind) {
    case PT_BYTE_LEVEL: {
        if (p->add_prefix_space && (n == 0 || s[0] != ' ')) {
            tok_buf_clear(tmp);
            if ((st = tok_buf_append(tmp, " ", 1)) != LMC_OK ||
                (st = tok_buf_append(tmp, s, n)) != LMC_OK)
                return st;
            s = tmp->data;
            n = tmp->len;
        }
        if (!p->use_regex) return n ? byte_level_push(s, n, at_start, out) : LMC_OK;
        if ((st = regex_segments(&p->re, md, s, n, sg)) != LMC_OK) return st;
        for (size_t i = 0; i < sg->n; i++)
            if (sg->v[i].e > sg->v[i].b &&
                (st = byte_level_push(s + sg->v[i].b, sg->v[i].e - sg->v[i].b,
                                      at_start && sg->v[i].b == 0, out)) != LMC_OK)
                return st;
        return LMC_OK;
    }
    case PT_SPLIT:
    case PT_WHITESPACE:
        if ((st = regex_segments(&p->re, md, s, n, sg)) != LMC_OK) return st;
        if (p->kind == PT_SPLIT)
            apply_behavior(p->behavior, p->invert, sg);
        else
            apply_behavior(SPLIT_REMOVED, true, sg);
        return emit_segments(sg, s, at_start, out);
    case PT_DIGITS:
        if ((st = char_segments(CHARS_NUMERIC, 0, s, n, sg)) != LMC_OK) return st;
        apply_behavior(p->individual_digits ? SPLIT_ISOLATED : SPLIT_CONTIGUOUS, false, sg);
        return emit_segments(sg, s, at_start, out);
    case PT_PUNCTUATION:
        if ((st = char_segments(CHARS_PUNCT, 0, s, n, sg)) != LMC_OK) return st;
        apply_behavior(p->behavior, false, sg);
        return emit_segments(sg, s, at_start, out);
    case PT_WHITESPACE_SPLIT:
        if ((st = char_segments(CHARS_WHITESPACE, 0, s, n, sg)) != LMC_OK) return st;
        apply_behavior(SPLIT_REMOVED, false, sg);
        return emit_segments(sg, s, at_start, out);
    case PT_METASPACE: {
        tok_buf_clear(tmp);
        if ((st = tok_buf_reserve(tmp, n + 8)) != LMC_OK) return st;
        bool starts = n >= p->rep_len && !memcmp(s, p->rep, p->rep_len);
        bool starts_space = n > 0 && s[0] == ' ';
        if ((p->prepend == PREPEND_ALWAYS || (p->prepend == PREPEND_FIRST && at_start)) &&
            !starts && !starts_space)
            st = tok_buf_append(tmp, p->rep, p->rep_len);
        for (size_t i = 0; st == LMC_OK && i < n; i++)
            st = s[i] == ' ' ? tok_buf_append(tmp, p->rep, p->rep_len)
                             : tok_buf_append(tmp, s + i, 1);
        if (st != LMC_OK) return st;
        if (!p->split)
            return tmp->len ? tok_list_push(out, tmp->data, tmp->len, -1, at_start) : LMC_OK;
        if ((st = char_segments(CHARS_EQUAL, p->rep_cp, tmp->data, tmp->len, sg)) != LMC_OK)
            return st;
        apply_behavior(SPLIT_MERGED_WITH_NEXT, false, sg);
        return emit_segments(sg, tmp->data, at_start, out);
    }
    case PT_SEQUENCE:
        break;
    }
    return lmc_error(LMC_ERR_INVALID_ARG, "pre-tokenizer: bad kind");
}

lmc_status tok_pretokenize(const tok_pretok *p, tok_list *pieces, tok_list *scratch,
                           pcre2_match_data *md) {
    if (!p) return LMC_OK;
    lmc_status st = LMC_OK;
    if (p->kind == PT_SEQUENCE) {
        for (size_t i = 0; st == LMC_OK && i < p->n_children; i++)
            st = tok_pretokenize(p->children[i], pieces, scratch, md);
        return st;
    }
    segs sg = {0};
    tok_buf tmp = {0};
    tok_list_clear(scratch);
    for (size_t i = 0; st == LMC_OK && i < pieces->n; i++) {
        const tok_span *sp = &pieces->v[i];
        if (sp->id >= 0)
            st = tok_list_push(scratch, "", 0, sp->id, sp->at_start);
        else
            st = split_piece(p, tok_list_str(pieces, i), sp->len, sp->at_start, scratch, &sg, &tmp,
                             md);
    }
    free(sg.v);
    tok_buf_free(&tmp);
    if (st == LMC_OK) tok_list_swap(pieces, scratch);
    return st;
}
