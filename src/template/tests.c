/* Tests (`x is name`): jinja2's builtin tests (jinja2/tests.py, 3.1). */
#include "template/eval.h"

#include <math.h>
#include <string.h>

typedef lmc_status (*test_fn)(tpl_ctx *c, tv in, const tpl_args *a, bool *out);

#define SIMPLE_TEST(fname, expr)                                                                   \
    static lmc_status fname(tpl_ctx *c, tv in, const tpl_args *a, bool *out) {                     \
        (void)c;                                                                                   \
        (void)a;                                                                                   \
        *out = (expr);                                                                             \
        return LMC_OK;                                                                             \
    }

SIMPLE_TEST(t_defined, in.type != TV_UNDEFINED)
SIMPLE_TEST(t_undefined, in.type == TV_UNDEFINED)
SIMPLE_TEST(t_none, in.type == TV_NONE)
SIMPLE_TEST(t_string, in.type == TV_STRING)
SIMPLE_TEST(t_mapping, in.type == TV_DICT)
/* iterable: anything iter() accepts (Undefined is iterable in jinja2). */
SIMPLE_TEST(t_iterable, in.type == TV_STRING || in.type == TV_LIST || in.type == TV_DICT ||
                            in.type == TV_UNDEFINED || in.type == TV_NAMESPACE)
/* sequence: has len() and __getitem__. */
SIMPLE_TEST(t_sequence, in.type == TV_STRING || in.type == TV_LIST || in.type == TV_DICT)
SIMPLE_TEST(t_number, in.type == TV_INT || in.type == TV_FLOAT || in.type == TV_BOOL)
SIMPLE_TEST(t_integer, in.type == TV_INT)
SIMPLE_TEST(t_float, in.type == TV_FLOAT)
SIMPLE_TEST(t_boolean, in.type == TV_BOOL)
SIMPLE_TEST(t_true, in.type == TV_BOOL && in.u.b)
SIMPLE_TEST(t_false, in.type == TV_BOOL && !in.u.b)
SIMPLE_TEST(t_callable, in.type == TV_MACRO || in.type == TV_FUNC || in.type == TV_METHOD)

static tv first_arg(const tpl_args *a) {
    return tpl_arg(a, 0, NULL, tv_undefined(NULL));
}

static lmc_status t_eq(tpl_ctx *c, tv in, const tpl_args *a, bool *out) {
    (void)c;
    *out = tv_equal(in, first_arg(a));
    return LMC_OK;
}
static lmc_status t_ne(tpl_ctx *c, tv in, const tpl_args *a, bool *out) {
    (void)c;
    *out = !tv_equal(in, first_arg(a));
    return LMC_OK;
}

static lmc_status ordered(tv in, const tpl_args *a, int want, bool or_equal, bool *out) {
    int cmp;
    lmc_status st = tv_compare(in, first_arg(a), &cmp);
    if (st != LMC_OK) return st;
    *out = cmp == want || (or_equal && cmp == 0);
    return LMC_OK;
}
static lmc_status t_lt(tpl_ctx *c, tv in, const tpl_args *a, bool *out) {
    (void)c;
    return ordered(in, a, -1, false, out);
}
static lmc_status t_le(tpl_ctx *c, tv in, const tpl_args *a, bool *out) {
    (void)c;
    return ordered(in, a, -1, true, out);
}
static lmc_status t_gt(tpl_ctx *c, tv in, const tpl_args *a, bool *out) {
    (void)c;
    return ordered(in, a, 1, false, out);
}
static lmc_status t_ge(tpl_ctx *c, tv in, const tpl_args *a, bool *out) {
    (void)c;
    return ordered(in, a, 1, true, out);
}

/* `is sameas`: Python identity. Singletons and small ints compare by value;
 * containers by their storage. */
static lmc_status t_sameas(tpl_ctx *c, tv in, const tpl_args *a, bool *out) {
    (void)c;
    tv o = first_arg(a);
    if (in.type != o.type)
        *out = false;
    else if (in.type == TV_STRING)
        *out = in.u.s == o.u.s || tv_equal(in, o);
    else if (in.type == TV_LIST)
        *out = in.u.l == o.u.l;
    else if (in.type == TV_DICT || in.type == TV_NAMESPACE)
        *out = in.u.d == o.u.d;
    else
        *out = tv_equal(in, o);
    return LMC_OK;
}

