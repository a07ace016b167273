/* Expression parser: jinja2's grammar and precedence (jinja2/parser.py,
 * 3.1): conditional < or < and < not < comparisons (chained, `in`,
 * `not in`) < + - < ~ < * / // % < ** < unary -/+ ; filters, tests and
 * postfix operations bind tightest, so `'a' + x | trim` is `'a' + (x | trim)`. */
#include "template/parser.h"

static lmc_status parse_unary(parser *p, bool with_filter, node **out);
static lmc_status parse_or(parser *p, node **out);

/* ---- expressions ----------------------------------------------------------- */

lmc_status tpl_parse_call_args(parser *p, call_args *args) {
    TRY(expect_op(p, "("));
    size_t nkw = 0, kwcap = 0;
    while (!is_op(p, ")")) {
        if (args->pos.len + nkw > 0) TRY(expect_op(p, ","));
        if (is_op(p, ")")) break; /* trailing comma */
        if (is_op(p, "*") || is_op(p, "**"))
            return tpl_fail_at(&p->t->src, cur(p)->pos, LMC_ERR_UNSUPPORTED,
                               "*args and **kwargs in calls are not supported");
        if (cur(p)->type == TOK_NAME && tok_is(peek(p, 1), TOK_OP, "=")) {
            const char *name = tok_str(p, cur(p));
            if (!name) return tpl_arena_status(&p->t->arena);
            advance(p);
            advance(p);
            node *v = NULL;
            TRY(tpl_parse_expr(p, true, &v));
            if (nkw == kwcap) {
                kwcap = kwcap ? kwcap * 2 : 4;
                const char **names = tpl_alloc(&p->t->arena, kwcap * sizeof *names);
                if (!names) return tpl_arena_status(&p->t->arena);
                if (nkw) memcpy(names, args->kw_names, nkw * sizeof *names);
                args->kw_names = names;
            }
            args->kw_names[nkw++] = name;
            TRY(list_push(p, &args->kw_values, v));
        } else {
            if (nkw)
                return tpl_fail_at(&p->t->src, cur(p)->pos, LMC_ERR_FORMAT,
                                   "positional argument follows keyword argument");
            node *v = NULL;
            TRY(tpl_parse_expr(p, true, &v));
            TRY(list_push(p, &args->pos, v));
        }
    }
    advance(p);
    return LMC_OK;
}

static lmc_status parse_subscript(parser *p, node **out) {
    uint32_t pos = cur(p)->pos;
    node *parts[3] = {NULL, NULL, NULL};
    int k = 0;
    bool slice = false;
    while (!is_op(p, "]")) {
        if (is_op(p, ":")) {
            if (k == 2) return fail_tok(p, cur(p), "']'");
            slice = true;
            k++;
            advance(p);
            continue;
        }
        if (parts[k]) return fail_tok(p, cur(p), "':' or ']'");
        TRY(tpl_parse_expr(p, true, &parts[k]));
    }
    if (!slice) {
        if (!parts[0]) return fail_tok(p, cur(p), "an expression");
        *out = parts[0];
        return LMC_OK;
    }
    node *n = NULL;
    TRY(new_node(p, N_SLICE, pos, &n));
    n->u.slice.start = parts[0];
    n->u.slice.stop = parts[1];
    n->u.slice.step = parts[2];
    *out = n;
    return LMC_OK;
}

