/* The global functions jinja2 and transformers provide: range, namespace,
 * dict, raise_exception, strftime_now. */
#include "template/eval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

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
    lmc_status st = tpl_need_str(fmt, "strftime_now");
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
