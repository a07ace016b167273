/* Internals shared by the expression parser (parser_expr.c) and the
 * statement parser (parser.c). */
#ifndef LMC_TEMPLATE_PARSER_H
#define LMC_TEMPLATE_PARSER_H

#include "template/ast.h"

#include <stdio.h>
#include <string.h>

#define MAX_NESTING 128

typedef struct parser {
    lmc_template *t;
    const tpl_token *toks;
    size_t count, i;
    int depth;
    int loop_depth;
} parser;

static inline const tpl_token *cur(parser *p) {
    return &p->toks[p->i];
}
static inline const tpl_token *peek(parser *p, size_t k) {
    size_t j = p->i + k;
    return &p->toks[j < p->count ? j : p->count - 1];
}
static inline void advance(parser *p) {
    if (p->i + 1 < p->count) p->i++;
}

static inline bool tok_is(const tpl_token *t, tok_type type, const char *text) {
    if (t->type != type) return false;
    if (!text) return true;
    return t->len == strlen(text) && !memcmp(t->text, text, t->len);
}
static inline bool is_op(parser *p, const char *op) {
    return tok_is(cur(p), TOK_OP, op);
}
static inline bool is_name(parser *p, const char *name) {
    return tok_is(cur(p), TOK_NAME, name);
}

static inline const char *describe(const tpl_token *t) {
    switch (t->type) {
    case TOK_EOF:
        return "end of template";
    case TOK_TEXT:
        return "template data";
    case TOK_VAR_BEGIN:
        return "'{{'";
    case TOK_VAR_END:
        return "end of print statement";
    case TOK_BLOCK_BEGIN:
        return "'{%'";
    case TOK_BLOCK_END:
        return "end of statement block";
    case TOK_NAME:
        return "name";
    case TOK_STRING:
        return "string";
    case TOK_INT:
        return "integer";
    case TOK_FLOAT:
        return "float";
    case TOK_OP:
        return "operator";
    }
    return "token";
}

static inline lmc_status fail_tok(parser *p, const tpl_token *t, const char *what) {
    char got[64];
    if (t->type == TOK_NAME || t->type == TOK_OP)
        snprintf(got, sizeof got, "'%.*s'", (int)(t->len > 40 ? 40 : t->len), t->text);
    else
        snprintf(got, sizeof got, "%s", describe(t));
    return tpl_fail_at(&p->t->src, t->pos, LMC_ERR_FORMAT, "expected %s, got %s", what, got);
}

static inline lmc_status expect_op(parser *p, const char *op) {
    if (!is_op(p, op)) {
        char what[16];
        snprintf(what, sizeof what, "'%s'", op);
        return fail_tok(p, cur(p), what);
    }
    advance(p);
    return LMC_OK;
}

static inline lmc_status new_node(parser *p, node_kind kind, uint32_t pos, node **out) {
    node *n = tpl_alloc(&p->t->arena, sizeof *n);
    if (!n) return tpl_arena_status(&p->t->arena);
    n->kind = kind;
    n->pos = pos;
    *out = n;
    return LMC_OK;
}

static inline lmc_status list_push(parser *p, node_list *l, node *n) {
    if (l->len == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        node **items = tpl_alloc(&p->t->arena, cap * sizeof *items);
        if (!items) return tpl_arena_status(&p->t->arena);
        if (l->len) memcpy(items, l->items, l->len * sizeof *items);
        l->items = items;
        l->cap = cap;
    }
    l->items[l->len++] = n;
    return LMC_OK;
}

static inline const char *tok_str(parser *p, const tpl_token *t) {
    return tpl_strndup(&p->t->arena, t->text, t->len);
}

#define TRY(x)                                                                                     \
    do {                                                                                           \
        lmc_status st_ = (x);                                                                      \
        if (st_ != LMC_OK) return st_;                                                             \
    } while (0)

static inline lmc_status enter(parser *p) {
    if (++p->depth > MAX_NESTING)
        return tpl_fail_at(&p->t->src, cur(p)->pos, LMC_ERR_LIMIT,
                           "expression nested deeper than %d levels", MAX_NESTING);
    return LMC_OK;
}

/* Expressions (parser_expr.c). with_cond: allow `a if c else b`. */
lmc_status tpl_parse_expr(parser *p, bool with_cond, node **out);
/* An expression or a bare tuple `a, b`. */
lmc_status tpl_parse_tuple(parser *p, bool with_cond, node **out);
lmc_status tpl_parse_call_args(parser *p, call_args *args);
lmc_status tpl_parse_filter_name(parser *p, node *arg, node_kind kind, node **out);
lmc_status tpl_parse_filter(parser *p, node *arg, node **out);

#endif
