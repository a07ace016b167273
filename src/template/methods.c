/* Attribute and item lookup, the Python methods templates call on dict and
 * list values (str methods: strings.c), the `loop` object, and calls.
 * Lookups follow jinja2's Environment.getattr/getitem: `.` tries the
 * attribute first, `[]` the item first, and a miss is Undefined. */
#include "template/eval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

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

/* Lists are immutable, as in transformers' ImmutableSandboxedEnvironment:
 * append, extend, insert, pop, remove, reverse, sort and clear are refused
 * with jinja2's SecurityError message. */
static lmc_status list_method(tpl_ctx *c, tv l, const char *name, const tpl_args *a, tv *out) {
    tv x = tpl_arg(a, 0, NULL, tv_undefined(NULL));
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
        if (self.type == TV_STRING) return tpl_str_method(c, self, name, a, out);
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
