/* Values of the template language: Python's data model as jinja2 sees it.
 *
 * A tv is 16 bytes, passed by value; heap parts (strings, lists, dicts) live
 * in the render arena and are shared by reference, as Python objects are.
 * Strings are UTF-8 and immutable; lists are mutable only through append
 * (see methods.c); dicts keep insertion order like Python 3.7+. */
#ifndef LMC_TEMPLATE_VALUE_H
#define LMC_TEMPLATE_VALUE_H

#include "base/text.h"
#include "template/arena.h"

#include <jansson.h>

typedef enum tv_type {
    TV_UNDEFINED, /* jinja2.Undefined: prints as "", falsy, fails on use */
    TV_NONE,
    TV_BOOL,
    TV_INT,
    TV_FLOAT,
    TV_STRING,
    TV_LIST, /* list, or tuple when is_tuple */
    TV_DICT,
    TV_NAMESPACE, /* jinja2's namespace(): a dict with attribute access */
    TV_LOOP,      /* the `loop` object of a for loop */
    TV_MACRO,     /* a {% macro %} or the `caller` of a call block */
    TV_FUNC,      /* a global function (range, namespace, raise_exception, ...) */
    TV_METHOD,    /* a bound method such as "abc".upper or d.items */
} tv_type;

typedef struct tv_str {
    size_t len;
    char data[]; /* NUL-terminated */
} tv_str;

typedef struct tv_list tv_list;
typedef struct tv_dict tv_dict;
struct tpl_loop;
struct tpl_macro;
struct tpl_builtin;
struct tv_method;

typedef struct tv {
    tv_type type;
    union {
        bool b;
        int64_t i;
        double f;
        tv_str *s;
        tv_list *l;
        tv_dict *d;
        struct tpl_loop *loop;
        struct tpl_macro *macro;
        const struct tpl_builtin *fn;
        struct tv_method *m;
        const char *undef_name; /* TV_UNDEFINED: name for messages, may be NULL */
    } u;
} tv;

struct tv_list {
    size_t len, cap;
    tv *items;
    bool is_tuple;
};

struct tv_dict {
    size_t len, cap;
    tv *keys;
    tv *vals;
};

typedef struct tv_method {
    tv self;
    const char *name;
} tv_method;

static inline tv tv_undefined(const char *name) {
    tv v = {.type = TV_UNDEFINED};
    v.u.undef_name = name;
    return v;
}
static inline tv tv_none(void) {
    return (tv){.type = TV_NONE};
}
static inline tv tv_bool(bool b) {
    return (tv){.type = TV_BOOL, .u.b = b};
}
static inline tv tv_int(int64_t i) {
    return (tv){.type = TV_INT, .u.i = i};
}
static inline tv tv_float(double f) {
    return (tv){.type = TV_FLOAT, .u.f = f};
}

/* Constructors: false when the arena refuses (see tpl_arena_status).
 * tv_make_str with s == NULL leaves the len bytes zeroed for the caller. */
bool tv_make_str(tpl_arena *a, const char *s, size_t len, tv *out);
bool tv_make_list(tpl_arena *a, size_t cap, bool is_tuple, tv *out);
bool tv_make_dict(tpl_arena *a, size_t cap, tv_type type, tv *out);
bool tv_list_push(tpl_arena *a, tv_list *l, tv item);
/* Sets d[key] = val (replacing an equal key in place). */
bool tv_dict_set(tpl_arena *a, tv_dict *d, tv key, tv val);
/* Borrowed pointer to d[key], or NULL. */
tv *tv_dict_get(const tv_dict *d, tv key);
tv *tv_dict_get_str(const tv_dict *d, const char *key);

/* Python-like behaviour. */
bool tv_truthy(tv v);
bool tv_equal(tv a, tv b);
/* Orders numbers, strings and sequences as Python does; others fail with a
 * TypeError-like message. *cmp gets -1, 0 or 1. */
lmc_status tv_compare(tv a, tv b, int *cmp);
const char *tv_type_name(tv v); /* Python's type name: 'str', 'dict', ... */
bool tv_is_number(tv v);        /* int, float or bool */
double tv_as_double(tv v);
bool tv_is_str(tv v, const char *s);

/* str(v) appended to b. str of Undefined is "". */
lmc_status tv_to_str(tv v, tpl_buf *b);
/* str(v) as a value (v itself when it is a string). */
lmc_status tv_stringify(tpl_arena *a, tv v, size_t limit, tv *out);
/* JSON data to values (deep copy). */
lmc_status tv_from_json(tpl_arena *a, const json_t *j, tv *out);

/* json.dumps(v, ensure_ascii, indent, separators, sort_keys) as transformers'
 * tojson filter calls it. indent: NULL for none, else the indent string;
 * item_sep/key_sep: NULL for json's defaults. */
typedef struct tv_json_opts {
    const char *indent;
    const char *item_sep;
    const char *key_sep;
    bool sort_keys;
    bool ensure_ascii;
} tv_json_opts;
lmc_status tv_to_json(tv v, const tv_json_opts *opts, tpl_buf *b);

#endif