static lmc_status parse_postfix(parser *p, node *n, node **out) {
    for (;;) {
        uint32_t pos = cur(p)->pos;
        if (is_op(p, ".")) {
            advance(p);
            const tpl_token *t = cur(p);
            node *g = NULL;
            if (t->type == TOK_NAME) {
                TRY(new_node(p, N_GETATTR, pos, &g));
                g->u.getattr.obj = n;
                if (!(g->u.getattr.attr = tok_str(p, t))) return tpl_arena_status(&p->t->arena);
            } else if (t->type == TOK_INT) {
                node *idx = NULL;
                TRY(new_node(p, N_LITERAL, t->pos, &idx));
                idx->u.literal = tv_int(t->ival);
                TRY(new_node(p, N_GETITEM, pos, &g));
                g->u.getitem.obj = n;
                g->u.getitem.index = idx;
            } else {
                return fail_tok(p, t, "an attribute name");
            }
            advance(p);
            n = g;
        } else if (is_op(p, "[")) {
            advance(p);
            node *g = NULL;
            TRY(new_node(p, N_GETITEM, pos, &g));
            g->u.getitem.obj = n;
            TRY(parse_subscript(p, &g->u.getitem.index));
            TRY(expect_op(p, "]"));
            n = g;
        } else if (is_op(p, "(")) {
            node *c = NULL;
            TRY(new_node(p, N_CALL, pos, &c));
            c->u.call.fn = n;
            TRY(tpl_parse_call_args(p, &c->u.call.args));
            n = c;
        } else {
            break;
        }
    }
    *out = n;
    return LMC_OK;
}

static lmc_status parse_primary(parser *p, node **out) {
    const tpl_token *t = cur(p);
    node *n = NULL;
    TRY(enter(p));
    switch (t->type) {
    case TOK_NAME: {
        static const struct {
            const char *name;
            int v;
        } consts[] = {{"true", 1},  {"True", 1}, {"false", 0},
                      {"False", 0}, {"none", 2}, {"None", 2}};
        TRY(new_node(p, N_LITERAL, t->pos, &n));
        bool found = false;
        for (size_t k = 0; k < 6; k++)
            if (tok_is(t, TOK_NAME, consts[k].name)) {
                n->u.literal = consts[k].v == 2 ? tv_none() : tv_bool(consts[k].v);
                found = true;
            }
        if (!found) {
            n->kind = N_NAME;
            if (!(n->u.name = tok_str(p, t))) return tpl_arena_status(&p->t->arena);
        }
        advance(p);
        break;
    }
    case TOK_STRING: {
        /* Adjacent string literals concatenate, as in jinja2. */
        tpl_buf b;
        tpl_buf_init(&b, &p->t->arena, 0);
        uint32_t pos = t->pos;
        TRY(tpl_buf_append(&b, "", 0));
        while (cur(p)->type == TOK_STRING) {
            TRY(tpl_buf_append(&b, cur(p)->text, cur(p)->len));
            advance(p);
        }
        TRY(new_node(p, N_LITERAL, pos, &n));
        if (!tv_make_str(&p->t->arena, b.data, b.len, &n->u.literal))
            return tpl_arena_status(&p->t->arena);
        break;
    }
    case TOK_INT:
    case TOK_FLOAT:
        TRY(new_node(p, N_LITERAL, t->pos, &n));
        n->u.literal = t->type == TOK_INT ? tv_int(t->ival) : tv_float(t->fval);
        advance(p);
        break;
    case TOK_OP:
        if (is_op(p, "(")) {
            advance(p);
            if (is_op(p, ")")) { /* empty tuple */
                TRY(new_node(p, N_TUPLE, t->pos, &n));
                advance(p);
                break;
            }
            node *first = NULL;
            TRY(tpl_parse_expr(p, true, &first));
            if (is_op(p, ",")) {
                TRY(new_node(p, N_TUPLE, t->pos, &n));
                TRY(list_push(p, &n->u.items, first));
                while (is_op(p, ",")) {
                    advance(p);
                    if (is_op(p, ")")) break;
                    node *e = NULL;
                    TRY(tpl_parse_expr(p, true, &e));
                    TRY(list_push(p, &n->u.items, e));
                }
            } else {
                n = first;
            }
            TRY(expect_op(p, ")"));
        } else if (is_op(p, "[")) {
            advance(p);
            TRY(new_node(p, N_LIST, t->pos, &n));
            while (!is_op(p, "]")) {
                if (n->u.items.len) TRY(expect_op(p, ","));
                if (is_op(p, "]")) break;
                node *e = NULL;
                TRY(tpl_parse_expr(p, true, &e));
                TRY(list_push(p, &n->u.items, e));
            }
            advance(p);
        } else if (is_op(p, "{")) {
            advance(p);
            TRY(new_node(p, N_DICT, t->pos, &n));
            while (!is_op(p, "}")) {
                if (n->u.dict.keys.len) TRY(expect_op(p, ","));
                if (is_op(p, "}")) break;
                node *k = NULL, *v = NULL;
                TRY(tpl_parse_expr(p, true, &k));
                TRY(expect_op(p, ":"));
                TRY(tpl_parse_expr(p, true, &v));
                TRY(list_push(p, &n->u.dict.keys, k));
                TRY(list_push(p, &n->u.dict.values, v));
            }
            advance(p);
        } else {
            return fail_tok(p, t, "an expression");
        }
        break;
    default:
        return fail_tok(p, t, "an expression");
    }
    p->depth--;
    *out = n;
    return LMC_OK;
}

