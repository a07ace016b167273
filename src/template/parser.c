/* Statement parser: tokens to a syntax tree (jinja2/parser.py, 3.1):
 * if/elif/else, for (targets, `if` filter, else), set (name, tuple,
 * namespace attribute, block form with filters), macro, call, filter,
 * generation (transformers' AssistantTracker tag), break/continue. */
#include "template/parser.h"

/* ---- statements ---------------------------------------------------------- */

static lmc_status parse_body(parser *p, const char *const *ends, node **out);

static lmc_status expect_block_end(parser *p) {
    if (cur(p)->type != TOK_BLOCK_END) return fail_tok(p, cur(p), "end of statement block");
    advance(p);
    return LMC_OK;
}

/* Consumes `{% name` where name is one of the end tags parse_body stopped at. */
static lmc_status end_tag(parser *p, const char *name) {
    if (!is_name(p, name)) return fail_tok(p, cur(p), name);
    advance(p);
    return LMC_OK;
}

static lmc_status parse_name_target(parser *p, node **out) {
    const tpl_token *t = cur(p);
    if (t->type != TOK_NAME) return fail_tok(p, t, "a name");
    node *n = NULL;
    TRY(new_node(p, N_NAME, t->pos, &n));
    if (!(n->u.name = tok_str(p, t))) return tpl_arena_status(&p->t->arena);
    advance(p);
    *out = n;
    return LMC_OK;
}

/* for/set targets: `x`, `a, b`, `(a, b)`; with allow_attr also `ns.attr`. */
static lmc_status parse_target(parser *p, bool allow_attr, node **out) {
    uint32_t pos = cur(p)->pos;
    bool paren = is_op(p, "(");
    if (paren) advance(p);
    node *first = NULL;
    TRY(parse_name_target(p, &first));
    if (allow_attr && !paren && is_op(p, ".")) {
        advance(p);
        const tpl_token *t = cur(p);
        if (t->type != TOK_NAME) return fail_tok(p, t, "an attribute name");
        node *g = NULL;
        TRY(new_node(p, N_GETATTR, pos, &g));
        g->u.getattr.obj = first;
        if (!(g->u.getattr.attr = tok_str(p, t))) return tpl_arena_status(&p->t->arena);
        advance(p);
        *out = g;
        return LMC_OK;
    }
    if (!is_op(p, ",")) {
        if (paren) TRY(expect_op(p, ")"));
        *out = first;
        return LMC_OK;
    }
    node *t = NULL;
    TRY(new_node(p, N_TUPLE, pos, &t));
    TRY(list_push(p, &t->u.items, first));
    while (is_op(p, ",")) {
        advance(p);
        if (cur(p)->type != TOK_NAME) break;
        node *e = NULL;
        TRY(parse_name_target(p, &e));
        TRY(list_push(p, &t->u.items, e));
    }
    if (paren) TRY(expect_op(p, ")"));
    *out = t;
    return LMC_OK;
}

static lmc_status parse_params(parser *p, param_list *params) {
    TRY(expect_op(p, "("));
    size_t cap = 0;
    while (!is_op(p, ")")) {
        if (params->len) TRY(expect_op(p, ","));
        if (is_op(p, ")")) break;
        const tpl_token *t = cur(p);
        if (t->type != TOK_NAME) return fail_tok(p, t, "a parameter name");
        if (params->len == cap) {
            cap = cap ? cap * 2 : 4;
            const char **names = tpl_alloc(&p->t->arena, cap * sizeof *names);
            node **defs = tpl_alloc(&p->t->arena, cap * sizeof *defs);
            if (!names || !defs) return tpl_arena_status(&p->t->arena);
            if (params->len) {
                memcpy(names, params->names, params->len * sizeof *names);
                memcpy(defs, params->defaults, params->len * sizeof *defs);
            }
            params->names = names;
            params->defaults = defs;
        }
        if (!(params->names[params->len] = tok_str(p, t))) return tpl_arena_status(&p->t->arena);
        advance(p);
        params->defaults[params->len] = NULL;
        if (is_op(p, "=")) {
            advance(p);
            TRY(tpl_parse_expr(p, true, &params->defaults[params->len]));
        } else if (params->len && params->defaults[params->len - 1]) {
            return tpl_fail_at(&p->t->src, t->pos, LMC_ERR_FORMAT,
                               "parameter without a default follows one with a default");
        }
        params->len++;
    }
    advance(p);
    return LMC_OK;
}

