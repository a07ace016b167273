/* Evaluator: runs the syntax tree against a scope chain, following jinja2's
 * runtime semantics (jinja2/compiler.py, runtime.py, 3.1): per-iteration loop
 * frames (a {% set %} inside a loop does not leak out), macros with their own
 * frame over the defining one, default Undefined (empty when printed, falsy,
 * an error on arithmetic, calls and attribute access), Python operators. */
#include "template/eval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lmc_status tpl_fail(tpl_ctx *c, const node *at, lmc_status st, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->located = true;
    if (!at) return lmc_error(st, "%s", msg);
    return tpl_fail_at(c->src, at->pos, st, "%s", msg);
}

lmc_status tpl_nomem(tpl_ctx *c) {
    return tpl_arena_status(c->arena);
}

lmc_status tpl_undefined_error(tv u) {
    return lmc_error(LMC_ERR_FORMAT, "%s",
                     u.u.undef_name ? u.u.undef_name : "an undefined value was used");
}

/* Adds the node's position to a message that has none yet. */
static lmc_status locate(tpl_ctx *c, const node *at, lmc_status st) {
    if (st == LMC_OK || c->located) return st;
    c->located = true;
    int line, col;
    tpl_position(c->src, at->pos, &line, &col);
    return lmc_error_prefix(st, "line %d, column %d", line, col);
}

lmc_status tpl_step(tpl_ctx *c, const node *at) {
    if (++c->steps > c->opts.max_steps)
        return tpl_fail(c, at, LMC_ERR_LIMIT, "template step limit of %llu reached",
                        (unsigned long long)c->opts.max_steps);
    return LMC_OK;
}

lmc_status tpl_str(tpl_ctx *c, const char *s, size_t len, tv *out) {
    if (len > c->opts.max_output)
        return lmc_error(LMC_ERR_LIMIT, "string of %zu bytes exceeds the limit of %zu", len,
                         c->opts.max_output);
    if (!tv_make_str(c->arena, s, len, out)) return tpl_nomem(c);
    return LMC_OK;
}

lmc_status tpl_to_string(tpl_ctx *c, tv v, tv *out) {
    return tv_stringify(c->arena, v, c->opts.max_output, out);
}

lmc_status tpl_iterate(tpl_ctx *c, tv v, tv *out) {
    switch (v.type) {
    case TV_UNDEFINED:
        if (!tv_make_list(c->arena, 0, false, out)) return tpl_nomem(c);
        return LMC_OK;
    case TV_LIST:
        *out = v;
        return LMC_OK;
    case TV_DICT:
    case TV_NAMESPACE:
        if (!tv_make_list(c->arena, v.u.d->len, false, out)) return tpl_nomem(c);
        if (v.u.d->len) /* an empty dict may have no key array */
            memcpy(out->u.l->items, v.u.d->keys, v.u.d->len * sizeof(tv));
        out->u.l->len = v.u.d->len;
        return LMC_OK;
    case TV_STRING: {
        const tv_str *s = v.u.s;
        if (!tv_make_list(c->arena, s->len, false, out)) return tpl_nomem(c);
        for (size_t i = 0; i < s->len;) {
            int32_t cp;
            size_t n = lmc_utf8_decode(s->data + i, s->len - i, &cp);
            tv ch;
            lmc_status st = tpl_str(c, s->data + i, n, &ch);
            if (st != LMC_OK) return st;
            out->u.l->items[out->u.l->len++] = ch;
            i += n;
        }
        return LMC_OK;
    }
    default:
        return lmc_error(LMC_ERR_FORMAT, "'%s' object is not iterable", tv_type_name(v));
    }
}

/* ---- scopes ------------------------------------------------------------------ */

static scope *push_scope(tpl_ctx *c, scope *parent) {
    scope *s = tpl_alloc(c->arena, sizeof *s);
    if (s) s->parent = parent;
    return s;
}

