/* Shared internals of the evaluator (eval.c), filters (filters.c), tests
 * (tests.c) and attribute/method/global lookups (methods.c). */
#ifndef LMC_TEMPLATE_EVAL_H
#define LMC_TEMPLATE_EVAL_H

#include "template/ast.h"
#include "template/template.h"

/* A variable frame. jinja2 gives each for-loop iteration, macro call and
 * call-block body its own frame; `if` does not create one. */
typedef struct scope {
    struct scope *parent;
    tv_dict vars;
} scope;

typedef struct tpl_macro {
    const char *name;
    const param_list *params;
    const node *body;
    scope *closure;
} tpl_macro;

typedef struct tpl_loop {
    const tv_list *items;
    size_t index0;
    int depth;
} tpl_loop;

/* Evaluated call arguments. */
typedef struct tpl_args {
    const tv *pos;
    size_t npos;
    const char *const *kw_names;
    const tv *kw;
    size_t nkw;
} tpl_args;

typedef enum tpl_flow { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE } tpl_flow;

typedef struct tpl_ctx {
    tpl_arena *arena;
    const tpl_source *src;
    tpl_options opts;
    scope *scope;
    tpl_buf *out;
    tv filter_input; /* the body text of {% filter %} / {% set x | f %} */
    uint64_t steps;
    int macro_depth;
    int loop_depth;
    tpl_flow flow;
    bool located; /* the current error message already names a position */
} tpl_ctx;

typedef lmc_status (*tpl_builtin_fn)(tpl_ctx *c, tv self, const tpl_args *a, tv *out);

struct tpl_builtin {
    const char *name;
    tpl_builtin_fn fn;
};

/* Errors. tpl_fail names the node's position; plain lmc_error messages from
 * helpers get the position added by the evaluator. */
lmc_status tpl_fail(tpl_ctx *c, const node *at, lmc_status st, const char *fmt, ...)
    LMC_PRINTF(4, 5);
lmc_status tpl_nomem(tpl_ctx *c);
lmc_status tpl_undefined_error(tv u);

/* Argument access: positional index i or keyword `name`; def when absent. */
tv tpl_arg(const tpl_args *a, size_t i, const char *name, tv def);
bool tpl_has_arg(const tpl_args *a, size_t i, const char *name);
lmc_status tpl_check_args(const tpl_args *a, const char *fn, size_t max_pos,
                          const char *const *kw_allowed);
/* LMC_OK when v is a string, else fn()'s TypeError (or v's undefined error). */
lmc_status tpl_need_str(tv v, const char *fn);

/* Values. */
lmc_status tpl_str(tpl_ctx *c, const char *s, size_t len, tv *out);
lmc_status tpl_to_string(tpl_ctx *c, tv v, tv *out); /* str(v) */
/* list(v): lists, tuples, dict keys, string characters; undefined -> []. */
lmc_status tpl_iterate(tpl_ctx *c, tv v, tv *out_list);
lmc_status tpl_step(tpl_ctx *c, const node *at);

/* obj.name and obj[key] with jinja2's fallbacks (attribute first for `.`,
 * item first for `[]`); missing -> undefined. */
lmc_status tpl_getattr(tpl_ctx *c, tv obj, const char *name, tv *out);
lmc_status tpl_getitem(tpl_ctx *c, tv obj, tv key, tv *out);
/* Calls a function, bound method or macro. */
lmc_status tpl_call(tpl_ctx *c, const node *at, tv fn, const tpl_args *a, tv *out);
lmc_status tpl_call_macro(tpl_ctx *c, const node *at, tpl_macro *m, const tpl_args *a, tv caller,
                          tv *out);
/* Global functions (range, namespace, dict, raise_exception, strftime_now). */
bool tpl_lookup_global(const char *name, tv *out);
/* Attribute of an item by a dotted path ("a.b", "0"), as jinja2's
 * make_attrgetter for map/selectattr/sort/unique. */
lmc_status tpl_attr_path(tpl_ctx *c, tv item, tv path, tv *out);

/* Filters and tests; *found false when the name is unknown. */
lmc_status tpl_filter(tpl_ctx *c, const char *name, tv in, const tpl_args *a, tv *out, bool *found);
lmc_status tpl_test(tpl_ctx *c, const char *name, tv in, const tpl_args *a, bool *out, bool *found);

/* String helpers shared by methods and filters (Python semantics). */
lmc_status tpl_str_strip(tpl_ctx *c, tv s, tv chars, bool left, bool right, tv *out);
lmc_status tpl_str_case(tpl_ctx *c, tv s, int mode,
                        tv *out); /* 0 lower 1 upper 2 capitalize 3 str.title */
lmc_status tpl_str_replace(tpl_ctx *c, tv s, tv old, tv rep, int64_t count, tv *out);
bool tpl_str_contains(tv hay, tv needle);
/* s.name(*a) for the str methods (strings.c). */
lmc_status tpl_str_method(tpl_ctx *c, tv s, const char *name, const tpl_args *a, tv *out);

/* Operators (operators.c). */
lmc_status tpl_binary(tpl_ctx *c, const node *at, bin_op op, tv a, tv b, tv *out);
lmc_status tpl_compare_op(cmp_op op, tv a, tv b, bool *out);
lmc_status tpl_slice(tpl_ctx *c, const node *at, tv obj, const tv parts[3], tv *out);
lmc_status tpl_contains(tv container, tv item, bool *out);

#endif