lmc_status tpl_parse_filter_name(parser *p, node *arg, node_kind kind, node **out) {
    const tpl_token *t = cur(p);
    if (t->type != TOK_NAME)
        return fail_tok(p, t, kind == N_FILTER ? "a filter name" : "a test name");
    node *f = NULL;
    TRY(new_node(p, kind, t->pos, &f));
    f->u.filter.arg = arg;
    if (!(f->u.filter.name = tok_str(p, t))) return tpl_arena_status(&p->t->arena);
    advance(p);
    *out = f;
    return LMC_OK;
}

lmc_status tpl_parse_filter(parser *p, node *arg, node **out) {
    advance(p); /* '|' */
    node *f = NULL;
    TRY(tpl_parse_filter_name(p, arg, N_FILTER, &f));
    if (is_op(p, "(")) TRY(tpl_parse_call_args(p, &f->u.filter.args));
    *out = f;
    return LMC_OK;
}

static lmc_status parse_test(parser *p, node *arg, node **out) {
    advance(p); /* 'is' */
    bool negate = false;
    if (is_name(p, "not")) {
        negate = true;
        advance(p);
    }
    node *f = NULL;
    TRY(tpl_parse_filter_name(p, arg, N_TEST, &f));
    f->u.filter.negate = negate;
    const tpl_token *t = cur(p);
    if (is_op(p, "(")) {
        TRY(tpl_parse_call_args(p, &f->u.filter.args));
    } else if ((t->type == TOK_NAME || t->type == TOK_STRING || t->type == TOK_INT ||
                t->type == TOK_FLOAT || is_op(p, "[") || is_op(p, "{")) &&
               !is_name(p, "else") && !is_name(p, "or") && !is_name(p, "and")) {
        /* `x is divisibleby 3`, `x is sameas none`: one argument, no parens. */
        if (is_name(p, "is"))
            return tpl_fail_at(&p->t->src, t->pos, LMC_ERR_FORMAT,
                               "You cannot chain multiple tests with is");
        node *a = NULL;
        TRY(parse_primary(p, &a));
        TRY(parse_postfix(p, a, &a));
        TRY(list_push(p, &f->u.filter.args.pos, a));
    }
    *out = f;
    return LMC_OK;
}

static lmc_status parse_filter_expr(parser *p, node *n, node **out) {
    for (;;) {
        if (is_op(p, "|")) {
            TRY(tpl_parse_filter(p, n, &n));
        } else if (is_name(p, "is")) {
            TRY(parse_test(p, n, &n));
        } else if (is_op(p, "(")) {
            node *c = NULL;
            TRY(new_node(p, N_CALL, cur(p)->pos, &c));
            c->u.call.fn = n;
            TRY(tpl_parse_call_args(p, &c->u.call.args));
            n = c;
        } else {
            break;
        }
    }
    *out = n;
    return LMC_OK;
}

