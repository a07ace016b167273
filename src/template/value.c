/* Values: construction, truthiness, equality, ordering, str()/repr() and
 * JSON conversion, following CPython's semantics for the types jinja2
 * templates see (str, int, float, bool, None, list, tuple, dict). */
#include "template/value.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool tv_make_str(tpl_arena *a, const char *s, size_t len, tv *out) {
    tv_str *p = tpl_alloc(a, sizeof *p + len + 1);
    if (!p) return false;
    p->len = len;
    if (len && s) memcpy(p->data, s, len);
    p->data[len] = '\0';
    out->type = TV_STRING;
    out->u.s = p;
    return true;
}

bool tv_make_list(tpl_arena *a, size_t cap, bool is_tuple, tv *out) {
    tv_list *l = tpl_alloc(a, sizeof *l);
    if (!l) return false;
    l->is_tuple = is_tuple;
    if (cap) {
        l->items = tpl_alloc(a, cap * sizeof(tv));
        if (!l->items) return false;
        l->cap = cap;
    }
    out->type = TV_LIST;
    out->u.l = l;
    return true;
}

bool tv_make_dict(tpl_arena *a, size_t cap, tv_type type, tv *out) {
    tv_dict *d = tpl_alloc(a, sizeof *d);
    if (!d) return false;
    if (cap) {
        d->keys = tpl_alloc(a, cap * sizeof(tv));
        d->vals = tpl_alloc(a, cap * sizeof(tv));
        if (!d->keys || !d->vals) return false;
        d->cap = cap;
    }
    out->type = type;
    out->u.d = d;
    return true;
}

bool tv_list_push(tpl_arena *a, tv_list *l, tv item) {
    if (l->len == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        tv *items = tpl_alloc(a, cap * sizeof(tv));
        if (!items) return false;
        if (l->len) memcpy(items, l->items, l->len * sizeof(tv));
        l->items = items;
        l->cap = cap;
    }
    l->items[l->len++] = item;
    return true;
}

tv *tv_dict_get(const tv_dict *d, tv key) {
    for (size_t i = 0; i < d->len; i++)
        if (tv_equal(d->keys[i], key)) return &d->vals[i];
    return NULL;
}

tv *tv_dict_get_str(const tv_dict *d, const char *key) {
    size_t n = strlen(key);
    for (size_t i = 0; i < d->len; i++) {
        const tv *k = &d->keys[i];
        if (k->type == TV_STRING && k->u.s->len == n && !memcmp(k->u.s->data, key, n))
            return &d->vals[i];
    }
    return NULL;
}

bool tv_dict_set(tpl_arena *a, tv_dict *d, tv key, tv val) {
    tv *slot = tv_dict_get(d, key);
    if (slot) {
        *slot = val;
        return true;
    }
    if (d->len == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        tv *keys = tpl_alloc(a, cap * sizeof(tv));
        tv *vals = tpl_alloc(a, cap * sizeof(tv));
        if (!keys || !vals) return false;
        if (d->len) {
            memcpy(keys, d->keys, d->len * sizeof(tv));
            memcpy(vals, d->vals, d->len * sizeof(tv));
        }
        d->keys = keys;
        d->vals = vals;
        d->cap = cap;
    }
    d->keys[d->len] = key;
    d->vals[d->len] = val;
    d->len++;
    return true;
}

bool tv_truthy(tv v) {
    switch (v.type) {
    case TV_UNDEFINED:
    case TV_NONE:
        return false;
    case TV_BOOL:
        return v.u.b;
    case TV_INT:
        return v.u.i != 0;
    case TV_FLOAT:
        return v.u.f != 0.0;
    case TV_STRING:
        return v.u.s->len != 0;
    case TV_LIST:
        return v.u.l->len != 0;
    case TV_DICT:
        return v.u.d->len != 0;
    default:
        return true;
    }
}

bool tv_is_number(tv v) {
    return v.type == TV_INT || v.type == TV_FLOAT || v.type == TV_BOOL;
}

double tv_as_double(tv v) {
    switch (v.type) {
    case TV_INT:
        return (double)v.u.i;
    case TV_FLOAT:
        return v.u.f;
    case TV_BOOL:
        return v.u.b ? 1.0 : 0.0;
    default:
        return 0.0;
    }
}

bool tv_is_str(tv v, const char *s) {
    return v.type == TV_STRING && v.u.s->len == strlen(s) && !memcmp(v.u.s->data, s, v.u.s->len);
}