static lmc_status t_in(tpl_ctx *c, tv in, const tpl_args *a, bool *out) {
    (void)c;
    return tpl_contains(first_arg(a), in, out);
}

static lmc_status int_value(tv in, int64_t *v) {
    if (in.type == TV_INT || in.type == TV_BOOL) {
        *v = in.type == TV_BOOL ? in.u.b : in.u.i;
        return LMC_OK;
    }
    if (in.type == TV_UNDEFINED) return tpl_undefined_error(in);
    return lmc_error(LMC_ERR_FORMAT, "expected an integer, not %s", tv_type_name(in));
}

static lmc_status t_odd(tpl_ctx *c, tv in, const tpl_args *a, bool *out) {
    (void)c;
    (void)a;
    int64_t v = 0;
    lmc_status st = int_value(in, &v);
    *out = v % 2 != 0;
    return st;
}
static lmc_status t_even(tpl_ctx *c, tv in, const tpl_args *a, bool *out) {
    (void)c;
    (void)a;
    int64_t v = 0;
    lmc_status st = int_value(in, &v);
    *out = v % 2 == 0;
    return st;
}
static lmc_status t_divisibleby(tpl_ctx *c, tv in, const tpl_args *a, bool *out) {
    (void)c;
    int64_t v = 0, d = 0;
    lmc_status st = int_value(in, &v);
    if (st == LMC_OK) st = int_value(first_arg(a), &d);
    if (st != LMC_OK) return st;
    if (d == 0) return lmc_error(LMC_ERR_FORMAT, "integer division or modulo by zero");
    *out = d == -1 || v % d == 0;
    return LMC_OK;
}

static lmc_status t_case(tpl_ctx *c, tv in, int mode, bool *out) {
    if (in.type != TV_STRING) {
        *out = false;
        return LMC_OK;
    }
    tv conv;
    lmc_status st = tpl_str_case(c, in, mode, &conv);
    if (st != LMC_OK) return st;
    *out = tv_equal(conv, in);
    return LMC_OK;
}
static lmc_status t_lower(tpl_ctx *c, tv in, const tpl_args *a, bool *out) {
    (void)a;
    return t_case(c, in, 0, out);
}
static lmc_status t_upper(tpl_ctx *c, tv in, const tpl_args *a, bool *out) {
    (void)a;
    return t_case(c, in, 1, out);
}

static const struct {
    const char *name;
    test_fn fn;
} TESTS[] = {
    {"defined", t_defined},
    {"undefined", t_undefined},
    {"none", t_none},
    {"string", t_string},
    {"mapping", t_mapping},
    {"iterable", t_iterable},
    {"sequence", t_sequence},
    {"number", t_number},
    {"integer", t_integer},
    {"float", t_float},
    {"boolean", t_boolean},
    {"true", t_true},
    {"false", t_false},
    {"callable", t_callable},
    {"equalto", t_eq},
    {"eq", t_eq},
    {"==", t_eq},
    {"ne", t_ne},
    {"!=", t_ne},
    {"lt", t_lt},
    {"lessthan", t_lt},
    {"<", t_lt},
    {"le", t_le},
    {"<=", t_le},
    {"gt", t_gt},
    {"greaterthan", t_gt},
    {">", t_gt},
    {"ge", t_ge},
    {">=", t_ge},
    {"sameas", t_sameas},
    {"in", t_in},
    {"odd", t_odd},
    {"even", t_even},
    {"divisibleby", t_divisibleby},
    {"lower", t_lower},
    {"upper", t_upper},
};

lmc_status tpl_test(tpl_ctx *c, const char *name, tv in, const tpl_args *a, bool *out,
                    bool *found) {
    for (size_t i = 0; i < sizeof TESTS / sizeof TESTS[0]; i++)
        if (!strcmp(TESTS[i].name, name)) {
            *found = true;
            return TESTS[i].fn(c, in, a, out);
        }
    *found = false;
    return LMC_ERR_NOT_FOUND;
}
