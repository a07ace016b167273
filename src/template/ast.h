/* Tokens and syntax tree of the template language (a subset of jinja2 3.1). */
#ifndef LMC_TEMPLATE_AST_H
#define LMC_TEMPLATE_AST_H

#include "template/value.h"

/* ---- tokens (lexer.c) --------------------------------------------------- */

typedef enum tok_type {
    TOK_EOF,
    TOK_TEXT,        /* template data between tags */
    TOK_VAR_BEGIN,   /* {{ */
    TOK_VAR_END,     /* }} */
    TOK_BLOCK_BEGIN, /* {% */
    TOK_BLOCK_END,   /* %} */
    TOK_NAME,
    TOK_STRING, /* decoded text in text/len */
    TOK_INT,
    TOK_FLOAT,
    TOK_OP, /* operator or punctuation in text */
} tok_type;

typedef struct tpl_token {
    tok_type type;
    uint32_t pos; /* byte offset in the normalized source */
    const char *text;
    size_t len;
    int64_t ival;
    double fval;
} tpl_token;

typedef struct tpl_source {
    const char *text; /* normalized: newlines are \n, one trailing \n removed */
    size_t len;
} tpl_source;

/* "line L, column C" of a byte offset, for messages. */
void tpl_position(const tpl_source *src, uint32_t pos, int *line, int *col);
/* Sets an error "line L, column C: <message>". */
lmc_status tpl_fail_at(const tpl_source *src, uint32_t pos, lmc_status st, const char *fmt, ...)
    LMC_PRINTF(4, 5);

/* Normalizes newlines as jinja2 does (\r\n and \r become \n, a single
 * trailing newline is dropped: keep_trailing_newline=False) and tokenizes
 * with trim_blocks and lstrip_blocks on, as transformers configures. */
lmc_status tpl_lex(tpl_arena *a, const char *text, size_t len, tpl_source *src, tpl_token **tokens,
                   size_t *count);

/* ---- syntax tree (parser.c) --------------------------------------------- */

typedef enum node_kind {
    /* expressions */
    N_LITERAL,
    N_NAME,
    N_GETATTR,
    N_GETITEM,
    N_SLICE,
    N_CALL,
    N_FILTER,
    N_TEST,
    N_NEG,
    N_POS,
    N_NOT,
    N_BINARY,
    N_COMPARE,
    N_AND,
    N_OR,
    N_COND,
    N_LIST,
    N_TUPLE,
    N_DICT,
    /* statements */
    N_BODY,
    N_TEXT,
    N_OUTPUT,
    N_IF,
    N_FOR,
    N_SET,
    N_SET_BLOCK,
    N_MACRO,
    N_CALL_BLOCK,
    N_FILTER_BLOCK,
    N_BREAK,
    N_CONTINUE,
} node_kind;

typedef enum bin_op {
    OP_ADD,
    OP_SUB,
    OP_MUL,
    OP_DIV,
    OP_FLOORDIV,
    OP_MOD,
    OP_POW,
    OP_CONCAT,
} bin_op;

typedef enum cmp_op { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_IN, CMP_NOTIN } cmp_op;

typedef struct node node;

typedef struct node_list {
    node **items;
    size_t len, cap;
} node_list;

/* Arguments of a call, filter or test. */
typedef struct call_args {
    node_list pos;
    node_list kw_values;
    const char **kw_names;
} call_args;

/* Parameters of a macro or call block. */
typedef struct param_list {
    const char **names;
    node **defaults; /* NULL entries: no default */
    size_t len;
} param_list;

struct node {
    node_kind kind;
    uint32_t pos;
    union {
        tv literal;
        const char *name;
        struct {
            node *obj;
            const char *attr;
        } getattr;
        struct {
            node *obj;
            node *index;
        } getitem;
        struct {
            node *start, *stop, *step;
        } slice;
        struct {
            node *fn;
            call_args args;
        } call;
        struct {
            node *arg;
            const char *name;
            call_args args;
            bool negate;
        } filter; /* also tests */
        struct {
            node *a, *b;
            bin_op op;
        } binary;
        node *operand; /* N_NEG, N_POS, N_NOT */
        struct {
            node *first;
            cmp_op *ops;
            node_list rest;
        } compare;
        struct {
            node *a, *b;
        } logic; /* N_AND, N_OR */
        struct {
            node *cond, *then, *otherwise;
        } cond;
        node_list items; /* N_LIST, N_TUPLE, N_BODY */
        struct {
            node_list keys, values;
        } dict;
        struct {
            const char *text;
            size_t len;
        } text;
        node *expr; /* N_OUTPUT */
        struct {
            node_list conds, bodies;
            node *else_body;
        } if_;
        struct {
            node *target, *iter, *filter, *body, *else_body;
        } for_;
        struct {
            node *target, *value;
        } set;
        struct {
            node *target, *body, *filters;
        } set_block; /* filters: N_FILTER chain or NULL */
        struct {
            const char *name;
            param_list params;
            node *body;
        } macro;
        struct {
            node *call;
            param_list params;
            node *body;
        } call_block;
        struct {
            node *filters;
            node *body;
        } filter_block;
    } u;
};

typedef struct lmc_template {
    tpl_arena arena;
    tpl_source src;
    node *root;
} lmc_template;

/* Parses tokens into t->root; errors name line and column. */
lmc_status tpl_parse(lmc_template *t, const tpl_token *tokens, size_t count);

#endif