/* Filters of `{% filter f | g %}` / `{% set x | f %}`: a chain of N_FILTER
 * whose innermost argument is NULL (the block's output goes there). */
static lmc_status parse_filter_chain(parser *p, node **out) {
    node *n = NULL;
    TRY(tpl_parse_filter_name(p, NULL, N_FILTER, &n));
    if (is_op(p, "(")) TRY(tpl_parse_call_args(p, &n->u.filter.args));
    while (is_op(p, "|")) TRY(tpl_parse_filter(p, n, &n));
    *out = n;
    return LMC_OK;
}

static lmc_status parse_statement(parser *p, node **out) {
    const tpl_token *t = cur(p);
    uint32_t pos = t->pos;
    node *n = NULL;
    if (t->type != TOK_NAME) return fail_tok(p, t, "a statement name");
    if (is_name(p, "if")) {
        advance(p);
        TRY(new_node(p, N_IF, pos, &n));
        for (;;) {
            node *c = NULL, *body = NULL;
            TRY(tpl_parse_tuple(p, true, &c));
            TRY(expect_block_end(p));
            static const char *const ends[] = {"elif", "else", "endif", NULL};
            TRY(parse_body(p, ends, &body));
            TRY(list_push(p, &n->u.if_.conds, c));
            TRY(list_push(p, &n->u.if_.bodies, body));
            if (is_name(p, "elif")) {
                advance(p);
                continue;
            }
            if (is_name(p, "else")) {
                advance(p);
                TRY(expect_block_end(p));
                static const char *const ends2[] = {"endif", NULL};
                TRY(parse_body(p, ends2, &n->u.if_.else_body));
            }
            TRY(end_tag(p, "endif"));
            break;
        }
    } else if (is_name(p, "for")) {
        advance(p);
        TRY(new_node(p, N_FOR, pos, &n));
        TRY(parse_target(p, false, &n->u.for_.target));
        if (!is_name(p, "in")) return fail_tok(p, cur(p), "'in'");
        advance(p);
        TRY(tpl_parse_tuple(p, false, &n->u.for_.iter));
        if (is_name(p, "if")) {
            advance(p);
            TRY(tpl_parse_expr(p, true, &n->u.for_.filter));
        }
        if (is_name(p, "recursive"))
            return tpl_fail_at(&p->t->src, cur(p)->pos, LMC_ERR_UNSUPPORTED,
                               "recursive for loops are not supported");
        TRY(expect_block_end(p));
        static const char *const ends[] = {"else", "endfor", NULL};
        p->loop_depth++;
        TRY(parse_body(p, ends, &n->u.for_.body));
        p->loop_depth--;
        if (is_name(p, "else")) {
            advance(p);
            TRY(expect_block_end(p));
            static const char *const ends2[] = {"endfor", NULL};
            TRY(parse_body(p, ends2, &n->u.for_.else_body));
        }
        TRY(end_tag(p, "endfor"));
    } else if (is_name(p, "set")) {
        advance(p);
        node *target = NULL;
        TRY(parse_target(p, true, &target));
        if (is_op(p, "=")) {
            advance(p);
            TRY(new_node(p, N_SET, pos, &n));
            n->u.set.target = target;
            TRY(tpl_parse_tuple(p, true, &n->u.set.value));
        } else {
            TRY(new_node(p, N_SET_BLOCK, pos, &n));
            n->u.set_block.target = target;
            if (is_op(p, "|")) {
                advance(p);
                TRY(parse_filter_chain(p, &n->u.set_block.filters));
            }
            TRY(expect_block_end(p));
            static const char *const ends[] = {"endset", NULL};
            TRY(parse_body(p, ends, &n->u.set_block.body));
            TRY(end_tag(p, "endset"));
        }
    } else if (is_name(p, "macro")) {
        advance(p);
        TRY(new_node(p, N_MACRO, pos, &n));
        if (cur(p)->type != TOK_NAME) return fail_tok(p, cur(p), "a macro name");
        if (!(n->u.macro.name = tok_str(p, cur(p)))) return tpl_arena_status(&p->t->arena);
        advance(p);
        TRY(parse_params(p, &n->u.macro.params));
        TRY(expect_block_end(p));
        static const char *const ends[] = {"endmacro", NULL};
        int saved = p->loop_depth;
        p->loop_depth = 0;
        TRY(parse_body(p, ends, &n->u.macro.body));
        p->loop_depth = saved;
        TRY(end_tag(p, "endmacro"));
        if (cur(p)->type == TOK_NAME) advance(p); /* {% endmacro name %} */
    } else if (is_name(p, "call")) {
        advance(p);
        TRY(new_node(p, N_CALL_BLOCK, pos, &n));
        if (is_op(p, "(")) TRY(parse_params(p, &n->u.call_block.params));
        TRY(tpl_parse_expr(p, true, &n->u.call_block.call));
        if (n->u.call_block.call->kind != N_CALL)
            return tpl_fail_at(&p->t->src, pos, LMC_ERR_FORMAT, "expected a call after 'call'");
        TRY(expect_block_end(p));
        static const char *const ends[] = {"endcall", NULL};
        TRY(parse_body(p, ends, &n->u.call_block.body));
        TRY(end_tag(p, "endcall"));
    } else if (is_name(p, "filter")) {
        advance(p);
        TRY(new_node(p, N_FILTER_BLOCK, pos, &n));
        TRY(parse_filter_chain(p, &n->u.filter_block.filters));
        TRY(expect_block_end(p));
        static const char *const ends[] = {"endfilter", NULL};
        TRY(parse_body(p, ends, &n->u.filter_block.body));
        TRY(end_tag(p, "endfilter"));
    } else if (is_name(p, "generation")) {
        /* transformers' AssistantTracker: renders its body unchanged. */
        advance(p);
        TRY(expect_block_end(p));
        static const char *const ends[] = {"endgeneration", NULL};
        TRY(parse_body(p, ends, &n));
        TRY(end_tag(p, "endgeneration"));
    } else if (is_name(p, "break") || is_name(p, "continue")) {
        if (p->loop_depth == 0)
            return tpl_fail_at(&p->t->src, pos, LMC_ERR_FORMAT, "'%.*s' outside of a loop",
                               (int)t->len, t->text);
        TRY(new_node(p, is_name(p, "break") ? N_BREAK : N_CONTINUE, pos, &n));
        advance(p);
    } else {
        return tpl_fail_at(&p->t->src, pos, LMC_ERR_FORMAT, "unknown or unsupported tag '%.*s'",
                           (int)(t->len > 40 ? 40 : t->len), t->text);
    }
    TRY(expect_block_end(p));
    *out = n;
    return LMC_OK;
}