static lmc_status parse_unary(parser *p, bool with_filter, node **out) {
    node *n = NULL;
    uint32_t pos = cur(p)->pos;
    TRY(enter(p));
    if (is_op(p, "-") || is_op(p, "+")) {
        bool neg = is_op(p, "-");
        advance(p);
        node *inner = NULL;
        TRY(parse_unary(p, false, &inner));
        TRY(new_node(p, neg ? N_NEG : N_POS, pos, &n));
        n->u.operand = inner;
    } else {
        TRY(parse_primary(p, &n));
    }
    TRY(parse_postfix(p, n, &n));
    if (with_filter) TRY(parse_filter_expr(p, n, &n));
    p->depth--;
    *out = n;
    return LMC_OK;
}

static lmc_status make_binary(parser *p, bin_op op, uint32_t pos, node *a, node *b, node **out) {
    node *n = NULL;
    TRY(new_node(p, N_BINARY, pos, &n));
    n->u.binary.op = op;
    n->u.binary.a = a;
    n->u.binary.b = b;
    *out = n;
    return LMC_OK;
}

static lmc_status parse_pow(parser *p, node **out) {
    node *n = NULL;
    TRY(parse_unary(p, true, &n));
    while (is_op(p, "**")) {
        uint32_t pos = cur(p)->pos;
        advance(p);
        node *r = NULL;
        TRY(parse_unary(p, true, &r));
        TRY(make_binary(p, OP_POW, pos, n, r, &n));
    }
    *out = n;
    return LMC_OK;
}

static lmc_status parse_math2(parser *p, node **out) {
    node *n = NULL;
    TRY(parse_pow(p, &n));
    for (;;) {
        bin_op op;
        if (is_op(p, "*"))
            op = OP_MUL;
        else if (is_op(p, "/"))
            op = OP_DIV;
        else if (is_op(p, "//"))
            op = OP_FLOORDIV;
        else if (is_op(p, "%"))
            op = OP_MOD;
        else
            break;
        uint32_t pos = cur(p)->pos;
        advance(p);
        node *r = NULL;
        TRY(parse_pow(p, &r));
        TRY(make_binary(p, op, pos, n, r, &n));
    }
    *out = n;
    return LMC_OK;
}

static lmc_status parse_concat(parser *p, node **out) {
    node *n = NULL;
    TRY(parse_math2(p, &n));
    while (is_op(p, "~")) {
        uint32_t pos = cur(p)->pos;
        advance(p);
        node *r = NULL;
        TRY(parse_math2(p, &r));
        TRY(make_binary(p, OP_CONCAT, pos, n, r, &n));
    }
    *out = n;
    return LMC_OK;
}

static lmc_status parse_math1(parser *p, node **out) {
    node *n = NULL;
    TRY(parse_concat(p, &n));
    while (is_op(p, "+") || is_op(p, "-")) {
        bin_op op = is_op(p, "+") ? OP_ADD : OP_SUB;
        uint32_t pos = cur(p)->pos;
        advance(p);
        node *r = NULL;
        TRY(parse_concat(p, &r));
        TRY(make_binary(p, op, pos, n, r, &n));
    }
    *out = n;
    return LMC_OK;
}

static lmc_status parse_compare(parser *p, node **out) {
    node *first = NULL;
    uint32_t pos = cur(p)->pos;
    TRY(parse_math1(p, &first));
    node *cmp = NULL;
    size_t cap = 0;
    for (;;) {
        cmp_op op;
        static const struct {
            const char *text;
            cmp_op op;
        } ops[] = {{"==", CMP_EQ}, {"!=", CMP_NE}, {"<", CMP_LT},
                   {"<=", CMP_LE}, {">", CMP_GT},  {">=", CMP_GE}};
        bool found = false;
        for (size_t k = 0; k < 6; k++)
            if (is_op(p, ops[k].text)) {
                op = ops[k].op;
                found = true;
                advance(p);
            }
        if (!found) {
            if (is_name(p, "in")) {
                op = CMP_IN;
                advance(p);
            } else if (is_name(p, "not") && tok_is(peek(p, 1), TOK_NAME, "in")) {
                op = CMP_NOTIN;
                advance(p);
                advance(p);
            } else {
                break;
            }
        }
        node *r = NULL;
        TRY(parse_math1(p, &r));
        if (!cmp) {
            TRY(new_node(p, N_COMPARE, pos, &cmp));
            cmp->u.compare.first = first;
        }
        if (cmp->u.compare.rest.len == cap) {
            cap = cap ? cap * 2 : 2;
            cmp_op *o = tpl_alloc(&p->t->arena, cap * sizeof *o);
            if (!o) return tpl_arena_status(&p->t->arena);
            if (cmp->u.compare.rest.len)
                memcpy(o, cmp->u.compare.ops, cmp->u.compare.rest.len * sizeof *o);
            cmp->u.compare.ops = o;
        }
        cmp->u.compare.ops[cmp->u.compare.rest.len] = op;
        TRY(list_push(p, &cmp->u.compare.rest, r));
    }
    *out = cmp ? cmp : first;
    return LMC_OK;
}

