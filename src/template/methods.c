/* Attribute and item lookup, the Python methods templates call on str, dict
 * and list values, the `loop` object, and the global functions jinja2 and
 * transformers provide (range, namespace, dict, raise_exception,
 * strftime_now). Lookups follow jinja2's Environment.getattr/getitem: `.`
 * tries the attribute first, `[]` the item first, and a miss is Undefined. */
#include "template/eval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---- arguments ---------------------------------------------------------------- */

tv tpl_arg(const tpl_args *a, size_t i, const char *name, tv def) {
    if (i < a->npos) return a->pos[i];
    if (name)
        for (size_t k = 0; k < a->nkw; k++)
            if (!strcmp(a->kw_names[k], name)) return a->kw[k];
    return def;
}

bool tpl_has_arg(const tpl_args *a, size_t i, const char *name) {
    if (i < a->npos) return true;
    if (name)
        for (size_t k = 0; k < a->nkw; k++)
            if (!strcmp(a->kw_names[k], name)) return true;
    return false;
}

lmc_status tpl_check_args(const tpl_args *a, const char *fn, size_t max_pos,
                          const char *const *kw_allowed) {
    if (a->npos > max_pos)
        return lmc_error(LMC_ERR_FORMAT,
                         "%s() takes at most %zu positional argument(s) (%zu given)", fn, max_pos,
                         a->npos);
    for (size_t k = 0; k < a->nkw; k++) {
        bool ok = false;
        for (size_t j = 0; kw_allowed && kw_allowed[j] && !ok; j++)
            ok = !strcmp(kw_allowed[j], a->kw_names[k]);
        if (!ok)
            return lmc_error(LMC_ERR_FORMAT, "%s() got an unexpected keyword argument '%s'", fn,
                             a->kw_names[k]);
    }
    return LMC_OK;
}

static lmc_status need_str(tv v, const char *fn) {
    if (v.type == TV_STRING) return LMC_OK;
    if (v.type == TV_UNDEFINED) return tpl_undefined_error(v);
    return lmc_error(LMC_ERR_FORMAT, "%s() argument must be str, not %s", fn, tv_type_name(v));
}

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

/* ---- methods --------------------------------------------------------------------- */

static const char *const STR_METHODS[] = {
    "strip",   "lstrip",     "rstrip",  "startswith", "endswith", "split",      "upper", "lower",
    "title",   "capitalize", "replace", "format",     "join",     "find",       "count", "isdigit",
    "isalpha", "isalnum",    "isspace", "islower",    "isupper",  "splitlines", NULL};
static const char *const DICT_METHODS[] = {"items", "keys",    "values", "get",
                                           "copy",  "pop",     "update", "setdefault",
                                           "clear", "popitem", NULL};
static const char *const LIST_METHODS[] = {"append", "index",  "count",   "copy", "extend", "pop",
                                           "insert", "remove", "reverse", "sort", "clear",  NULL};

static bool in_names(const char *const *names, const char *name) {
    for (size_t i = 0; names[i]; i++)
        if (!strcmp(names[i], name)) return true;
    return false;
}

static lmc_status bind_method(tpl_ctx *c, tv self, const char *name, tv *out) {
    tv_method *m = tpl_alloc(c->arena, sizeof *m);
    if (!m) return tpl_nomem(c);
    m->self = self;
    m->name = name;
    out->type = TV_METHOD;
    out->u.m = m;
    return LMC_OK;
}

static lmc_status no_attr(tpl_ctx *c, tv obj, const char *name, tv *out) {
    size_t n = strlen(name) + 64;
    char *msg = tpl_alloc(c->arena, n);
    if (!msg) return tpl_nomem(c);
    snprintf(msg, n, "'%s object' has no attribute '%s'", tv_type_name(obj), name);
    *out = tv_undefined(msg);
    return LMC_OK;
}

static lmc_status loop_attr(tpl_ctx *c, tv obj, const char *name, tv *out) {
    const tpl_loop *l = obj.u.loop;
    int64_t i = (int64_t)l->index0, n = (int64_t)l->items->len;
    if (!strcmp(name, "index0"))
        *out = tv_int(i);
    else if (!strcmp(name, "index"))
        *out = tv_int(i + 1);
    else if (!strcmp(name, "revindex"))
        *out = tv_int(n - i);
    else if (!strcmp(name, "revindex0"))
        *out = tv_int(n - i - 1);
    else if (!strcmp(name, "first"))
        *out = tv_bool(i == 0);
    else if (!strcmp(name, "last"))
        *out = tv_bool(i == n - 1);
    else if (!strcmp(name, "length"))
        *out = tv_int(n);
    else if (!strcmp(name, "depth"))
        *out = tv_int(l->depth);
    else if (!strcmp(name, "depth0"))
        *out = tv_int(l->depth - 1);
    else if (!strcmp(name, "previtem"))
        *out = i > 0 ? l->items->items[i - 1] : tv_undefined("there is no previous item");
    else if (!strcmp(name, "nextitem"))
        *out = i + 1 < n ? l->items->items[i + 1] : tv_undefined("there is no next item");
    else if (!strcmp(name, "cycle"))
        return bind_method(c, obj, "cycle", out);
    else
        return no_attr(c, obj, name, out);
    return LMC_OK;
}