/* Python compares bool, int and float by numeric value (True == 1). */
bool tv_equal(tv a, tv b) {
    if (tv_is_number(a) && tv_is_number(b)) {
        if (a.type != TV_FLOAT && b.type != TV_FLOAT) {
            int64_t x = a.type == TV_BOOL ? a.u.b : a.u.i;
            int64_t y = b.type == TV_BOOL ? b.u.b : b.u.i;
            return x == y;
        }
        return tv_as_double(a) == tv_as_double(b);
    }
    if (a.type != b.type) return false;
    switch (a.type) {
    case TV_UNDEFINED:
    case TV_NONE:
        return true;
    case TV_STRING:
        return a.u.s->len == b.u.s->len && !memcmp(a.u.s->data, b.u.s->data, a.u.s->len);
    case TV_LIST:
        if (a.u.l->is_tuple != b.u.l->is_tuple || a.u.l->len != b.u.l->len) return false;
        for (size_t i = 0; i < a.u.l->len; i++)
            if (!tv_equal(a.u.l->items[i], b.u.l->items[i])) return false;
        return true;
    case TV_DICT:
    case TV_NAMESPACE:
        if (a.type == TV_NAMESPACE) return a.u.d == b.u.d;
        if (a.u.d->len != b.u.d->len) return false;
        for (size_t i = 0; i < a.u.d->len; i++) {
            tv *o = tv_dict_get(b.u.d, a.u.d->keys[i]);
            if (!o || !tv_equal(a.u.d->vals[i], *o)) return false;
        }
        return true;
    case TV_LOOP:
        return a.u.loop == b.u.loop;
    case TV_MACRO:
        return a.u.macro == b.u.macro;
    case TV_FUNC:
        return a.u.fn == b.u.fn;
    case TV_METHOD:
        return a.u.m == b.u.m;
    default:
        return false;
    }
}

const char *tv_type_name(tv v) {
    switch (v.type) {
    case TV_UNDEFINED:
        return "Undefined";
    case TV_NONE:
        return "NoneType";
    case TV_BOOL:
        return "bool";
    case TV_INT:
        return "int";
    case TV_FLOAT:
        return "float";
    case TV_STRING:
        return "str";
    case TV_LIST:
        return v.u.l->is_tuple ? "tuple" : "list";
    case TV_DICT:
        return "dict";
    case TV_NAMESPACE:
        return "Namespace";
    case TV_LOOP:
        return "LoopContext";
    case TV_MACRO:
        return "Macro";
    case TV_FUNC:
        return "function";
    case TV_METHOD:
        return "builtin_function_or_method";
    }
    return "object";
}

lmc_status tv_compare(tv a, tv b, int *cmp) {
    if (tv_is_number(a) && tv_is_number(b)) {
        if (a.type != TV_FLOAT && b.type != TV_FLOAT) {
            int64_t x = a.type == TV_BOOL ? a.u.b : a.u.i;
            int64_t y = b.type == TV_BOOL ? b.u.b : b.u.i;
            *cmp = x < y ? -1 : x > y;
        } else {
            double x = tv_as_double(a), y = tv_as_double(b);
            *cmp = x < y ? -1 : x > y;
        }
        return LMC_OK;
    }
    if (a.type == TV_STRING && b.type == TV_STRING) {
        /* UTF-8 byte order is code point order, which is Python's order. */
        size_t n = a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len;
        int c = memcmp(a.u.s->data, b.u.s->data, n);
        if (c == 0) c = a.u.s->len < b.u.s->len ? -1 : a.u.s->len > b.u.s->len;
        *cmp = c < 0 ? -1 : c > 0;
        return LMC_OK;
    }
    if (a.type == TV_LIST && b.type == TV_LIST && a.u.l->is_tuple == b.u.l->is_tuple) {
        size_t n = a.u.l->len < b.u.l->len ? a.u.l->len : b.u.l->len;
        for (size_t i = 0; i < n; i++) {
            if (tv_equal(a.u.l->items[i], b.u.l->items[i])) continue;
            return tv_compare(a.u.l->items[i], b.u.l->items[i], cmp);
        }
        *cmp = a.u.l->len < b.u.l->len ? -1 : a.u.l->len > b.u.l->len;
        return LMC_OK;
    }
    if (a.type == TV_UNDEFINED || b.type == TV_UNDEFINED) {
        tv u = a.type == TV_UNDEFINED ? a : b;
        if (u.u.undef_name) return lmc_error(LMC_ERR_FORMAT, "%s", u.u.undef_name);
        return lmc_error(LMC_ERR_FORMAT, "undefined value used in a comparison");
    }
    return lmc_error(LMC_ERR_FORMAT, "'<' not supported between instances of '%s' and '%s'",
                     tv_type_name(a), tv_type_name(b));
}

