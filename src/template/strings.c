/* The Python str methods templates call (strip, split, replace, format,
 * join, case changes, is* tests), with Python semantics over UTF-8. */
#include "template/eval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---- string helpers ------------------------------------------------------------ */

/* Python's str.isspace() for a code point. */
static bool cp_space(int32_t c) {
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f) || c == 0x85 ||
           c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
           c == 0x202f || c == 0x205f || c == 0x3000;
}

static bool cp_in(int32_t cp, const tv_str *set) {
    for (size_t i = 0; i < set->len;) {
        int32_t c;
        i += lmc_utf8_decode(set->data + i, set->len - i, &c);
        if (c == cp) return true;
    }
    return false;
}

lmc_status tpl_str_strip(tpl_ctx *c, tv s, tv chars, bool left, bool right, tv *out) {
    const char *d = s.u.s->data;
    size_t b = 0, e = s.u.s->len;
    bool ws = chars.type == TV_NONE || chars.type == TV_UNDEFINED;
    if (!ws && chars.type != TV_STRING)
        return lmc_error(LMC_ERR_FORMAT, "strip arg must be None or str");
    while (left && b < e) {
        int32_t cp;
        size_t n = lmc_utf8_decode(d + b, e - b, &cp);
        if (!(ws ? cp_space(cp) : cp_in(cp, chars.u.s))) break;
        b += n;
    }
    while (right && e > b) {
        size_t k = e - 1;
        while (k > b && ((unsigned char)d[k] & 0xc0) == 0x80) k--;
        int32_t cp;
        lmc_utf8_decode(d + k, e - k, &cp);
        if (!(ws ? cp_space(cp) : cp_in(cp, chars.u.s))) break;
        e = k;
    }
    if (b == 0 && e == s.u.s->len) {
        *out = s;
        return LMC_OK;
    }
    return tpl_str(c, d + b, e - b, out);
}

static bool cp_cased(uint32_t cp) {
    utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)cp);
    return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL ||
           cat == UTF8PROC_CATEGORY_LT;
}

lmc_status tpl_str_case(tpl_ctx *c, tv s, int mode, tv *out) {
    tpl_buf b;
    tpl_buf_init(&b, c->arena, c->opts.max_output);
    lmc_status st = tpl_buf_append(&b, "", 0);
    bool prev_cased = false, first = true;
    for (size_t i = 0; i < s.u.s->len && st == LMC_OK;) {
        int32_t cp;
        i += lmc_utf8_decode(s.u.s->data + i, s.u.s->len - i, &cp);
        bool upper;
        if (mode == 0)
            upper = false;
        else if (mode == 1)
            upper = true;
        else if (mode == 2)
            upper = first;
        else
            upper = !prev_cased;
        prev_cased = cp_cased(cp);
        first = false;
        uint32_t r = (uint32_t)(upper ? utf8proc_toupper((utf8proc_int32_t)cp)
                                      : utf8proc_tolower((utf8proc_int32_t)cp));
        if (mode == 3 && upper) r = (uint32_t)utf8proc_totitle((utf8proc_int32_t)cp);
        char enc[4];
        st = tpl_buf_append(&b, enc, lmc_utf8_encode(r, enc));
    }
    if (st != LMC_OK) return st;
    return tpl_str(c, b.data, b.len, out);
}

static const char *find_sub(const char *h, size_t hl, const char *n, size_t nl) {
    if (nl == 0) return h;
    if (nl > hl) return NULL;
    for (size_t i = 0; i + nl <= hl; i++)
        if (h[i] == n[0] && !memcmp(h + i, n, nl)) return h + i;
    return NULL;
}

bool tpl_str_contains(tv hay, tv needle) {
    return find_sub(hay.u.s->data, hay.u.s->len, needle.u.s->data, needle.u.s->len) != NULL;
}

