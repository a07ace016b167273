/* JSON text as Python's json.dump(obj, indent=N) writes it: mlx-lm writes
 * config.json (save_config) and model.safetensors.index.json (save_model)
 * that way, and convert reproduces those files. */
#include "json.h"
#include "text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool bad;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
    if (b->bad) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->bad = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void puts_(sbuf *b, const char *s) {
    put(b, s, strlen(s));
}

static void put_u16(sbuf *b, unsigned v) {
    char t[8];
    snprintf(t, sizeof t, "\\u%04x", v & 0xFFFFu);
    puts_(b, t);
}

/* json.encoder.py_encode_basestring_ascii */
static void put_string(sbuf *b, const char *s, size_t len) {
    put(b, "\"", 1);
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        unsigned c = u[i];
        uint32_t cp = c;
        size_t k = 1;
        if (c >= 0x80) { /* jansson has validated the UTF-8 */
            k = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
            cp = c & (0x3Fu >> (k - 1));
            for (size_t j = 1; j < k && i + j < len; j++) cp = (cp << 6) | (u[i + j] & 0x3Fu);
        }
        i += k;
        switch (cp) {
        case '"':
            puts_(b, "\\\"");
            break;
        case '\\':
            puts_(b, "\\\\");
            break;
        case '\n':
            puts_(b, "\\n");
            break;
        case '\r':
            puts_(b, "\\r");
            break;
        case '\t':
            puts_(b, "\\t");
            break;
        case '\b':
            puts_(b, "\\b");
            break;
        case '\f':
            puts_(b, "\\f");
            break;
        default:
            if (cp < 0x20 || cp > 0x7E) {
                if (cp >= 0x10000) {
                    cp -= 0x10000;
                    put_u16(b, 0xD800 | (cp >> 10));
                    put_u16(b, 0xDC00 | (cp & 0x3FF));
                } else {
                    put_u16(b, cp);
                }
            } else {
                char ch = (char)cp;
                put(b, &ch, 1);
            }
        }
    }
    put(b, "\"", 1);
}

/* float.__repr__: the shortest digits that read back to x, positional when
 * the decimal point falls in (-4, 16], else d.ddde+XX. */
static void put_real(sbuf *b, double x) {
    /* json.dumps spells the non-finite values NaN and Infinity */
    if (isnan(x) || isinf(x)) {
        puts_(b, isnan(x) ? "NaN" : x < 0 ? "-Infinity" : "Infinity");
        return;
    }
    char t[LMC_FLOAT_REPR_MAX];
    lmc_float_repr(x, t);
    puts_(b, t);
}

static void newline(sbuf *b, int indent, int depth) {
    put(b, "\n", 1);
    for (int i = 0; i < indent * depth; i++) put(b, " ", 1);
}

static void dump(sbuf *b, const json_t *v, int indent, int depth) {
    char t[32];
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        if (json_object_size(v) == 0) {
            puts_(b, "{}");
            break;
        }
        put(b, "{", 1);
        const char *key;
        json_t *val;
        bool first = true;
        json_object_foreach((json_t *)v, key, val) {
            if (!first) put(b, ",", 1);
            first = false;
            newline(b, indent, depth + 1);
            put_string(b, key, strlen(key));
            puts_(b, ": ");
            dump(b, val, indent, depth + 1);
        }
        newline(b, indent, depth);
        put(b, "}", 1);
        break;
    }
    case JSON_ARRAY: {
        if (json_array_size(v) == 0) {
            puts_(b, "[]");
            break;
        }
        put(b, "[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) put(b, ",", 1);
            newline(b, indent, depth + 1);
            dump(b, json_array_get(v, i), indent, depth + 1);
        }
        newline(b, indent, depth);
        put(b, "]", 1);
        break;
    }
    case JSON_STRING:
        put_string(b, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        snprintf(t, sizeof t, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        puts_(b, t);
        break;
    case JSON_REAL:
        put_real(b, json_real_value(v));
        break;
    case JSON_TRUE:
        puts_(b, "true");
        break;
    case JSON_FALSE:
        puts_(b, "false");
        break;
    case JSON_NULL:
        puts_(b, "null");
        break;
    }
}

char *lmc_json_dumps_python(const json_t *v, int indent) {
    sbuf b = {0};
    dump(&b, v, indent, 0);
    if (b.bad || !b.p) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