lmc_status tpl_getattr(tpl_ctx *c, tv obj, const char *name, tv *out) {
    switch (obj.type) {
    case TV_UNDEFINED:
        return tpl_undefined_error(obj);
    case TV_STRING:
        if (in_names(STR_METHODS, name)) return bind_method(c, obj, name, out);
        return no_attr(c, obj, name, out);
    case TV_LIST:
        if (!obj.u.l->is_tuple && in_names(LIST_METHODS, name))
            return bind_method(c, obj, name, out);
        if (obj.u.l->is_tuple && (!strcmp(name, "index") || !strcmp(name, "count")))
            return bind_method(c, obj, name, out);
        return no_attr(c, obj, name, out);
    case TV_DICT:
        if (in_names(DICT_METHODS, name)) return bind_method(c, obj, name, out);
        /* fall through */
    case TV_NAMESPACE: {
        tv *v = tv_dict_get_str(obj.u.d, name);
        if (v) {
            *out = *v;
            return LMC_OK;
        }
        return no_attr(c, obj, name, out);
    }
    case TV_LOOP:
        return loop_attr(c, obj, name, out);
    default:
        return no_attr(c, obj, name, out);
    }
}

lmc_status tpl_getitem(tpl_ctx *c, tv obj, tv key, tv *out) {
    switch (obj.type) {
    case TV_UNDEFINED:
        return tpl_undefined_error(obj);
    case TV_DICT:
    case TV_NAMESPACE: {
        tv *v = tv_dict_get(obj.u.d, key);
        if (v) {
            *out = *v;
            return LMC_OK;
        }
        break;
    }
    case TV_LIST:
    case TV_STRING:
        if (key.type == TV_INT || key.type == TV_BOOL) {
            int64_t i = key.type == TV_BOOL ? key.u.b : key.u.i;
            tv seq = obj;
            if (obj.type == TV_STRING) {
                lmc_status st = tpl_iterate(c, obj, &seq);
                if (st != LMC_OK) return st;
            }
            int64_t n = (int64_t)seq.u.l->len;
            if (i < 0) i += n;
            if (i >= 0 && i < n) {
                *out = seq.u.l->items[i];
                return LMC_OK;
            }
            *out = tv_undefined(obj.type == TV_STRING ? "string index out of range"
                                                      : "list index out of range");
            return LMC_OK;
        }
        break;
    default:
        break;
    }
    if (key.type == TV_STRING) return tpl_getattr(c, obj, key.u.s->data, out);
    *out = tv_undefined("no such item");
    return LMC_OK;
}

lmc_status tpl_attr_path(tpl_ctx *c, tv item, tv path, tv *out) {
    if (path.type != TV_STRING) return tpl_getitem(c, item, path, out);
    const char *p = path.u.s->data, *end = p + path.u.s->len;
    *out = item;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
        bool digits = n > 0;
        for (size_t k = 0; k < n; k++) digits = digits && p[k] >= '0' && p[k] <= '9';
        tv key;
        lmc_status st;
        if (digits)
            key = tv_int(strtoll(p, NULL, 10));
        else if ((st = tpl_str(c, p, n, &key)) != LMC_OK)
            return st;
        if ((st = tpl_getitem(c, *out, key, out)) != LMC_OK) return st;
        if (!dot) break;
        p = dot + 1;
    }
    return LMC_OK;
}