/* str.replace(old, new, count); an empty `old` inserts between characters. */
lmc_status tpl_str_replace(tpl_ctx *c, tv s, tv old, tv rep, int64_t count, tv *out) {
    tpl_buf b;
    tpl_buf_init(&b, c->arena, c->opts.max_output);
    lmc_status st = tpl_buf_append(&b, "", 0);
    const char *d = s.u.s->data;
    size_t len = s.u.s->len, i = 0;
    const tv_str *o = old.u.s, *r = rep.u.s;
    int64_t done = 0;
    if (o->len == 0) {
        for (;;) {
            if (count < 0 || done < count) {
                if ((st = tpl_buf_append(&b, r->data, r->len)) != LMC_OK) return st;
                done++;
            }
            if (i >= len) break;
            int32_t cp;
            size_t n = lmc_utf8_decode(d + i, len - i, &cp);
            if ((st = tpl_buf_append(&b, d + i, n)) != LMC_OK) return st;
            i += n;
        }
        return tpl_str(c, b.data, b.len, out);
    }
    while (st == LMC_OK && i <= len) {
        const char *hit =
            (count < 0 || done < count) ? find_sub(d + i, len - i, o->data, o->len) : NULL;
        if (!hit) {
            st = tpl_buf_append(&b, d + i, len - i);
            break;
        }
        size_t at = (size_t)(hit - d);
        st = tpl_buf_append(&b, d + i, at - i);
        if (st == LMC_OK) st = tpl_buf_append(&b, r->data, r->len);
        i = at + o->len;
        done++;
    }
    if (st != LMC_OK) return st;
    return tpl_str(c, b.data, b.len, out);
}

static lmc_status str_split(tpl_ctx *c, tv s, tv sep, int64_t maxsplit, tv *out) {
    if (!tv_make_list(c->arena, 0, false, out)) return tpl_nomem(c);
    const char *d = s.u.s->data;
    size_t len = s.u.s->len, i = 0;
    lmc_status st;
    tv part;
    if (sep.type == TV_NONE || sep.type == TV_UNDEFINED) {
        int64_t n = 0;
        for (;;) {
            while (i < len) {
                int32_t cp;
                size_t k = lmc_utf8_decode(d + i, len - i, &cp);
                if (!cp_space(cp)) break;
                i += k;
            }
            if (i >= len) break;
            size_t start = i;
            if (maxsplit >= 0 && n >= maxsplit) {
                size_t e = len;
                while (e > start && cp_space((unsigned char)d[e - 1])) e--;
                i = len;
                if ((st = tpl_str(c, d + start, e - start, &part)) != LMC_OK) return st;
            } else {
                while (i < len) {
                    int32_t cp;
                    size_t k = lmc_utf8_decode(d + i, len - i, &cp);
                    if (cp_space(cp)) break;
                    i += k;
                }
                if ((st = tpl_str(c, d + start, i - start, &part)) != LMC_OK) return st;
            }
            if (!tv_list_push(c->arena, out->u.l, part)) return tpl_nomem(c);
            n++;
        }
        return LMC_OK;
    }
    if (sep.type != TV_STRING)
        return lmc_error(LMC_ERR_FORMAT, "must be str or None, not %s", tv_type_name(sep));
    if (sep.u.s->len == 0) return lmc_error(LMC_ERR_FORMAT, "empty separator");
    int64_t n = 0;
    for (;;) {
        const char *hit = (maxsplit < 0 || n < maxsplit)
                              ? find_sub(d + i, len - i, sep.u.s->data, sep.u.s->len)
                              : NULL;
        size_t end = hit ? (size_t)(hit - d) : len;
        if ((st = tpl_str(c, d + i, end - i, &part)) != LMC_OK) return st;
        if (!tv_list_push(c->arena, out->u.l, part)) return tpl_nomem(c);
        if (!hit) break;
        i = end + sep.u.s->len;
        n++;
    }
    return LMC_OK;
}

static lmc_status str_affix(tv s, tv arg, bool prefix, bool *out) {
    *out = false;
    size_t n = arg.type == TV_LIST ? arg.u.l->len : 1;
    for (size_t k = 0; k < n && !*out; k++) {
        tv a = arg.type == TV_LIST ? arg.u.l->items[k] : arg;
        if (a.type != TV_STRING)
            return lmc_error(LMC_ERR_FORMAT, "%s arg must be str or a tuple of str, not %s",
                             prefix ? "startswith" : "endswith", tv_type_name(a));
        size_t l = a.u.s->len;
        if (l > s.u.s->len) continue;
        const char *at = prefix ? s.u.s->data : s.u.s->data + s.u.s->len - l;
        *out = !memcmp(at, a.u.s->data, l);
    }
    return LMC_OK;
}