static lmc_status parse_not(parser *p, node **out) {
    if (is_name(p, "not")) {
        uint32_t pos = cur(p)->pos;
        advance(p);
        TRY(enter(p));
        node *inner = NULL, *n = NULL;
        TRY(parse_not(p, &inner));
        p->depth--;
        TRY(new_node(p, N_NOT, pos, &n));
        n->u.operand = inner;
        *out = n;
        return LMC_OK;
    }
    return parse_compare(p, out);
}

/* A left-associative chain `x word y word z` of the logic node `kind`. */
static lmc_status parse_logic_chain(parser *p, node **out, const char *word, node_kind kind,
                                    lmc_status (*next)(parser *, node **)) {
    node *n = NULL;
    TRY(next(p, &n));
    while (is_name(p, word)) {
        uint32_t pos = cur(p)->pos;
        advance(p);
        node *r = NULL, *a = NULL;
        TRY(next(p, &r));
        TRY(new_node(p, kind, pos, &a));
        a->u.logic.a = n;
        a->u.logic.b = r;
        n = a;
    }
    *out = n;
    return LMC_OK;
}

static lmc_status parse_and(parser *p, node **out) {
    return parse_logic_chain(p, out, "and", N_AND, parse_not);
}

static lmc_status parse_or(parser *p, node **out) {
    return parse_logic_chain(p, out, "or", N_OR, parse_and);
}

/* `a if cond else b`; without `else` the value is undefined (jinja2). */
lmc_status tpl_parse_expr(parser *p, bool with_cond, node **out) {
    TRY(enter(p));
    node *n = NULL;
    TRY(parse_or(p, &n));
    while (with_cond && is_name(p, "if")) {
        uint32_t pos = cur(p)->pos;
        advance(p);
        node *c = NULL;
        TRY(new_node(p, N_COND, pos, &c));
        c->u.cond.then = n;
        TRY(parse_or(p, &c->u.cond.cond));
        if (is_name(p, "else")) {
            advance(p);
            TRY(tpl_parse_expr(p, true, &c->u.cond.otherwise));
        }
        n = c;
    }
    p->depth--;
    *out = n;
    return LMC_OK;
}

/* An expression or a bare tuple `a, b` (print statements, set values). */
lmc_status tpl_parse_tuple(parser *p, bool with_cond, node **out) {
    uint32_t pos = cur(p)->pos;
    node *first = NULL;
    TRY(tpl_parse_expr(p, with_cond, &first));
    if (!is_op(p, ",")) {
        *out = first;
        return LMC_OK;
    }
    node *t = NULL;
    TRY(new_node(p, N_TUPLE, pos, &t));
    TRY(list_push(p, &t->u.items, first));
    while (is_op(p, ",")) {
        advance(p);
        const tpl_token *c = cur(p);
        if (c->type == TOK_BLOCK_END || c->type == TOK_VAR_END || is_op(p, ")") || is_op(p, "=") ||
            is_name(p, "in"))
            break;
        node *e = NULL;
        TRY(tpl_parse_expr(p, with_cond, &e));
        TRY(list_push(p, &t->u.items, e));
    }
    *out = t;
    return LMC_OK;
}