static lmc_status str_method(tpl_ctx *c, tv s, const char *name, const tpl_args *a, tv *out) {
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
        if ((st = need_str(o, "replace")) != LMC_OK || (st = need_str(r, "replace")) != LMC_OK)
            return st;
        return tpl_str_replace(c, s, o, r, n.type == TV_INT ? n.u.i : -1, out);
    }
    if (!strcmp(name, "format")) return str_format(c, s, a, out);
    if (!strcmp(name, "join")) return str_join(c, s, tpl_arg(a, 0, NULL, none), out);
    if (!strcmp(name, "find") || !strcmp(name, "count")) {
        tv sub = tpl_arg(a, 0, NULL, none);
        if ((st = need_str(sub, name)) != LMC_OK) return st;
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

static lmc_status dict_method(tpl_ctx *c, tv d, const char *name, const tpl_args *a, tv *out) {
    const tv_dict *dict = d.u.d;
    if (!strcmp(name, "get")) {
        tv key = tpl_arg(a, 0, NULL, tv_none());
        tv *v = tv_dict_get(dict, key);
        *out = v ? *v : tpl_arg(a, 1, NULL, tv_none());
        return LMC_OK;
    }
    int which = !strcmp(name, "items")    ? 0
                : !strcmp(name, "keys")   ? 1
                : !strcmp(name, "values") ? 2
                                          : -1;
    if (which < 0)
        return lmc_error(LMC_ERR_FORMAT, "access to attribute '%s' of 'dict' object is unsafe",
                         name);
    if (!tv_make_list(c->arena, dict->len, false, out)) return tpl_nomem(c);
    for (size_t i = 0; i < dict->len; i++) {
        tv item;
        if (which == 0) {
            if (!tv_make_list(c->arena, 2, true, &item)) return tpl_nomem(c);
            item.u.l->items[0] = dict->keys[i];
            item.u.l->items[1] = dict->vals[i];
            item.u.l->len = 2;
        } else {
            item = which == 1 ? dict->keys[i] : dict->vals[i];
        }
        out->u.l->items[out->u.l->len++] = item;
    }
    return LMC_OK;
}

/* list.append is a mutation jinja2's ImmutableSandboxedEnvironment refuses;
 * it is allowed here because templates written for other engines use
 * `{% set _ = xs.append(x) %}` (a deliberate divergence). */
static lmc_status list_method(tpl_ctx *c, tv l, const char *name, const tpl_args *a, tv *out) {
    tv x = tpl_arg(a, 0, NULL, tv_undefined(NULL));
    if (!strcmp(name, "append")) {
        if (a->npos != 1) return lmc_error(LMC_ERR_FORMAT, "append() takes exactly one argument");
        if (l.u.l->len >= c->opts.max_steps) return lmc_error(LMC_ERR_LIMIT, "list too long");
        if (!tv_list_push(c->arena, l.u.l, x)) return tpl_nomem(c);
        *out = tv_none();
        return LMC_OK;
    }
    if (!strcmp(name, "index") || !strcmp(name, "count")) {
        int64_t n = 0;
        for (size_t i = 0; i < l.u.l->len; i++) {
            if (!tv_equal(l.u.l->items[i], x)) continue;
            if (name[0] == 'i') {
                *out = tv_int((int64_t)i);
                return LMC_OK;
            }
            n++;
        }
        if (name[0] == 'i') return lmc_error(LMC_ERR_FORMAT, "value is not in list");
        *out = tv_int(n);
        return LMC_OK;
    }
    if (!strcmp(name, "copy")) {
        if (!tv_make_list(c->arena, l.u.l->len, false, out)) return tpl_nomem(c);
        if (l.u.l->len) memcpy(out->u.l->items, l.u.l->items, l.u.l->len * sizeof(tv));
        out->u.l->len = l.u.l->len;
        return LMC_OK;
    }
    return lmc_error(LMC_ERR_FORMAT, "access to attribute '%s' of 'list' object is unsafe", name);
}

lmc_status tpl_call(tpl_ctx *c, const node *at, tv fn, const tpl_args *a, tv *out) {
    switch (fn.type) {
    case TV_UNDEFINED:
        return tpl_undefined_error(fn);
    case TV_FUNC:
        return fn.u.fn->fn(c, tv_none(), a, out);
    case TV_MACRO: {
        tv caller = tpl_arg(a, SIZE_MAX, "caller", tv_none());
        return tpl_call_macro(c, at, fn.u.macro, a, caller, out);
    }
    case TV_METHOD: {
        tv self = fn.u.m->self;
        const char *name = fn.u.m->name;
        if (self.type == TV_STRING) return str_method(c, self, name, a, out);
        if (self.type == TV_DICT) return dict_method(c, self, name, a, out);
        if (self.type == TV_LIST) return list_method(c, self, name, a, out);
        if (self.type == TV_LOOP) { /* loop.cycle(a, b, ...) */
            if (a->npos == 0) return lmc_error(LMC_ERR_FORMAT, "no items for cycling given");
            *out = a->pos[self.u.loop->index0 % a->npos];
            return LMC_OK;
        }
        break;
    }
    default:
        break;
    }
    return lmc_error(LMC_ERR_FORMAT, "'%s' object is not callable", tv_type_name(fn));
}

/* ---- globals -------------------------------------------------------------------- */

static lmc_status g_range(tpl_ctx *c, tv self, const tpl_args *a, tv *out) {
    (void)self;
    if (a->nkw) return lmc_error(LMC_ERR_FORMAT, "range() takes no keyword arguments");
    if (a->npos < 1 || a->npos > 3)
        return lmc_error(LMC_ERR_FORMAT, "range expected 1 to 3 arguments, got %zu", a->npos);
    int64_t v[3] = {0, 0, 1};
    for (size_t i = 0; i < a->npos; i++) {
        if (a->pos[i].type != TV_INT && a->pos[i].type != TV_BOOL)
            return lmc_error(LMC_ERR_FORMAT, "'%s' object cannot be interpreted as an integer",
                             tv_type_name(a->pos[i]));
        v[a->npos == 1 ? 1 : i] = a->pos[i].type == TV_BOOL ? a->pos[i].u.b : a->pos[i].u.i;
    }
    if (v[2] == 0) return lmc_error(LMC_ERR_FORMAT, "range() arg 3 must not be zero");
    double count = ((double)v[1] - (double)v[0]) / (double)v[2];
    /* jinja2's sandbox caps range() at MAX_RANGE = 100000 items. */
    if (count > 100000)
        return lmc_error(
            LMC_ERR_LIMIT,
            "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    if (!tv_make_list(c->arena, count > 0 ? (size_t)count + 1 : 0, false, out)) return tpl_nomem(c);
    for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2])
        out->u.l->items[out->u.l->len++] = tv_int(i);
    return LMC_OK;
}