/* ---- str() and repr() ---------------------------------------------------- */

/* Python's repr(str): single quotes unless the text has ' and no ". */
static lmc_status repr_str(const tv_str *s, tpl_buf *b) {
    bool has_sq = memchr(s->data, '\'', s->len) != NULL;
    bool has_dq = memchr(s->data, '"', s->len) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    lmc_status st = tpl_buf_putc(b, q);
    for (size_t i = 0; i < s->len && st == LMC_OK; i++) {
        unsigned char c = (unsigned char)s->data[i];
        if (c == (unsigned char)q || c == '\\') {
            char e[2] = {'\\', (char)c};
            st = tpl_buf_append(b, e, 2);
        } else if (c == '\n')
            st = tpl_buf_append(b, "\\n", 2);
        else if (c == '\r')
            st = tpl_buf_append(b, "\\r", 2);
        else if (c == '\t')
            st = tpl_buf_append(b, "\\t", 2);
        else if (c < 0x20 || c == 0x7f)
            st = tpl_buf_printf(b, "\\x%02x", c);
        else
            st = tpl_buf_putc(b, (char)c);
    }
    if (st == LMC_OK) st = tpl_buf_putc(b, q);
    return st;
}

static lmc_status to_str_impl(tv v, tpl_buf *b, bool repr, int depth) {
    if (depth > 200) return lmc_error(LMC_ERR_LIMIT, "value nesting too deep to print");
    char num[LMC_FLOAT_REPR_MAX];
    lmc_status st = LMC_OK;
    switch (v.type) {
    case TV_UNDEFINED:
        return LMC_OK;
    case TV_NONE:
        return tpl_buf_puts(b, "None");
    case TV_BOOL:
        return tpl_buf_puts(b, v.u.b ? "True" : "False");
    case TV_INT:
        return tpl_buf_printf(b, "%lld", (long long)v.u.i);
    case TV_FLOAT:
        lmc_float_repr(v.u.f, num);
        return tpl_buf_puts(b, num);
    case TV_STRING:
        if (repr) return repr_str(v.u.s, b);
        return tpl_buf_append(b, v.u.s->data, v.u.s->len);
    case TV_LIST: {
        const tv_list *l = v.u.l;
        st = tpl_buf_putc(b, l->is_tuple ? '(' : '[');
        for (size_t i = 0; i < l->len && st == LMC_OK; i++) {
            if (i) st = tpl_buf_append(b, ", ", 2);
            if (st == LMC_OK) st = to_str_impl(l->items[i], b, true, depth + 1);
        }
        if (st == LMC_OK && l->is_tuple && l->len == 1) st = tpl_buf_putc(b, ',');
        if (st == LMC_OK) st = tpl_buf_putc(b, l->is_tuple ? ')' : ']');
        return st;
    }
    case TV_DICT:
    case TV_NAMESPACE: {
        const tv_dict *d = v.u.d;
        st = tpl_buf_puts(b, v.type == TV_NAMESPACE ? "<Namespace {" : "{");
        for (size_t i = 0; i < d->len && st == LMC_OK; i++) {
            if (i) st = tpl_buf_append(b, ", ", 2);
            if (st == LMC_OK) st = to_str_impl(d->keys[i], b, true, depth + 1);
            if (st == LMC_OK) st = tpl_buf_append(b, ": ", 2);
            if (st == LMC_OK) st = to_str_impl(d->vals[i], b, true, depth + 1);
        }
        if (st == LMC_OK) st = tpl_buf_puts(b, v.type == TV_NAMESPACE ? "}>" : "}");
        return st;
    }
    default:
        return tpl_buf_printf(b, "<%s object>", tv_type_name(v));
    }
}

lmc_status tv_to_str(tv v, tpl_buf *b) {
    return to_str_impl(v, b, false, 0);
}

lmc_status tv_stringify(tpl_arena *a, tv v, size_t limit, tv *out) {
    if (v.type == TV_STRING) {
        *out = v;
        return LMC_OK;
    }
    tpl_buf b;
    tpl_buf_init(&b, a, limit);
    lmc_status st = tv_to_str(v, &b);
    if (st != LMC_OK) return st;
    if (!tv_make_str(a, b.data ? b.data : "", b.len, out)) return tpl_arena_status(a);
    return LMC_OK;
}

/* ---- JSON ------------------------------------------------------------------ */

