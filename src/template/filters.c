/* Filters: jinja2's builtin filters (jinja2/filters.py, 3.1) that chat
 * templates use, plus transformers' tojson override
 * (json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
 * sort_keys=sort_keys)). */
#include "template/eval.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

typedef lmc_status (*filter_fn)(tpl_ctx *c, tv in, const tpl_args *a, tv *out);

static lmc_status need_string(tpl_ctx *c, tv in, tv *out) {
    return tpl_to_string(c, in, out);
}

static int64_t int_or(tv v, int64_t def) {
    if (v.type == TV_INT) return v.u.i;
    if (v.type == TV_BOOL) return v.u.b;
    return def;
}

static lmc_status f_trim(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    lmc_status st = need_string(c, in, &in);
    if (st != LMC_OK) return st;
    return tpl_str_strip(c, in, tpl_arg(a, 0, "chars", tv_none()), true, true, out);
}

static lmc_status f_tojson(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    static const char *const kws[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    lmc_status st = tpl_check_args(a, "tojson", 4, kws);
    if (st != LMC_OK) return st;
    tv_json_opts o = {0};
    o.ensure_ascii = tv_truthy(tpl_arg(a, 0, "ensure_ascii", tv_bool(false)));
    tv indent = tpl_arg(a, 1, "indent", tv_none());
    char spaces[65];
    if (indent.type == TV_INT) {
        int64_t n = indent.u.i < 0 ? 0 : indent.u.i > 64 ? 64 : indent.u.i;
        memset(spaces, ' ', (size_t)n);
        spaces[n] = '\0';
        o.indent = spaces;
    } else if (indent.type == TV_STRING) {
        o.indent = indent.u.s->data;
    } else if (indent.type != TV_NONE) {
        return lmc_error(LMC_ERR_FORMAT, "tojson: indent must be an int or a string");
    }
    tv seps = tpl_arg(a, 2, "separators", tv_none());
    if (seps.type == TV_LIST && seps.u.l->len == 2 && seps.u.l->items[0].type == TV_STRING &&
        seps.u.l->items[1].type == TV_STRING) {
        o.item_sep = seps.u.l->items[0].u.s->data;
        o.key_sep = seps.u.l->items[1].u.s->data;
    } else if (seps.type != TV_NONE) {
        return lmc_error(LMC_ERR_FORMAT, "tojson: separators must be a pair of strings");
    }
    o.sort_keys = tv_truthy(tpl_arg(a, 3, "sort_keys", tv_bool(false)));
    tpl_buf b;
    tpl_buf_init(&b, c->arena, c->opts.max_output);
    if ((st = tpl_buf_append(&b, "", 0)) != LMC_OK) return st;
    if (in.type == TV_UNDEFINED)
        return lmc_error(LMC_ERR_FORMAT, "Object of type Undefined is not JSON serializable");
    if ((st = tv_to_json(in, &o, &b)) != LMC_OK) return st;
    return tpl_str(c, b.data, b.len, out);
}

static lmc_status f_length(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    (void)c;
    (void)a;
    switch (in.type) {
    case TV_UNDEFINED:
        *out = tv_int(0);
        return LMC_OK;
    case TV_STRING:
        *out = tv_int((int64_t)lmc_utf8_length(in.u.s->data, in.u.s->len));
        return LMC_OK;
    case TV_LIST:
        *out = tv_int((int64_t)in.u.l->len);
        return LMC_OK;
    case TV_DICT:
    case TV_NAMESPACE:
        *out = tv_int((int64_t)in.u.d->len);
        return LMC_OK;
    default:
        return lmc_error(LMC_ERR_FORMAT, "object of type '%s' has no len()", tv_type_name(in));
    }
}

static lmc_status f_first_last(tpl_ctx *c, tv in, bool last, tv *out) {
    tv seq;
    lmc_status st = tpl_iterate(c, in, &seq);
    if (st != LMC_OK) return st;
    if (seq.u.l->len == 0)
        *out = tv_undefined(last ? "No last item, sequence was empty."
                                 : "No first item, sequence was empty.");
    else
        *out = seq.u.l->items[last ? seq.u.l->len - 1 : 0];
    return LMC_OK;
}
static lmc_status f_first(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    (void)a;
    return f_first_last(c, in, false, out);
}
static lmc_status f_last(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    (void)a;
    return f_first_last(c, in, true, out);
}

static lmc_status f_case(tpl_ctx *c, tv in, int mode, tv *out) {
    lmc_status st = need_string(c, in, &in);
    if (st != LMC_OK) return st;
    return tpl_str_case(c, in, mode, out);
}
static lmc_status f_lower(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    (void)a;
    return f_case(c, in, 0, out);
}
static lmc_status f_upper(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    (void)a;
    return f_case(c, in, 1, out);
}
static lmc_status f_capitalize(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    (void)a;
    return f_case(c, in, 2, out);
}

/* jinja2 do_title: words start after runs of whitespace, '-', '(', '{',
 * '[' or '<'; the first character is uppercased and the rest lowercased. */
static lmc_status f_title(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    (void)a;
    lmc_status st = need_string(c, in, &in);
    if (st != LMC_OK) return st;
    tpl_buf b;
    tpl_buf_init(&b, c->arena, c->opts.max_output);
    if ((st = tpl_buf_append(&b, "", 0)) != LMC_OK) return st;
    bool start = true;
    for (size_t i = 0; i < in.u.s->len && st == LMC_OK;) {
        int32_t cp;
        i += lmc_utf8_decode(in.u.s->data + i, in.u.s->len - i, &cp);
        bool sep = cp == ' ' || (cp >= '\t' && cp <= '\r') || cp == '-' || cp == '(' || cp == '{' ||
                   cp == '[' || cp == '<' || (cp >= 0x1c && cp <= 0x1f);
        uint32_t r = cp;
        if (!sep)
            r = (uint32_t)(start ? utf8proc_toupper((utf8proc_int32_t)cp)
                                 : utf8proc_tolower((utf8proc_int32_t)cp));
        start = sep;
        char enc[4];
        st = tpl_buf_append(&b, enc, lmc_utf8_encode(r, enc));
    }
    if (st != LMC_OK) return st;
    return tpl_str(c, b.data, b.len, out);
}

static lmc_status f_replace(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    lmc_status st = need_string(c, in, &in);
    tv o, r;
    if (st == LMC_OK) st = tpl_to_string(c, tpl_arg(a, 0, "old", tv_undefined(NULL)), &o);
    if (st == LMC_OK) st = tpl_to_string(c, tpl_arg(a, 1, "new", tv_undefined(NULL)), &r);
    if (st != LMC_OK) return st;
    tv n = tpl_arg(a, 2, "count", tv_none());
    return tpl_str_replace(c, in, o, r, n.type == TV_INT ? n.u.i : -1, out);
}

static lmc_status f_join(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    tv seq, sep;
    lmc_status st = tpl_iterate(c, in, &seq);
    if (st == LMC_OK) st = tpl_to_string(c, tpl_arg(a, 0, "d", tv_undefined(NULL)), &sep);
    if (st != LMC_OK) return st;
    tv attr = tpl_arg(a, 1, "attribute", tv_none());
    tpl_buf b;
    tpl_buf_init(&b, c->arena, c->opts.max_output);
    if ((st = tpl_buf_append(&b, "", 0)) != LMC_OK) return st;
    for (size_t i = 0; i < seq.u.l->len; i++) {
        tv it = seq.u.l->items[i];
        if (attr.type != TV_NONE && (st = tpl_attr_path(c, it, attr, &it)) != LMC_OK) return st;
        if (i && (st = tpl_buf_append(&b, sep.u.s->data, sep.u.s->len)) != LMC_OK) return st;
        if ((st = tv_to_str(it, &b)) != LMC_OK) return st;
    }
    return tpl_str(c, b.data, b.len, out);
}

static lmc_status f_default(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    (void)c;
    tv def = tpl_arg(a, 0, "default_value", tv_undefined(NULL));
    if (def.type == TV_UNDEFINED && !tpl_has_arg(a, 0, "default_value")) {
        if (!tv_make_str(c->arena, "", 0, &def)) return tpl_nomem(c);
    }
    bool boolean = tv_truthy(tpl_arg(a, 1, "boolean", tv_bool(false)));
    *out = (in.type == TV_UNDEFINED || (boolean && !tv_truthy(in))) ? def : in;
    return LMC_OK;
}

static lmc_status f_items(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    (void)a;
    if (in.type == TV_UNDEFINED) {
        if (!tv_make_list(c->arena, 0, false, out)) return tpl_nomem(c);
        return LMC_OK;
    }
    if (in.type != TV_DICT && in.type != TV_NAMESPACE)
        return lmc_error(LMC_ERR_FORMAT, "Can only get item pairs from a mapping.");
    if (!tv_make_list(c->arena, in.u.d->len, false, out)) return tpl_nomem(c);
    for (size_t i = 0; i < in.u.d->len; i++) {
        tv pair;
        if (!tv_make_list(c->arena, 2, true, &pair)) return tpl_nomem(c);
        pair.u.l->items[0] = in.u.d->keys[i];
        pair.u.l->items[1] = in.u.d->vals[i];
        pair.u.l->len = 2;
        out->u.l->items[out->u.l->len++] = pair;
    }
    return LMC_OK;
}

static lmc_status copy_list(tpl_ctx *c, tv in, tv *out) {
    tv seq;
    lmc_status st = tpl_iterate(c, in, &seq);
    if (st != LMC_OK) return st;
    if (!tv_make_list(c->arena, seq.u.l->len, false, out)) return tpl_nomem(c);
    if (seq.u.l->len) memcpy(out->u.l->items, seq.u.l->items, seq.u.l->len * sizeof(tv));
    out->u.l->len = seq.u.l->len;
    return LMC_OK;
}

static lmc_status f_list(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    (void)a;
    return copy_list(c, in, out);
}
static lmc_status f_string(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    (void)a;
    return tpl_to_string(c, in, out);
}
static lmc_status f_safe(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    (void)c;
    (void)a;
    *out = in;
    return LMC_OK;
}

/* jinja2 do_int: int(value), else int(float(value)) for strings, else default. */
static lmc_status f_int(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    (void)c;
    tv def = tpl_arg(a, 0, "default", tv_int(0));
    int64_t base = int_or(tpl_arg(a, 1, "base", tv_int(10)), 10);
    switch (in.type) {
    case TV_INT:
        *out = in;
        return LMC_OK;
    case TV_BOOL:
        *out = tv_int(in.u.b);
        return LMC_OK;
    case TV_FLOAT:
        if (!isfinite(in.u.f) || fabs(in.u.f) >= 9.2e18) break;
        *out = tv_int((int64_t)in.u.f);
        return LMC_OK;
    case TV_STRING: {
        char buf[128];
        size_t n = 0;
        for (size_t i = 0; i < in.u.s->len && n < sizeof buf - 1; i++)
            if (in.u.s->data[i] != '_') buf[n++] = in.u.s->data[i];
        buf[n] = '\0';
        char *end;
        errno = 0;
        long long v = strtoll(buf, &end, (int)base);
        while (*end == ' ' || (*end >= '\t' && *end <= '\r')) end++;
        if (end != buf && !*end && !errno) {
            *out = tv_int(v);
            return LMC_OK;
        }
        double d = strtod(buf, &end);
        while (*end == ' ' || (*end >= '\t' && *end <= '\r')) end++;
        if (end != buf && !*end && isfinite(d) && fabs(d) < 9.2e18) {
            *out = tv_int((int64_t)d);
            return LMC_OK;
        }
        break;
    }
    default:
        break;
    }
    *out = def;
    return LMC_OK;
}

static lmc_status f_float(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    (void)c;
    tv def = tpl_arg(a, 0, "default", tv_float(0.0));
    if (tv_is_number(in)) {
        *out = tv_float(tv_as_double(in));
        return LMC_OK;
    }
    if (in.type == TV_STRING) {
        char *end;
        double d = strtod(in.u.s->data, &end);
        while (*end == ' ' || (*end >= '\t' && *end <= '\r')) end++;
        if (end != in.u.s->data && !*end) {
            *out = tv_float(d);
            return LMC_OK;
        }
    }
    *out = def;
    return LMC_OK;
}

static lmc_status f_abs(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    (void)c;
    (void)a;
    if (in.type == TV_FLOAT)
        *out = tv_float(fabs(in.u.f));
    else if (in.type == TV_INT || in.type == TV_BOOL) {
        int64_t v = int_or(in, 0);
        if (v == INT64_MIN) return lmc_error(LMC_ERR_UNSUPPORTED, "integer overflow");
        *out = tv_int(v < 0 ? -v : v);
    } else
        return lmc_error(LMC_ERR_FORMAT, "bad operand type for abs(): '%s'", tv_type_name(in));
    return LMC_OK;
}

/* jinja2 do_round: 'common' is Python's round() (correctly rounded, half to
 * even on exact ties), always a float. */
static lmc_status f_round(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    (void)c;
    if (!tv_is_number(in)) return lmc_error(LMC_ERR_FORMAT, "round: value must be a number");
    int64_t prec = int_or(tpl_arg(a, 0, "precision", tv_int(0)), 0);
    tv method = tpl_arg(a, 1, "method", tv_none());
    double x = tv_as_double(in), p = pow(10.0, (double)prec);
    if (tv_is_str(method, "ceil"))
        *out = tv_float(ceil(x * p) / p);
    else if (tv_is_str(method, "floor"))
        *out = tv_float(floor(x * p) / p);
    else if (method.type == TV_NONE || tv_is_str(method, "common")) {
        if (prec < 0 || prec > 300) {
            *out = tv_float(round(x * p) / p);
        } else {
            char buf[400];
            snprintf(buf, sizeof buf, "%.*f", (int)prec, x);
            *out = tv_float(strtod(buf, NULL));
        }
    } else
        return lmc_error(LMC_ERR_FORMAT, "method must be common, ceil or floor");
    return LMC_OK;
}

/* jinja2 do_indent(s, width=4, first=False, blank=False). */
static lmc_status f_indent(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    lmc_status st = need_string(c, in, &in);
    if (st != LMC_OK) return st;
    tv width = tpl_arg(a, 0, "width", tv_int(4));
    bool first = tv_truthy(tpl_arg(a, 1, "first", tv_bool(false)));
    bool blank = tv_truthy(tpl_arg(a, 2, "blank", tv_bool(false)));
    char pad_buf[257];
    const char *pad = pad_buf;
    size_t pad_len;
    if (width.type == TV_STRING) {
        pad = width.u.s->data;
        pad_len = width.u.s->len;
    } else {
        int64_t w = int_or(width, 4);
        pad_len = w < 0 ? 0 : w > 256 ? 256 : (size_t)w;
        memset(pad_buf, ' ', pad_len);
    }
    tpl_buf b;
    tpl_buf_init(&b, c->arena, c->opts.max_output);
    if ((st = tpl_buf_append(&b, "", 0)) != LMC_OK) return st;
    if (first && (st = tpl_buf_append(&b, pad, pad_len)) != LMC_OK) return st;
    /* splitlines() of s + "\n", joined with "\n" + indent (blank lines only when blank). */
    const char *d = in.u.s->data;
    size_t len = in.u.s->len, start = 0;
    bool first_line = true;
    for (size_t i = 0; i <= len; i++) {
        size_t nl = 0;
        if (i < len) {
            unsigned char ch = (unsigned char)d[i];
            if (ch == '\r')
                nl = (i + 1 < len && d[i + 1] == '\n') ? 2 : 1;
            else if (ch == '\n' || ch == '\v' || ch == '\f' || (ch >= 0x1c && ch <= 0x1e))
                nl = 1;
            else if (ch == 0xc2 && i + 1 < len && (unsigned char)d[i + 1] == 0x85)
                nl = 2;
            else if (ch == 0xe2 && i + 2 < len && (unsigned char)d[i + 1] == 0x80 &&
                     ((unsigned char)d[i + 2] == 0xa8 || (unsigned char)d[i + 2] == 0xa9))
                nl = 3;
            if (!nl) continue;
        } /* at i == len the appended "\n" ends the last line */
        size_t line_len = i - start;
        if (!first_line) {
            if ((st = tpl_buf_putc(&b, '\n')) != LMC_OK) return st;
            if ((blank || line_len) && (st = tpl_buf_append(&b, pad, pad_len)) != LMC_OK) return st;
        }
        if ((st = tpl_buf_append(&b, d + start, line_len)) != LMC_OK) return st;
        first_line = false;
        if (i == len) break;
        i += nl - 1;
        start = i + 1;
    }
    return tpl_str(c, b.data, b.len, out);
}

static lmc_status f_wordcount(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    (void)a;
    lmc_status st = need_string(c, in, &in);
    if (st != LMC_OK) return st;
    int64_t n = 0;
    bool in_word = false;
    for (size_t i = 0; i < in.u.s->len;) {
        int32_t cp;
        i += lmc_utf8_decode(in.u.s->data + i, in.u.s->len - i, &cp);
        utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)cp);
        bool w = cp == '_' || (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
                 (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
        if (w && !in_word) n++;
        in_word = w;
    }
    *out = tv_int(n);
    return LMC_OK;
}

static lmc_status f_reverse(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    (void)a;
    tv l;
    lmc_status st = copy_list(c, in, &l);
    if (st != LMC_OK) return st;
    for (size_t i = 0, j = l.u.l->len; i + 1 < j; i++, j--) {
        tv t = l.u.l->items[i];
        l.u.l->items[i] = l.u.l->items[j - 1];
        l.u.l->items[j - 1] = t;
    }
    if (in.type != TV_STRING) {
        *out = l;
        return LMC_OK;
    }
    tpl_buf b;
    tpl_buf_init(&b, c->arena, 0);
    if ((st = tpl_buf_append(&b, "", 0)) != LMC_OK) return st;
    for (size_t i = 0; i < l.u.l->len; i++)
        if ((st = tpl_buf_append(&b, l.u.l->items[i].u.s->data, l.u.l->items[i].u.s->len)) !=
            LMC_OK)
            return st;
    return tpl_str(c, b.data, b.len, out);
}

/* Key of an item for sort/unique: the attribute, lowercased when it is a
 * string and the comparison is case-insensitive (jinja2's ignore_case). */
static lmc_status sort_key(tpl_ctx *c, tv item, tv attr, bool case_sensitive, tv *key) {
    lmc_status st = LMC_OK;
    *key = item;
    if (attr.type != TV_NONE && (st = tpl_attr_path(c, item, attr, key)) != LMC_OK) return st;
    if (!case_sensitive && key->type == TV_STRING) st = tpl_str_case(c, *key, 0, key);
    return st;
}

static lmc_status f_sort(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    tv l;
    lmc_status st = copy_list(c, in, &l);
    if (st != LMC_OK) return st;
    bool reverse = tv_truthy(tpl_arg(a, 0, "reverse", tv_bool(false)));
    bool cs = tv_truthy(tpl_arg(a, 1, "case_sensitive", tv_bool(false)));
    tv attr = tpl_arg(a, 2, "attribute", tv_none());
    size_t n = l.u.l->len;
    tv *keys = tpl_alloc(c->arena, (n + 1) * sizeof(tv));
    if (!keys) return tpl_nomem(c);
    for (size_t i = 0; i < n; i++)
        if ((st = sort_key(c, l.u.l->items[i], attr, cs, &keys[i])) != LMC_OK) return st;
    /* Stable insertion sort (lists in templates are short); Python's sort
     * is stable too, also with reverse=True. */
    tv *items = l.u.l->items;
    for (size_t i = 1; i < n; i++) {
        tv k = keys[i], it = items[i];
        size_t j = i;
        while (j > 0) {
            int cmp;
            if ((st = tv_compare(keys[j - 1], k, &cmp)) != LMC_OK) return st;
            if (!(reverse ? cmp < 0 : cmp > 0)) break;
            keys[j] = keys[j - 1];
            items[j] = items[j - 1];
            j--;
        }
        keys[j] = k;
        items[j] = it;
    }
    *out = l;
    return LMC_OK;
}

static lmc_status f_unique(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    tv seq;
    lmc_status st = tpl_iterate(c, in, &seq);
    if (st != LMC_OK) return st;
    bool cs = tv_truthy(tpl_arg(a, 0, "case_sensitive", tv_bool(false)));
    tv attr = tpl_arg(a, 1, "attribute", tv_none());
    tv seen;
    if (!tv_make_list(c->arena, seq.u.l->len, false, &seen) ||
        !tv_make_list(c->arena, seq.u.l->len, false, out))
        return tpl_nomem(c);
    for (size_t i = 0; i < seq.u.l->len; i++) {
        tv key;
        if ((st = sort_key(c, seq.u.l->items[i], attr, cs, &key)) != LMC_OK) return st;
        bool dup = false;
        for (size_t k = 0; k < seen.u.l->len && !dup; k++) dup = tv_equal(seen.u.l->items[k], key);
        if (dup) continue;
        seen.u.l->items[seen.u.l->len++] = key;
        out->u.l->items[out->u.l->len++] = seq.u.l->items[i];
    }
    return LMC_OK;
}

/* select/reject/selectattr/rejectattr: keep items whose (attribute's) test
 * result is `want`; without a test name the value's truthiness decides. */
static lmc_status select_items(tpl_ctx *c, tv in, const tpl_args *a, bool by_attr, bool want,
                               tv *out) {
    tv seq;
    lmc_status st = tpl_iterate(c, in, &seq);
    if (st != LMC_OK) return st;
    size_t first = by_attr ? 1 : 0;
    tv attr = by_attr ? tpl_arg(a, 0, NULL, tv_none()) : tv_none();
    tv test = a->npos > first ? a->pos[first] : tv_none();
    if (test.type != TV_NONE && test.type != TV_STRING)
        return lmc_error(LMC_ERR_FORMAT, "test name must be a string");
    tpl_args targs = {.pos = a->pos + (a->npos > first + 1 ? first + 1 : a->npos),
                      .npos = a->npos > first + 1 ? a->npos - first - 1 : 0,
                      .kw_names = a->kw_names,
                      .kw = a->kw,
                      .nkw = a->nkw};
    if (!tv_make_list(c->arena, seq.u.l->len, false, out)) return tpl_nomem(c);
    for (size_t i = 0; i < seq.u.l->len; i++) {
        tv it = seq.u.l->items[i], v = it;
        if ((st = tpl_step(c, NULL)) != LMC_OK) return st;
        if (by_attr && (st = tpl_attr_path(c, it, attr, &v)) != LMC_OK) return st;
        bool r;
        if (test.type == TV_NONE) {
            r = tv_truthy(v);
        } else {
            bool found = true;
            if ((st = tpl_test(c, test.u.s->data, v, &targs, &r, &found)) != LMC_OK) return st;
            if (!found) return lmc_error(LMC_ERR_FORMAT, "no test named '%s'", test.u.s->data);
        }
        if (r == want) out->u.l->items[out->u.l->len++] = it;
    }
    return LMC_OK;
}
static lmc_status f_select(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    return select_items(c, in, a, false, true, out);
}
static lmc_status f_reject(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    return select_items(c, in, a, false, false, out);
}
static lmc_status f_selectattr(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    return select_items(c, in, a, true, true, out);
}
static lmc_status f_rejectattr(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    return select_items(c, in, a, true, false, out);
}

/* map(attribute='x', default=d) or map('filter', args...). */
static lmc_status f_map(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    tv seq;
    lmc_status st = tpl_iterate(c, in, &seq);
    if (st != LMC_OK) return st;
    bool by_attr = a->npos == 0 && tpl_has_arg(a, SIZE_MAX, "attribute");
    tv attr = tpl_arg(a, SIZE_MAX, "attribute", tv_none());
    tv def = tpl_arg(a, SIZE_MAX, "default", tv_undefined(NULL));
    bool has_def = tpl_has_arg(a, SIZE_MAX, "default");
    if (!by_attr && (a->npos == 0 || a->pos[0].type != TV_STRING))
        return lmc_error(LMC_ERR_FORMAT, "map requires a filter name or attribute=");
    tpl_args fargs = {.pos = a->pos + (a->npos ? 1 : 0),
                      .npos = a->npos ? a->npos - 1 : 0,
                      .kw_names = a->kw_names,
                      .kw = a->kw,
                      .nkw = a->nkw};
    if (!tv_make_list(c->arena, seq.u.l->len, false, out)) return tpl_nomem(c);
    for (size_t i = 0; i < seq.u.l->len; i++) {
        tv v = seq.u.l->items[i], r;
        if ((st = tpl_step(c, NULL)) != LMC_OK) return st;
        if (by_attr) {
            if ((st = tpl_attr_path(c, v, attr, &r)) != LMC_OK) return st;
            if (r.type == TV_UNDEFINED && has_def) r = def;
        } else {
            bool found = true;
            if ((st = tpl_filter(c, a->pos[0].u.s->data, v, &fargs, &r, &found)) != LMC_OK)
                return st;
            if (!found)
                return lmc_error(LMC_ERR_FORMAT, "no filter named '%s'", a->pos[0].u.s->data);
        }
        out->u.l->items[out->u.l->len++] = r;
    }
    return LMC_OK;
}

static lmc_status f_sum(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    tv seq;
    lmc_status st = tpl_iterate(c, in, &seq);
    if (st != LMC_OK) return st;
    tv attr = tpl_arg(a, 0, "attribute", tv_none());
    tv acc = tpl_arg(a, 1, "start", tv_int(0));
    for (size_t i = 0; i < seq.u.l->len; i++) {
        tv v = seq.u.l->items[i];
        if (attr.type != TV_NONE && (st = tpl_attr_path(c, v, attr, &v)) != LMC_OK) return st;
        if (!tv_is_number(v) || !tv_is_number(acc))
            return lmc_error(LMC_ERR_FORMAT, "unsupported operand type(s) for +: '%s' and '%s'",
                             tv_type_name(acc), tv_type_name(v));
        if (acc.type == TV_FLOAT || v.type == TV_FLOAT)
            acc = tv_float(tv_as_double(acc) + tv_as_double(v));
        else if (__builtin_add_overflow(int_or(acc, 0), int_or(v, 0), &acc.u.i))
            return lmc_error(LMC_ERR_UNSUPPORTED, "integer overflow");
        else
            acc.type = TV_INT;
    }
    *out = acc;
    return LMC_OK;
}

static lmc_status min_max(tpl_ctx *c, tv in, const tpl_args *a, bool want_max, tv *out) {
    tv seq;
    lmc_status st = tpl_iterate(c, in, &seq);
    if (st != LMC_OK) return st;
    bool cs = tv_truthy(tpl_arg(a, 0, "case_sensitive", tv_bool(false)));
    tv attr = tpl_arg(a, 1, "attribute", tv_none());
    if (seq.u.l->len == 0) {
        *out = tv_undefined("No aggregated item, sequence was empty.");
        return LMC_OK;
    }
    tv best = seq.u.l->items[0], best_key;
    if ((st = sort_key(c, best, attr, cs, &best_key)) != LMC_OK) return st;
    for (size_t i = 1; i < seq.u.l->len; i++) {
        tv k;
        int cmp;
        if ((st = sort_key(c, seq.u.l->items[i], attr, cs, &k)) != LMC_OK) return st;
        if ((st = tv_compare(k, best_key, &cmp)) != LMC_OK) return st;
        if (want_max ? cmp > 0 : cmp < 0) {
            best = seq.u.l->items[i];
            best_key = k;
        }
    }
    *out = best;
    return LMC_OK;
}
static lmc_status f_min(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    return min_max(c, in, a, false, out);
}
static lmc_status f_max(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    return min_max(c, in, a, true, out);
}

/* markupsafe.escape, which |e and |escape apply even without autoescape. */
static lmc_status f_escape(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    (void)a;
    lmc_status st = need_string(c, in, &in);
    if (st != LMC_OK) return st;
    tpl_buf b;
    tpl_buf_init(&b, c->arena, c->opts.max_output);
    if ((st = tpl_buf_append(&b, "", 0)) != LMC_OK) return st;
    for (size_t i = 0; i < in.u.s->len && st == LMC_OK; i++) {
        char ch = in.u.s->data[i];
        const char *rep = ch == '&'    ? "&amp;"
                          : ch == '<'  ? "&lt;"
                          : ch == '>'  ? "&gt;"
                          : ch == '"'  ? "&#34;"
                          : ch == '\'' ? "&#39;"
                                       : NULL;
        st = rep ? tpl_buf_puts(&b, rep) : tpl_buf_putc(&b, ch);
    }
    if (st != LMC_OK) return st;
    return tpl_str(c, b.data, b.len, out);
}

static lmc_status f_dictsort(tpl_ctx *c, tv in, const tpl_args *a, tv *out) {
    tv items, by = tpl_arg(a, 1, "by", tv_none());
    lmc_status st = f_items(c, in, a, &items);
    if (st != LMC_OK) return st;
    tv key_idx = tv_int(tv_is_str(by, "value") ? 1 : 0);
    tv args_pos[3] = {tpl_arg(a, 2, "reverse", tv_bool(false)),
                      tpl_arg(a, 0, "case_sensitive", tv_bool(false)), key_idx};
    tpl_args sa = {.pos = args_pos, .npos = 3};
    return f_sort(c, items, &sa, out);
}

static const struct {
    const char *name;
    filter_fn fn;
} FILTERS[] = {
    {"trim", f_trim},
    {"tojson", f_tojson},
    {"length", f_length},
    {"count", f_length},
    {"first", f_first},
    {"last", f_last},
    {"lower", f_lower},
    {"upper", f_upper},
    {"title", f_title},
    {"capitalize", f_capitalize},
    {"replace", f_replace},
    {"join", f_join},
    {"default", f_default},
    {"d", f_default},
    {"items", f_items},
    {"list", f_list},
    {"string", f_string},
    {"int", f_int},
    {"float", f_float},
    {"safe", f_safe},
    {"selectattr", f_selectattr},
    {"rejectattr", f_rejectattr},
    {"select", f_select},
    {"reject", f_reject},
    {"map", f_map},
    {"unique", f_unique},
    {"reverse", f_reverse},
    {"sort", f_sort},
    {"abs", f_abs},
    {"round", f_round},
    {"indent", f_indent},
    {"wordcount", f_wordcount},
    {"sum", f_sum},
    {"min", f_min},
    {"max", f_max},
    {"e", f_escape},
    {"escape", f_escape},
    {"dictsort", f_dictsort},
};

lmc_status tpl_filter(tpl_ctx *c, const char *name, tv in, const tpl_args *a, tv *out,
                      bool *found) {
    for (size_t i = 0; i < sizeof FILTERS / sizeof FILTERS[0]; i++)
        if (!strcmp(FILTERS[i].name, name)) {
            *found = true;
            return FILTERS[i].fn(c, in, a, out);
        }
    *found = false;
    return LMC_ERR_NOT_FOUND;
}