static bool lookup(tpl_ctx *c, const char *name, tv *out) {
    for (scope *s = c->scope; s; s = s->parent) {
        tv *v = tv_dict_get_str(&s->vars, name);
        if (v) {
            *out = *v;
            return true;
        }
    }
    return tpl_lookup_global(name, out);
}

static lmc_status assign(tpl_ctx *c, const char *name, tv v) {
    tv k;
    if (!tv_make_str(c->arena, name, strlen(name), &k)) return tpl_nomem(c);
    if (!tv_dict_set(c->arena, &c->scope->vars, k, v)) return tpl_nomem(c);
    return LMC_OK;
}

/* ---- expressions ------------------------------------------------------------- */

static lmc_status eval(tpl_ctx *c, const node *n, tv *out);

static int64_t as_int(tv v) {
    return v.type == TV_BOOL ? v.u.b : v.u.i;
}

static lmc_status eval_args(tpl_ctx *c, const call_args *ca, tpl_args *a) {
    size_t np = ca->pos.len, nk = ca->kw_values.len;
    tv *vals = tpl_alloc(c->arena, (np + nk + 1) * sizeof(tv));
    if (!vals) return tpl_nomem(c);
    for (size_t i = 0; i < np; i++) {
        lmc_status st = eval(c, ca->pos.items[i], &vals[i]);
        if (st != LMC_OK) return st;
    }
    for (size_t i = 0; i < nk; i++) {
        lmc_status st = eval(c, ca->kw_values.items[i], &vals[np + i]);
        if (st != LMC_OK) return st;
    }
    a->pos = vals;
    a->npos = np;
    a->kw = vals + np;
    a->nkw = nk;
    a->kw_names = ca->kw_names;
    return LMC_OK;
}

static lmc_status eval_slice(tpl_ctx *c, const node *at, tv obj, const node *sl, tv *out) {
    tv parts[3] = {tv_none(), tv_none(), tv_none()};
    const node *nodes[3] = {sl->u.slice.start, sl->u.slice.stop, sl->u.slice.step};
    for (int k = 0; k < 3; k++) {
        if (!nodes[k]) continue;
        lmc_status st = eval(c, nodes[k], &parts[k]);
        if (st != LMC_OK) return st;
    }
    return tpl_slice(c, at, obj, parts, out);
}

static lmc_status eval_filter_node(tpl_ctx *c, const node *n, tv *out) {
    tv in;
    lmc_status st;
    if (!n->u.filter.arg)
        in = c->filter_input;
    else if ((st = eval(c, n->u.filter.arg, &in)) != LMC_OK)
        return st;
    tpl_args a;
    if ((st = eval_args(c, &n->u.filter.args, &a)) != LMC_OK) return st;
    bool found = true;
    if (n->kind == N_FILTER) {
        st = tpl_filter(c, n->u.filter.name, in, &a, out, &found);
        if (!found) return tpl_fail(c, n, LMC_ERR_FORMAT, "no filter named '%s'", n->u.filter.name);
    } else {
        bool r = false;
        st = tpl_test(c, n->u.filter.name, in, &a, &r, &found);
        if (!found) return tpl_fail(c, n, LMC_ERR_FORMAT, "no test named '%s'", n->u.filter.name);
        *out = tv_bool(n->u.filter.negate ? !r : r);
    }
    return locate(c, n, st);
}