/* str.format with {} / {0} / {name} fields and {{ }} escapes, no format specs. */
static lmc_status str_format(tpl_ctx *c, tv s, const tpl_args *a, tv *out) {
    tpl_buf b;
    tpl_buf_init(&b, c->arena, c->opts.max_output);
    lmc_status st = tpl_buf_append(&b, "", 0);
    const char *d = s.u.s->data;
    size_t len = s.u.s->len, auto_idx = 0;
    for (size_t i = 0; i < len && st == LMC_OK; i++) {
        if ((d[i] == '{' || d[i] == '}') && i + 1 < len && d[i + 1] == d[i]) {
            st = tpl_buf_putc(&b, d[i++]);
            continue;
        }
        if (d[i] == '}')
            return lmc_error(LMC_ERR_FORMAT, "Single '}' encountered in format string");
        if (d[i] != '{') {
            st = tpl_buf_putc(&b, d[i]);
            continue;
        }
        const char *end = memchr(d + i, '}', len - i);
        if (!end) return lmc_error(LMC_ERR_FORMAT, "Single '{' encountered in format string");
        size_t flen = (size_t)(end - (d + i + 1));
        const char *field = d + i + 1;
        if (memchr(field, ':', flen) || memchr(field, '!', flen) || memchr(field, '.', flen) ||
            memchr(field, '[', flen))
            return lmc_error(LMC_ERR_UNSUPPORTED,
                             "str.format specs and nested fields are not supported");
        tv v = tv_undefined(NULL);
        bool found = false;
        if (flen == 0 || (field[0] >= '0' && field[0] <= '9')) {
            size_t idx = flen == 0 ? auto_idx++ : (size_t)strtoul(field, NULL, 10);
            if (idx < a->npos) {
                v = a->pos[idx];
                found = true;
            }
        } else {
            for (size_t k = 0; k < a->nkw; k++)
                if (strlen(a->kw_names[k]) == flen && !memcmp(a->kw_names[k], field, flen)) {
                    v = a->kw[k];
                    found = true;
                }
        }
        if (!found)
            return lmc_error(LMC_ERR_FORMAT, "str.format: missing argument for '{%.*s}'", (int)flen,
                             field);
        st = tv_to_str(v, &b);
        i = (size_t)(end - d);
    }
    if (st != LMC_OK) return st;
    return tpl_str(c, b.data, b.len, out);
}

static lmc_status str_join(tpl_ctx *c, tv sep, tv items, tv *out) {
    tv seq;
    lmc_status st = tpl_iterate(c, items, &seq);
    if (st != LMC_OK) return st;
    tpl_buf b;
    tpl_buf_init(&b, c->arena, c->opts.max_output);
    if ((st = tpl_buf_append(&b, "", 0)) != LMC_OK) return st;
    for (size_t i = 0; i < seq.u.l->len; i++) {
        tv it = seq.u.l->items[i];
        if (it.type != TV_STRING)
            return lmc_error(LMC_ERR_FORMAT, "sequence item %zu: expected str instance, %s found",
                             i, tv_type_name(it));
        if (i && (st = tpl_buf_append(&b, sep.u.s->data, sep.u.s->len)) != LMC_OK) return st;
        if ((st = tpl_buf_append(&b, it.u.s->data, it.u.s->len)) != LMC_OK) return st;
    }
    return tpl_str(c, b.data, b.len, out);
}

/* ---- str methods ------------------------------------------------------------- */