static lmc_status from_json_impl(tpl_arena *a, const json_t *j, tv *out, int depth) {
    if (depth > 500) return lmc_error(LMC_ERR_LIMIT, "JSON nesting too deep");
    switch (json_typeof(j)) {
    case JSON_NULL:
        *out = tv_none();
        return LMC_OK;
    case JSON_TRUE:
        *out = tv_bool(true);
        return LMC_OK;
    case JSON_FALSE:
        *out = tv_bool(false);
        return LMC_OK;
    case JSON_INTEGER:
        *out = tv_int((int64_t)json_integer_value(j));
        return LMC_OK;
    case JSON_REAL:
        *out = tv_float(json_real_value(j));
        return LMC_OK;
    case JSON_STRING:
        if (!tv_make_str(a, json_string_value(j), json_string_length(j), out))
            return tpl_arena_status(a);
        return LMC_OK;
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        if (!tv_make_list(a, n, false, out)) return tpl_arena_status(a);
        for (size_t i = 0; i < n; i++) {
            lmc_status st = from_json_impl(a, json_array_get(j, i), &out->u.l->items[i], depth + 1);
            if (st != LMC_OK) return st;
        }
        out->u.l->len = n;
        return LMC_OK;
    }
    case JSON_OBJECT: {
        if (!tv_make_dict(a, json_object_size(j), TV_DICT, out)) return tpl_arena_status(a);
        const char *key;
        const json_t *val;
        json_object_foreach((json_t *)j, key, val) {
            tv k, v;
            if (!tv_make_str(a, key, strlen(key), &k)) return tpl_arena_status(a);
            lmc_status st = from_json_impl(a, val, &v, depth + 1);
            if (st != LMC_OK) return st;
            if (!tv_dict_set(a, out->u.d, k, v)) return tpl_arena_status(a);
        }
        return LMC_OK;
    }
    }
    *out = tv_none();
    return LMC_OK;
}

lmc_status tv_from_json(tpl_arena *a, const json_t *j, tv *out) {
    return from_json_impl(a, j, out, 0);
}

/* json.encoder's escaping: with ensure_ascii=False only '"', '\\' and control
 * characters are escaped; with True every non-ASCII code point becomes
 * \uXXXX (surrogate pairs above U+FFFF). */
static lmc_status json_str(const char *s, size_t len, bool ensure_ascii, tpl_buf *b) {
    lmc_status st = tpl_buf_putc(b, '"');
    for (size_t i = 0; i < len && st == LMC_OK;) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80 && ensure_ascii) {
            int32_t cp;
            i += lmc_utf8_decode(s + i, len - i, &cp);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                st =
                    tpl_buf_printf(b, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
            } else {
                st = tpl_buf_printf(b, "\\u%04x", cp);
            }
            continue;
        }
        i++;
        switch (c) {
        case '"':
            st = tpl_buf_append(b, "\\\"", 2);
            break;
        case '\\':
            st = tpl_buf_append(b, "\\\\", 2);
            break;
        case '\n':
            st = tpl_buf_append(b, "\\n", 2);
            break;
        case '\r':
            st = tpl_buf_append(b, "\\r", 2);
            break;
        case '\t':
            st = tpl_buf_append(b, "\\t", 2);
            break;
        case '\b':
            st = tpl_buf_append(b, "\\b", 2);
            break;
        case '\f':
            st = tpl_buf_append(b, "\\f", 2);
            break;
        default:
            if (c < 0x20)
                st = tpl_buf_printf(b, "\\u%04x", c);
            else
                st = tpl_buf_putc(b, (char)c);
        }
    }
    if (st == LMC_OK) st = tpl_buf_putc(b, '"');
    return st;
}

static lmc_status json_newline(const tv_json_opts *o, int level, tpl_buf *b) {
    lmc_status st = tpl_buf_putc(b, '\n');
    for (int i = 0; i < level && st == LMC_OK; i++) st = tpl_buf_puts(b, o->indent);
    return st;
}

/* json.dumps turns dict keys that are not strings into strings. */
static lmc_status json_key(tv k, const tv_json_opts *o, tpl_buf *b) {
    char num[LMC_FLOAT_REPR_MAX];
    switch (k.type) {
    case TV_STRING:
        return json_str(k.u.s->data, k.u.s->len, o->ensure_ascii, b);
    case TV_INT:
        return tpl_buf_printf(b, "\"%lld\"", (long long)k.u.i);
    case TV_FLOAT:
        lmc_float_repr(k.u.f, num);
        return tpl_buf_printf(b, "\"%s\"", num);
    case TV_BOOL:
        return tpl_buf_puts(b, k.u.b ? "\"true\"" : "\"false\"");
    case TV_NONE:
        return tpl_buf_puts(b, "\"null\"");
    default:
        return lmc_error(LMC_ERR_FORMAT, "keys must be str, int, float, bool or None, not %s",
                         tv_type_name(k));
    }
}