static lmc_status eval(tpl_ctx *c, const node *n, tv *out) {
    lmc_status st = LMC_OK;
    tv a, b;
    switch (n->kind) {
    case N_LITERAL:
        *out = n->u.literal;
        return LMC_OK;
    case N_NAME:
        if (!lookup(c, n->u.name, out)) {
            char *msg = tpl_alloc(c->arena, strlen(n->u.name) + 20);
            if (!msg) return tpl_nomem(c);
            sprintf(msg, "'%s' is undefined", n->u.name);
            *out = tv_undefined(msg);
        }
        return LMC_OK;
    case N_GETATTR:
        if ((st = eval(c, n->u.getattr.obj, &a)) != LMC_OK) return st;
        return locate(c, n, tpl_getattr(c, a, n->u.getattr.attr, out));
    case N_GETITEM:
        if ((st = eval(c, n->u.getitem.obj, &a)) != LMC_OK) return st;
        if (n->u.getitem.index->kind == N_SLICE)
            return locate(c, n, eval_slice(c, n, a, n->u.getitem.index, out));
        if ((st = eval(c, n->u.getitem.index, &b)) != LMC_OK) return st;
        return locate(c, n, tpl_getitem(c, a, b, out));
    case N_CALL: {
        if ((st = eval(c, n->u.call.fn, &a)) != LMC_OK) return st;
        tpl_args args;
        if ((st = eval_args(c, &n->u.call.args, &args)) != LMC_OK) return st;
        return locate(c, n, tpl_call(c, n, a, &args, out));
    }
    case N_FILTER:
    case N_TEST:
        return eval_filter_node(c, n, out);
    case N_NEG:
    case N_POS:
        if ((st = eval(c, n->u.operand, &a)) != LMC_OK) return st;
        if (a.type == TV_UNDEFINED) return locate(c, n, tpl_undefined_error(a));
        if (a.type == TV_FLOAT)
            *out = tv_float(n->kind == N_NEG ? -a.u.f : a.u.f);
        else if (a.type == TV_INT || a.type == TV_BOOL) {
            if (n->kind == N_NEG && as_int(a) == INT64_MIN)
                return tpl_fail(c, n, LMC_ERR_UNSUPPORTED, "integer overflow");
            *out = tv_int(n->kind == N_NEG ? -as_int(a) : as_int(a));
        } else
            return tpl_fail(c, n, LMC_ERR_FORMAT, "bad operand type for unary %s: '%s'",
                            n->kind == N_NEG ? "-" : "+", tv_type_name(a));
        return LMC_OK;
    case N_NOT:
        if ((st = eval(c, n->u.operand, &a)) != LMC_OK) return st;
        *out = tv_bool(!tv_truthy(a));
        return LMC_OK;
    case N_AND:
    case N_OR:
        /* Python returns the deciding operand itself. */
        if ((st = eval(c, n->u.logic.a, &a)) != LMC_OK) return st;
        if (tv_truthy(a) == (n->kind == N_OR)) {
            *out = a;
            return LMC_OK;
        }
        return eval(c, n->u.logic.b, out);
    case N_BINARY:
        if ((st = eval(c, n->u.binary.a, &a)) != LMC_OK) return st;
        if ((st = eval(c, n->u.binary.b, &b)) != LMC_OK) return st;
        return locate(c, n, tpl_binary(c, n, n->u.binary.op, a, b, out));
    case N_COMPARE: {
        if ((st = eval(c, n->u.compare.first, &a)) != LMC_OK) return st;
        bool r = true;
        for (size_t i = 0; i < n->u.compare.rest.len && r; i++) {
            if ((st = eval(c, n->u.compare.rest.items[i], &b)) != LMC_OK) return st;
            if ((st = tpl_compare_op(n->u.compare.ops[i], a, b, &r)) != LMC_OK)
                return locate(c, n, st);
            a = b;
        }
        *out = tv_bool(r);
        return LMC_OK;
    }
    case N_COND:
        if ((st = eval(c, n->u.cond.cond, &a)) != LMC_OK) return st;
        if (tv_truthy(a)) return eval(c, n->u.cond.then, out);
        if (n->u.cond.otherwise) return eval(c, n->u.cond.otherwise, out);
        *out = tv_undefined(
            "the inline if-expression evaluated to false and no else section was defined");
        return LMC_OK;
    case N_LIST:
    case N_TUPLE:
        if (!tv_make_list(c->arena, n->u.items.len, n->kind == N_TUPLE, out)) return tpl_nomem(c);
        for (size_t i = 0; i < n->u.items.len; i++) {
            if ((st = eval(c, n->u.items.items[i], &out->u.l->items[i])) != LMC_OK) return st;
            out->u.l->len++;
        }
        return LMC_OK;
    case N_DICT: {
        tv d;
        if (!tv_make_dict(c->arena, n->u.dict.keys.len, TV_DICT, &d)) return tpl_nomem(c);
        for (size_t i = 0; i < n->u.dict.keys.len; i++) {
            if ((st = eval(c, n->u.dict.keys.items[i], &a)) != LMC_OK) return st;
            if ((st = eval(c, n->u.dict.values.items[i], &b)) != LMC_OK) return st;
            if (a.type == TV_LIST && !a.u.l->is_tuple)
                return tpl_fail(c, n, LMC_ERR_FORMAT, "unhashable type: 'list'");
            if (a.type == TV_DICT) return tpl_fail(c, n, LMC_ERR_FORMAT, "unhashable type: 'dict'");
            if (!tv_dict_set(c->arena, d.u.d, a, b)) return tpl_nomem(c);
        }
        *out = d;
        return LMC_OK;
    }
    default:
        return tpl_fail(c, n, LMC_ERR_FORMAT, "statement used as an expression");
    }
}