static lmc_status kwargs_dict(tpl_ctx *c, const tpl_args *a, tv_type type, tv *out) {
    if (!tv_make_dict(c->arena, a->nkw, type, out)) return tpl_nomem(c);
    if (a->npos == 1 && a->pos[0].type == TV_DICT) {
        const tv_dict *src = a->pos[0].u.d;
        for (size_t i = 0; i < src->len; i++)
            if (!tv_dict_set(c->arena, out->u.d, src->keys[i], src->vals[i])) return tpl_nomem(c);
    } else if (a->npos) {
        return lmc_error(LMC_ERR_FORMAT, "expected a mapping and keyword arguments");
    }
    for (size_t k = 0; k < a->nkw; k++) {
        tv key;
        lmc_status st = tpl_str(c, a->kw_names[k], strlen(a->kw_names[k]), &key);
        if (st != LMC_OK) return st;
        if (!tv_dict_set(c->arena, out->u.d, key, a->kw[k])) return tpl_nomem(c);
    }
    return LMC_OK;
}

static lmc_status g_namespace(tpl_ctx *c, tv self, const tpl_args *a, tv *out) {
    (void)self;
    return kwargs_dict(c, a, TV_NAMESPACE, out);
}

static lmc_status g_dict(tpl_ctx *c, tv self, const tpl_args *a, tv *out) {
    (void)self;
    return kwargs_dict(c, a, TV_DICT, out);
}

/* transformers: raise jinja2.exceptions.TemplateError(message). */
static lmc_status g_raise(tpl_ctx *c, tv self, const tpl_args *a, tv *out) {
    (void)self;
    (void)out;
    tv msg;
    lmc_status st = tpl_to_string(c, tpl_arg(a, 0, "message", tv_undefined(NULL)), &msg);
    if (st != LMC_OK) return st;
    return lmc_error(LMC_ERR_FORMAT, "%s", msg.u.s->data);
}

/* transformers: datetime.now().strftime(format) (local time). */
static lmc_status g_strftime(tpl_ctx *c, tv self, const tpl_args *a, tv *out) {
    (void)self;
    tv fmt = tpl_arg(a, 0, "format", tv_undefined(NULL));
    lmc_status st = need_str(fmt, "strftime_now");
    if (st != LMC_OK) return st;
    time_t now = c->opts.fixed_time ? c->opts.now : time(NULL);
    struct tm tm;
    if (c->opts.fixed_time)
        gmtime_r(&now, &tm);
    else
        localtime_r(&now, &tm);
    if (fmt.u.s->len == 0) return tpl_str(c, "", 0, out);
    for (size_t cap = 256; cap <= 65536; cap *= 4) {
        char *buf = tpl_alloc(c->arena, cap);
        if (!buf) return tpl_nomem(c);
        size_t n = strftime(buf, cap, fmt.u.s->data, &tm);
        if (n > 0) return tpl_str(c, buf, n, out);
    }
    return lmc_error(LMC_ERR_FORMAT, "strftime_now: format produced no output");
}

static const struct tpl_builtin GLOBALS[] = {
    {"range", g_range},           {"namespace", g_namespace},   {"dict", g_dict},
    {"raise_exception", g_raise}, {"strftime_now", g_strftime},
};

bool tpl_lookup_global(const char *name, tv *out) {
    for (size_t i = 0; i < sizeof GLOBALS / sizeof GLOBALS[0]; i++)
        if (!strcmp(GLOBALS[i].name, name)) {
            out->type = TV_FUNC;
            out->u.fn = &GLOBALS[i];
            return true;
        }
    return false;
}