/* Parses statements until EOF (ends == NULL) or a block whose name is in
 * ends, leaving the parser on that name. */
static lmc_status parse_body(parser *p, const char *const *ends, node **out) {
    node *body = NULL;
    TRY(new_node(p, N_BODY, cur(p)->pos, &body));
    if (++p->depth > MAX_NESTING)
        return tpl_fail_at(&p->t->src, cur(p)->pos, LMC_ERR_LIMIT,
                           "blocks nested deeper than %d levels", MAX_NESTING);
    for (;;) {
        const tpl_token *t = cur(p);
        node *n = NULL;
        if (t->type == TOK_EOF) {
            if (ends)
                return tpl_fail_at(&p->t->src, t->pos, LMC_ERR_FORMAT,
                                   "unexpected end of template, expected '%s'", ends[0]);
            break;
        }
        if (t->type == TOK_TEXT) {
            TRY(new_node(p, N_TEXT, t->pos, &n));
            n->u.text.text = t->text;
            n->u.text.len = t->len;
            advance(p);
        } else if (t->type == TOK_VAR_BEGIN) {
            advance(p);
            TRY(new_node(p, N_OUTPUT, t->pos, &n));
            TRY(tpl_parse_tuple(p, true, &n->u.expr));
            if (cur(p)->type != TOK_VAR_END) return fail_tok(p, cur(p), "end of print statement");
            advance(p);
        } else if (t->type == TOK_BLOCK_BEGIN) {
            advance(p);
            if (ends)
                for (size_t k = 0; ends[k]; k++)
                    if (is_name(p, ends[k])) {
                        p->depth--;
                        *out = body;
                        return LMC_OK;
                    }
            TRY(parse_statement(p, &n));
        } else {
            return fail_tok(p, t, "template data or a tag");
        }
        TRY(list_push(p, &body->u.items, n));
    }
    p->depth--;
    *out = body;
    return LMC_OK;
}

lmc_status tpl_parse(lmc_template *t, const tpl_token *tokens, size_t count) {
    parser p = {.t = t, .toks = tokens, .count = count};
    return parse_body(&p, NULL, &t->root);
}