/* ---- statements ------------------------------------------------------------- */

static lmc_status exec(tpl_ctx *c, const node *n);

static lmc_status exec_body(tpl_ctx *c, const node *body) {
    for (size_t i = 0; i < body->u.items.len; i++) {
        lmc_status st = exec(c, body->u.items.items[i]);
        if (st != LMC_OK) return st;
        if (c->flow != FLOW_NORMAL) break;
    }
    return LMC_OK;
}

/* Renders a body into a fresh buffer (macro calls, block set, filter). */
static lmc_status capture(tpl_ctx *c, const node *body, tv *out) {
    tpl_buf buf, *saved = c->out;
    tpl_buf_init(&buf, c->arena, c->opts.max_output);
    lmc_status st = tpl_buf_append(&buf, "", 0);
    c->out = &buf;
    if (st == LMC_OK) st = exec_body(c, body);
    c->out = saved;
    if (st != LMC_OK) return st;
    return tpl_str(c, buf.data, buf.len, out);
}

static lmc_status assign_target(tpl_ctx *c, const node *target, tv v) {
    lmc_status st;
    if (target->kind == N_NAME) return assign(c, target->u.name, v);
    if (target->kind == N_GETATTR) {
        tv ns;
        if (!lookup(c, target->u.getattr.obj->u.name, &ns) || ns.type != TV_NAMESPACE)
            return tpl_fail(c, target, LMC_ERR_FORMAT,
                            "cannot assign attribute on non-namespace object");
        tv k;
        if ((st = tpl_str(c, target->u.getattr.attr, strlen(target->u.getattr.attr), &k)) != LMC_OK)
            return st;
        if (!tv_dict_set(c->arena, ns.u.d, k, v)) return tpl_nomem(c);
        return LMC_OK;
    }
    /* tuple unpacking */
    tv seq;
    if ((st = tpl_iterate(c, v, &seq)) != LMC_OK || v.type == TV_UNDEFINED) {
        if (v.type == TV_UNDEFINED) return locate(c, target, tpl_undefined_error(v));
        return locate(c, target, st);
    }
    size_t want = target->u.items.len;
    if (seq.u.l->len != want)
        return tpl_fail(c, target, LMC_ERR_FORMAT, "cannot unpack %zu values into %zu names",
                        seq.u.l->len, want);
    for (size_t i = 0; i < want; i++)
        if ((st = assign(c, target->u.items.items[i]->u.name, seq.u.l->items[i])) != LMC_OK)
            return st;
    return LMC_OK;
}