static int cmp_keys(const void *x, const void *y) {
    const tv *a = *(const tv *const *)x, *b = *(const tv *const *)y;
    int c = 0;
    if (tv_compare(*a, *b, &c) != LMC_OK) return 0;
    return c;
}

static lmc_status to_json_impl(tv v, const tv_json_opts *o, int level, tpl_buf *b) {
    if (level > 200) return lmc_error(LMC_ERR_LIMIT, "value nesting too deep for tojson");
    const char *item_sep = o->item_sep ? o->item_sep : (o->indent ? "," : ", ");
    const char *key_sep = o->key_sep ? o->key_sep : ": ";
    char num[LMC_FLOAT_REPR_MAX];
    lmc_status st = LMC_OK;
    switch (v.type) {
    case TV_NONE:
        return tpl_buf_puts(b, "null");
    case TV_BOOL:
        return tpl_buf_puts(b, v.u.b ? "true" : "false");
    case TV_INT:
        return tpl_buf_printf(b, "%lld", (long long)v.u.i);
    case TV_FLOAT:
        if (isnan(v.u.f)) return tpl_buf_puts(b, "NaN");
        if (isinf(v.u.f)) return tpl_buf_puts(b, v.u.f < 0 ? "-Infinity" : "Infinity");
        lmc_float_repr(v.u.f, num);
        return tpl_buf_puts(b, num);
    case TV_STRING:
        return json_str(v.u.s->data, v.u.s->len, o->ensure_ascii, b);
    case TV_LIST: {
        const tv_list *l = v.u.l;
        if (l->len == 0) return tpl_buf_puts(b, "[]");
        st = tpl_buf_putc(b, '[');
        for (size_t i = 0; i < l->len && st == LMC_OK; i++) {
            if (i) st = tpl_buf_puts(b, item_sep);
            if (st == LMC_OK && o->indent) st = json_newline(o, level + 1, b);
            if (st == LMC_OK) st = to_json_impl(l->items[i], o, level + 1, b);
        }
        if (st == LMC_OK && o->indent) st = json_newline(o, level, b);
        if (st == LMC_OK) st = tpl_buf_putc(b, ']');
        return st;
    }
    case TV_DICT: {
        const tv_dict *d = v.u.d;
        if (d->len == 0) return tpl_buf_puts(b, "{}");
        /* Order of keys: insertion, or sorted (keys must then be comparable). */
        size_t *order = tpl_alloc(b->arena, d->len * sizeof *order);
        if (!order) return tpl_arena_status(b->arena);
        for (size_t i = 0; i < d->len; i++) order[i] = i;
        if (o->sort_keys) {
            const tv **ptrs = tpl_alloc(b->arena, d->len * sizeof *ptrs);
            if (!ptrs) return tpl_arena_status(b->arena);
            for (size_t i = 0; i < d->len; i++) {
                int c;
                if (i && (st = tv_compare(d->keys[0], d->keys[i], &c)) != LMC_OK) return st;
                ptrs[i] = &d->keys[i];
            }
            qsort(ptrs, d->len, sizeof *ptrs, cmp_keys);
            for (size_t i = 0; i < d->len; i++) order[i] = (size_t)(ptrs[i] - d->keys);
        }
        st = tpl_buf_putc(b, '{');
        for (size_t n = 0; n < d->len && st == LMC_OK; n++) {
            size_t i = order[n];
            if (n) st = tpl_buf_puts(b, item_sep);
            if (st == LMC_OK && o->indent) st = json_newline(o, level + 1, b);
            if (st == LMC_OK) st = json_key(d->keys[i], o, b);
            if (st == LMC_OK) st = tpl_buf_puts(b, key_sep);
            if (st == LMC_OK) st = to_json_impl(d->vals[i], o, level + 1, b);
        }
        if (st == LMC_OK && o->indent) st = json_newline(o, level, b);
        if (st == LMC_OK) st = tpl_buf_putc(b, '}');
        return st;
    }
    default:
        return lmc_error(LMC_ERR_FORMAT, "Object of type %s is not JSON serializable",
                         tv_type_name(v));
    }
}

lmc_status tv_to_json(tv v, const tv_json_opts *opts, tpl_buf *b) {
    return to_json_impl(v, opts, 0, b);
}