lmc_status tpl_str_method(tpl_ctx *c, tv s, const char *name, const tpl_args *a, tv *out) {
    tv none = tv_none();
    lmc_status st;
    if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip"))
        return tpl_str_strip(c, s, tpl_arg(a, 0, "chars", none), name[0] != 'r', name[0] != 'l',
                             out);
    if (!strcmp(name, "upper")) return tpl_str_case(c, s, 1, out);
    if (!strcmp(name, "lower")) return tpl_str_case(c, s, 0, out);
    if (!strcmp(name, "capitalize")) return tpl_str_case(c, s, 2, out);
    if (!strcmp(name, "title")) return tpl_str_case(c, s, 3, out);
    if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
        bool r;
        if ((st = str_affix(s, tpl_arg(a, 0, NULL, none), name[0] == 's', &r)) != LMC_OK) return st;
        *out = tv_bool(r);
        return LMC_OK;
    }
    if (!strcmp(name, "split")) {
        tv ms = tpl_arg(a, 1, "maxsplit", tv_int(-1));
        return str_split(c, s, tpl_arg(a, 0, "sep", none), ms.type == TV_INT ? ms.u.i : -1, out);
    }
    if (!strcmp(name, "replace")) {
        tv o = tpl_arg(a, 0, NULL, none), r = tpl_arg(a, 1, NULL, none),
           n = tpl_arg(a, 2, "count", tv_int(-1));
        if ((st = tpl_need_str(o, "replace")) != LMC_OK ||
            (st = tpl_need_str(r, "replace")) != LMC_OK)
            return st;
        return tpl_str_replace(c, s, o, r, n.type == TV_INT ? n.u.i : -1, out);
    }
    if (!strcmp(name, "format")) return str_format(c, s, a, out);
    if (!strcmp(name, "join")) return str_join(c, s, tpl_arg(a, 0, NULL, none), out);
    if (!strcmp(name, "find") || !strcmp(name, "count")) {
        tv sub = tpl_arg(a, 0, NULL, none);
        if ((st = tpl_need_str(sub, name)) != LMC_OK) return st;
        const char *d = s.u.s->data;
        size_t len = s.u.s->len;
        if (name[0] == 'f') {
            const char *hit = find_sub(d, len, sub.u.s->data, sub.u.s->len);
            *out = tv_int(hit ? (int64_t)lmc_utf8_length(d, (size_t)(hit - d)) : -1);
            return LMC_OK;
        }
        int64_t n = 0;
        if (sub.u.s->len == 0)
            n = (int64_t)lmc_utf8_length(d, len) + 1;
        else
            for (const char *p = d;
                 (p = find_sub(p, len - (size_t)(p - d), sub.u.s->data, sub.u.s->len));
                 p += sub.u.s->len)
                n++;
        *out = tv_int(n);
        return LMC_OK;
    }
    if (!strcmp(name, "splitlines")) {
        if (!tv_make_list(c->arena, 0, false, out)) return tpl_nomem(c);
        const char *d = s.u.s->data;
        size_t len = s.u.s->len, start = 0;
        for (size_t i = 0; i < len; i++) {
            if (d[i] != '\n' && d[i] != '\r') continue;
            tv line;
            if ((st = tpl_str(c, d + start, i - start, &line)) != LMC_OK) return st;
            if (!tv_list_push(c->arena, out->u.l, line)) return tpl_nomem(c);
            if (d[i] == '\r' && i + 1 < len && d[i + 1] == '\n') i++;
            start = i + 1;
        }
        if (start < len) {
            tv line;
            if ((st = tpl_str(c, d + start, len - start, &line)) != LMC_OK) return st;
            if (!tv_list_push(c->arena, out->u.l, line)) return tpl_nomem(c);
        }
        return LMC_OK;
    }
    /* is* predicates: true when non-empty and every character qualifies. */
    bool r = s.u.s->len > 0, any_cased = false;
    for (size_t i = 0; i < s.u.s->len && r;) {
        int32_t cp;
        i += lmc_utf8_decode(s.u.s->data + i, s.u.s->len - i, &cp);
        utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)cp);
        bool alpha = cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
        bool digit = cat == UTF8PROC_CATEGORY_ND;
        if (!strcmp(name, "isdigit"))
            r = digit;
        else if (!strcmp(name, "isalpha"))
            r = alpha;
        else if (!strcmp(name, "isalnum"))
            r = alpha || digit;
        else if (!strcmp(name, "isspace"))
            r = cp_space(cp);
        else if (!strcmp(name, "islower")) {
            if (cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT) r = false;
            any_cased |= cat == UTF8PROC_CATEGORY_LL;
        } else if (!strcmp(name, "isupper")) {
            if (cat == UTF8PROC_CATEGORY_LL) r = false;
            any_cased |= cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT;
        }
    }
    if (!strcmp(name, "islower") || !strcmp(name, "isupper")) r = r && any_cased;
    *out = tv_bool(r);
    return LMC_OK;
}