static lmc_status exec_for(tpl_ctx *c, const node *n) {
    tv it, seq;
    lmc_status st = eval(c, n->u.for_.iter, &it);
    if (st != LMC_OK) return st;
    if ((st = tpl_iterate(c, it, &seq)) != LMC_OK) return locate(c, n->u.for_.iter, st);
    scope *outer = c->scope;
    if (n->u.for_.filter) { /* `for x in xs if cond`: filtered before loop.* is computed */
        tv kept;
        if (!tv_make_list(c->arena, seq.u.l->len, false, &kept)) return tpl_nomem(c);
        for (size_t i = 0; i < seq.u.l->len; i++) {
            if ((st = tpl_step(c, n)) != LMC_OK) return st;
            if (!(c->scope = push_scope(c, outer))) return tpl_nomem(c);
            st = assign_target(c, n->u.for_.target, seq.u.l->items[i]);
            tv keep = tv_bool(false);
            if (st == LMC_OK) st = eval(c, n->u.for_.filter, &keep);
            c->scope = outer;
            if (st != LMC_OK) return st;
            if (tv_truthy(keep)) kept.u.l->items[kept.u.l->len++] = seq.u.l->items[i];
        }
        seq = kept;
    }
    tpl_loop *loop = tpl_alloc(c->arena, sizeof *loop);
    if (!loop) return tpl_nomem(c);
    loop->items = seq.u.l;
    loop->depth = ++c->loop_depth;
    tv loop_v = {.type = TV_LOOP, .u.loop = loop};
    for (size_t i = 0; i < seq.u.l->len; i++) {
        if ((st = tpl_step(c, n)) != LMC_OK) break;
        loop->index0 = i;
        if (!(c->scope = push_scope(c, outer))) {
            st = tpl_nomem(c);
            break;
        }
        if ((st = assign_target(c, n->u.for_.target, seq.u.l->items[i])) == LMC_OK &&
            (st = assign(c, "loop", loop_v)) == LMC_OK)
            st = exec_body(c, n->u.for_.body);
        c->scope = outer;
        if (st != LMC_OK) break;
        tpl_flow f = c->flow;
        c->flow = FLOW_NORMAL;
        if (f == FLOW_BREAK) break;
    }
    c->loop_depth--;
    c->scope = outer;
    if (st != LMC_OK) return st;
    if (seq.u.l->len == 0 && n->u.for_.else_body) return exec_body(c, n->u.for_.else_body);
    return LMC_OK;
}

static lmc_status make_macro(tpl_ctx *c, const char *name, const param_list *params,
                             const node *body, tv *out) {
    tpl_macro *m = tpl_alloc(c->arena, sizeof *m);
    if (!m) return tpl_nomem(c);
    m->name = name;
    m->params = params;
    m->body = body;
    m->closure = c->scope;
    out->type = TV_MACRO;
    out->u.macro = m;
    return LMC_OK;
}

lmc_status tpl_call_macro(tpl_ctx *c, const node *at, tpl_macro *m, const tpl_args *a, tv caller,
                          tv *out) {
    const param_list *ps = m->params;
    if (a->npos > ps->len)
        return tpl_fail(c, at, LMC_ERR_FORMAT, "macro '%s' takes not more than %zu argument(s)",
                        m->name, ps->len);
    if (c->macro_depth >= c->opts.max_depth)
        return tpl_fail(c, at, LMC_ERR_LIMIT, "macro recursion deeper than %d", c->opts.max_depth);
    lmc_status st;
    scope *saved = c->scope;
    if (!(c->scope = push_scope(c, m->closure))) return tpl_nomem(c);
    for (size_t k = 0; k < a->nkw && (st = LMC_OK) == LMC_OK; k++) {
        bool known = !strcmp(a->kw_names[k], "caller");
        for (size_t i = 0; i < ps->len && !known; i++)
            known = !strcmp(ps->names[i], a->kw_names[k]);
        if (!known) {
            c->scope = saved;
            return tpl_fail(c, at, LMC_ERR_FORMAT,
                            "macro '%s' was invoked with unknown keyword argument '%s'", m->name,
                            a->kw_names[k]);
        }
    }
    for (size_t i = 0; i < ps->len; i++) {
        tv v = tv_undefined(NULL);
        bool have = false;
        if (i < a->npos) {
            v = a->pos[i];
            have = true;
        }
        for (size_t k = 0; k < a->nkw; k++)
            if (!strcmp(a->kw_names[k], ps->names[i])) {
                v = a->kw[k];
                have = true;
            }
        if (!have && ps->defaults[i]) {
            if ((st = eval(c, ps->defaults[i], &v)) != LMC_OK) goto done;
        } else if (!have) {
            char *msg = tpl_alloc(c->arena, strlen(ps->names[i]) + 64);
            if (!msg) {
                st = tpl_nomem(c);
                goto done;
            }
            sprintf(msg, "'%s' is undefined", ps->names[i]);
            v = tv_undefined(msg);
        }
        if ((st = assign(c, ps->names[i], v)) != LMC_OK) goto done;
    }
    if (caller.type == TV_MACRO && (st = assign(c, "caller", caller)) != LMC_OK) goto done;
    c->macro_depth++;
    int saved_loops = c->loop_depth;
    st = capture(c, m->body, out);
    c->loop_depth = saved_loops;
    c->flow = FLOW_NORMAL;
    c->macro_depth--;
done:
    c->scope = saved;
    return st;
}

static lmc_status exec_call_block(tpl_ctx *c, const node *n) {
    const node *call = n->u.call_block.call;
    tv fn, caller, result;
    lmc_status st = eval(c, call->u.call.fn, &fn);
    if (st != LMC_OK) return st;
    tpl_args a;
    if ((st = eval_args(c, &call->u.call.args, &a)) != LMC_OK) return st;
    if (fn.type != TV_MACRO)
        return tpl_fail(c, n, LMC_ERR_FORMAT, "call block needs a macro, not '%s'",
                        tv_type_name(fn));
    if ((st = make_macro(c, "caller", &n->u.call_block.params, n->u.call_block.body, &caller)) !=
        LMC_OK)
        return st;
    if ((st = tpl_call_macro(c, n, fn.u.macro, &a, caller, &result)) != LMC_OK) return st;
    return tpl_buf_append(c->out, result.u.s->data, result.u.s->len);
}

static lmc_status apply_block_filters(tpl_ctx *c, const node *filters, tv text, tv *out) {
    if (!filters) {
        *out = text;
        return LMC_OK;
    }
    tv saved = c->filter_input;
    c->filter_input = text;
    lmc_status st = eval(c, filters, out);
    c->filter_input = saved;
    return st;
}

static lmc_status exec(tpl_ctx *c, const node *n) {
    lmc_status st = tpl_step(c, n);
    if (st != LMC_OK) return st;
    tv v;
    switch (n->kind) {
    case N_BODY:
        return exec_body(c, n);
    case N_TEXT:
        return locate(c, n, tpl_buf_append(c->out, n->u.text.text, n->u.text.len));
    case N_OUTPUT:
        if ((st = eval(c, n->u.expr, &v)) != LMC_OK) return st;
        return locate(c, n, tv_to_str(v, c->out));
    case N_IF:
        for (size_t i = 0; i < n->u.if_.conds.len; i++) {
            if ((st = eval(c, n->u.if_.conds.items[i], &v)) != LMC_OK) return st;
            if (tv_truthy(v)) return exec_body(c, n->u.if_.bodies.items[i]);
        }
        if (n->u.if_.else_body) return exec_body(c, n->u.if_.else_body);
        return LMC_OK;
    case N_FOR:
        return exec_for(c, n);
    case N_SET:
        if ((st = eval(c, n->u.set.value, &v)) != LMC_OK) return st;
        return assign_target(c, n->u.set.target, v);
    case N_SET_BLOCK:
        if ((st = capture(c, n->u.set_block.body, &v)) != LMC_OK) return st;
        if ((st = apply_block_filters(c, n->u.set_block.filters, v, &v)) != LMC_OK) return st;
        return assign_target(c, n->u.set_block.target, v);
    case N_MACRO:
        if ((st = make_macro(c, n->u.macro.name, &n->u.macro.params, n->u.macro.body, &v)) !=
            LMC_OK)
            return st;
        return assign(c, n->u.macro.name, v);
    case N_CALL_BLOCK:
        return exec_call_block(c, n);
    case N_FILTER_BLOCK:
        if ((st = capture(c, n->u.filter_block.body, &v)) != LMC_OK) return st;
        if ((st = apply_block_filters(c, n->u.filter_block.filters, v, &v)) != LMC_OK) return st;
        return locate(c, n, tv_to_str(v, c->out));
    case N_BREAK:
    case N_CONTINUE:
        if (c->loop_depth == 0)
            return tpl_fail(c, n, LMC_ERR_FORMAT, "loop control outside of a loop");
        c->flow = n->kind == N_BREAK ? FLOW_BREAK : FLOW_CONTINUE;
        return LMC_OK;
    default:
        return tpl_fail(c, n, LMC_ERR_FORMAT, "expression used as a statement");
    }
}

/* ---- entry points --------------------------------------------------------- */

void tpl_options_default(tpl_options *o) {
    memset(o, 0, sizeof *o);
    o->max_output = (size_t)16 << 20;
    o->max_memory = (size_t)512 << 20;
    o->max_steps = 5000000;
    o->max_depth = 64;
}

lmc_status tpl_compile(const char *source, size_t len, lmc_template **out) {
    *out = NULL;
    if (!source && len) return lmc_error(LMC_ERR_INVALID_ARG, "template source is NULL");
    if (len > ((size_t)1 << 31)) return lmc_error(LMC_ERR_LIMIT, "template larger than 2 GiB");
    lmc_template *t = calloc(1, sizeof *t);
    if (!t) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    tpl_arena_init(&t->arena, 0);
    tpl_token *toks;
    size_t n;
    lmc_status st = tpl_lex(&t->arena, source ? source : "", len, &t->src, &toks, &n);
    if (st == LMC_OK) st = tpl_parse(t, toks, n);
    if (st != LMC_OK) {
        tpl_free(t);
        return st;
    }
    *out = t;
    return LMC_OK;
}

void tpl_free(lmc_template *t) {
    if (!t) return;
    tpl_arena_free(&t->arena);
    free(t);
}

lmc_status tpl_render(const lmc_template *t, const json_t *vars, const tpl_options *opts,
                      char **out, size_t *len) {
    *out = NULL;
    if (len) *len = 0;
    if (vars && !json_is_object(vars))
        return lmc_error(LMC_ERR_INVALID_ARG, "template variables must be a JSON object");
    tpl_arena arena;
    tpl_ctx c = {0};
    if (opts)
        c.opts = *opts;
    else
        tpl_options_default(&c.opts);
    tpl_arena_init(&arena, c.opts.max_memory);
    c.arena = &arena;
    c.src = &t->src;
    tpl_buf buf;
    tpl_buf_init(&buf, &arena, c.opts.max_output);
    c.out = &buf;
    lmc_status st = LMC_OK;
    scope *globals = push_scope(&c, NULL);
    if (!globals) st = tpl_nomem(&c);
    if (st == LMC_OK && vars) {
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)vars, key, val) {
            tv k, v;
            if (!tv_make_str(&arena, key, strlen(key), &k)) st = tpl_nomem(&c);
            if (st == LMC_OK) st = tv_from_json(&arena, val, &v);
            if (st == LMC_OK && !tv_dict_set(&arena, &globals->vars, k, v)) st = tpl_nomem(&c);
            if (st != LMC_OK) break;
        }
    }
    if (st == LMC_OK && !(c.scope = push_scope(&c, globals))) st = tpl_nomem(&c);
    if (st == LMC_OK) st = tpl_buf_append(&buf, "", 0);
    if (st == LMC_OK) st = exec_body(&c, t->root);
    if (st == LMC_OK) {
        *out = malloc(buf.len + 1);
        if (!*out)
            st = lmc_error(LMC_ERR_NOMEM, "out of memory");
        else {
            memcpy(*out, buf.data, buf.len + 1);
            if (len) *len = buf.len;
        }
    }
    tpl_arena_free(&arena);
    return st;
}
