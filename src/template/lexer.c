/* Lexer: splits a template into data and tag tokens the way jinja2's Lexer
 * (jinja2/lexer.py, 3.1) does with trim_blocks=True and lstrip_blocks=True:
 *  - "{%-"/"{{-"/"{#-" strip all whitespace before the tag, "-%}" etc. after;
 *  - lstrip_blocks removes spaces/tabs between a line start and "{%" or "{#"
 *    (not "{{"), unless the tag opens with "+";
 *  - trim_blocks removes the first newline after "%}" or "#}", unless the tag
 *    closes with "+%}".
 * Inside tags it produces names, numbers, strings (with Python escapes
 * decoded) and operators; tag ends count only outside brackets. */
#include "template/ast.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tpl_position(const tpl_source *src, uint32_t pos, int *line, int *col) {
    int l = 1, c = 1;
    for (size_t i = 0; i < pos && i < src->len; i++) {
        if (src->text[i] == '\n') {
            l++;
            c = 1;
        } else if (((unsigned char)src->text[i] & 0xc0) != 0x80) {
            c++;
        }
    }
    *line = l;
    *col = c;
}

lmc_status tpl_fail_at(const tpl_source *src, uint32_t pos, lmc_status st, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line, col;
    tpl_position(src, pos, &line, &col);
    return lmc_error(st, "line %d, column %d: %s", line, col, msg);
}

typedef struct lexer {
    tpl_arena *arena;
    tpl_source *src;
    const char *s;
    size_t len;
    tpl_token *toks;
    size_t count, cap;
} lexer;

/* Python's str.isspace() for the ASCII range (\x1c-\x1f included). */
static bool is_space(unsigned char c) {
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

static lmc_status push(lexer *lx, tok_type type, size_t pos, const char *text, size_t len,
                       tpl_token **out) {
    if (lx->count == lx->cap) {
        size_t cap = lx->cap ? lx->cap * 2 : 256;
        tpl_token *t = tpl_alloc(lx->arena, cap * sizeof *t);
        if (!t) return tpl_arena_status(lx->arena);
        if (lx->count) memcpy(t, lx->toks, lx->count * sizeof *t);
        lx->toks = t;
        lx->cap = cap;
    }
    tpl_token *t = &lx->toks[lx->count++];
    memset(t, 0, sizeof *t);
    t->type = type;
    t->pos = (uint32_t)pos;
    t->text = text;
    t->len = len;
    if (out) *out = t;
    return LMC_OK;
}

static lmc_status fail(lexer *lx, size_t pos, const char *fmt, const char *arg) {
    return tpl_fail_at(lx->src, (uint32_t)pos, LMC_ERR_FORMAT, fmt, arg);
}

/* Decodes a string literal body with Python's unicode-escape rules, which is
 * what jinja2 applies to string tokens; unknown escapes stay as written. */
static lmc_status decode_string(lexer *lx, size_t start, size_t end, tpl_token *t) {
    const char *s = lx->s;
    char *out = tpl_alloc(lx->arena, end - start + 1);
    if (!out) return tpl_arena_status(lx->arena);
    size_t n = 0;
    for (size_t i = start; i < end;) {
        if (s[i] != '\\' || i + 1 >= end) {
            out[n++] = s[i++];
            continue;
        }
        char c = s[i + 1];
        const char *simple = strchr("\\'\"abfnrtv\n", c);
        if (simple && c) {
            static const char map[] = "\\'\"\a\b\f\n\r\t\v";
            if (c != '\n') out[n++] = map[simple - "\\'\"abfnrtv\n"];
            i += 2;
            continue;
        }
        int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
        if (digits) {
            uint32_t cp = 0;
            int k;
            for (k = 0; k < digits && i + 2 + (size_t)k < end; k++) {
                char h = s[i + 2 + k];
                int v = (h >= '0' && h <= '9')   ? h - '0'
                        : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                        : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                 : -1;
                if (v < 0) break;
                cp = cp * 16 + (uint32_t)v;
            }
            if (k != digits || cp > 0x10ffff)
                return fail(lx, i, "%s", "invalid \\x, \\u or \\U escape in a string");
            char enc[4];
            size_t m = lmc_utf8_encode(cp, enc);
            memcpy(out + n, enc, m); /* never longer than the escape itself */
            n += m;
            i += 2 + (size_t)digits;
            continue;
        }
        if (c >= '0' && c <= '7') {
            uint32_t cp = 0;
            size_t k = i + 1;
            for (int d = 0; d < 3 && k < end && s[k] >= '0' && s[k] <= '7'; d++, k++)
                cp = cp * 8 + (uint32_t)(s[k] - '0');
            char enc[4];
            size_t m = lmc_utf8_encode(cp, enc);
            memcpy(out + n, enc, m);
            n += m;
            i = k;
            continue;
        }
        out[n++] = s[i++]; /* unknown escape: keep the backslash */
    }
    out[n] = '\0';
    t->text = out;
    t->len = n;
    return LMC_OK;
}

static bool is_name_start(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_name_char(unsigned char c) {
    return is_name_start(c) || (c >= '0' && c <= '9');
}
static bool is_digit(unsigned char c) {
    return c >= '0' && c <= '9';
}

/* Digits with single underscores between them, as jinja2's integer_re. */
static size_t scan_digits(const char *s, size_t len, size_t i) {
    size_t j = i;
    while (j < len && is_digit((unsigned char)s[j])) {
        j++;
        if (j + 1 < len && s[j] == '_' && is_digit((unsigned char)s[j + 1])) j++;
    }
    return j;
}

static lmc_status lex_number(lexer *lx, size_t *ip) {
    const char *s = lx->s;
    size_t i = *ip, j = scan_digits(s, lx->len, i);
    bool is_float = false;
    if (j + 1 < lx->len && s[j] == '.' && is_digit((unsigned char)s[j + 1])) {
        j = scan_digits(s, lx->len, j + 1);
        is_float = true;
    }
    if (j < lx->len && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < lx->len && (s[k] == '+' || s[k] == '-')) k++;
        if (k < lx->len && is_digit((unsigned char)s[k])) {
            j = scan_digits(s, lx->len, k);
            is_float = true;
        }
    }
    char buf[128];
    size_t n = 0;
    for (size_t k = i; k < j && n < sizeof buf - 1; k++)
        if (s[k] != '_') buf[n++] = s[k];
    buf[n] = '\0';
    tpl_token *t;
    lmc_status st = push(lx, is_float ? TOK_FLOAT : TOK_INT, i, s + i, j - i, &t);
    if (st != LMC_OK) return st;
    if (is_float) {
        t->fval = strtod(buf, NULL);
    } else {
        errno = 0;
        long long v = strtoll(buf, NULL, 10);
        if (errno) return fail(lx, i, "%s", "integer literal too large");
        t->ival = v;
    }
    *ip = j;
    return LMC_OK;
}

static const char *const OPERATORS[] = {
    "//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
    "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";",
};

/* Lexes the inside of a {{ }} or {% %} tag starting at *ip; stops after the
 * closing tag. Returns the end position in *ip and whether the closing
 * sequence ended with a newline in *ended_newline. */
static lmc_status lex_tag(lexer *lx, size_t *ip, bool block, bool *ended_newline) {
    const char *s = lx->s;
    size_t len = lx->len, i = *ip;
    char stack[64];
    size_t depth = 0;
    size_t open_pos = i;
    lmc_status st;
    for (;;) {
        if (i >= len) return fail(lx, open_pos, "%s", "unexpected end of template inside a tag");
        if (depth == 0) {
            /* Tag end, tried before anything else as in jinja2's rules. */
            char c0 = s[i], e = block ? '%' : '}';
            size_t m = 0;
            bool strip = false, plus = false;
            if ((c0 == '-' || c0 == '+') && i + 2 < len && s[i + 1] == e && s[i + 2] == '}') {
                m = 3;
                strip = c0 == '-';
                plus = c0 == '+' && block;
                if (c0 == '+' && !block) m = 0; /* "+}}" is not a variable end */
            } else if (c0 == e && i + 1 < len && s[i + 1] == '}') {
                m = 2;
            }
            if (m) {
                st = push(lx, block ? TOK_BLOCK_END : TOK_VAR_END, i, s + i, m, NULL);
                if (st != LMC_OK) return st;
                i += m;
                if (strip) {
                    while (i < len && is_space((unsigned char)s[i])) i++;
                } else if (block && !plus && i < len && s[i] == '\n') {
                    i++; /* trim_blocks */
                }
                *ended_newline = s[i - 1] == '\n';
                *ip = i;
                return LMC_OK;
            }
        }
        unsigned char c = (unsigned char)s[i];
        if (is_space(c)) {
            i++;
            continue;
        }
        if (is_digit(c)) {
            if ((st = lex_number(lx, &i)) != LMC_OK) return st;
            continue;
        }
        if (is_name_start(c)) {
            size_t j = i;
            while (j < len && is_name_char((unsigned char)s[j])) j++;
            if ((st = push(lx, TOK_NAME, i, s + i, j - i, NULL)) != LMC_OK) return st;
            i = j;
            continue;
        }
        if (c == '\'' || c == '"') {
            size_t j = i + 1;
            while (j < len && s[j] != (char)c) j += (s[j] == '\\' && j + 1 < len) ? 2 : 1;
            if (j >= len) return fail(lx, i, "%s", "unterminated string literal");
            tpl_token *t;
            if ((st = push(lx, TOK_STRING, i, NULL, 0, &t)) != LMC_OK) return st;
            if ((st = decode_string(lx, i + 1, j, t)) != LMC_OK) return st;
            i = j + 1;
            continue;
        }
        const char *op = NULL;
        for (size_t k = 0; k < sizeof OPERATORS / sizeof OPERATORS[0]; k++) {
            size_t n = strlen(OPERATORS[k]);
            if (i + n <= len && !memcmp(s + i, OPERATORS[k], n)) {
                op = OPERATORS[k];
                break;
            }
        }
        if (!op) {
            char ch[2] = {(char)c, 0};
            return fail(lx, i, "unexpected character '%s'", c >= 0x20 && c < 0x7f ? ch : "?");
        }
        size_t n = strlen(op);
        if (n == 1 && strchr("([{", op[0])) {
            if (depth == sizeof stack) return fail(lx, i, "%s", "brackets nested too deeply");
            stack[depth++] = op[0];
        } else if (n == 1 && strchr(")]}", op[0])) {
            char want = op[0] == ')' ? '(' : op[0] == ']' ? '[' : '{';
            if (depth == 0 || stack[depth - 1] != want) return fail(lx, i, "unexpected '%s'", op);
            depth--;
        }
        if ((st = push(lx, TOK_OP, i, op, n, NULL)) != LMC_OK) return st;
        i += n;
    }
}

/* {% raw %} ... {% endraw %}: the body is data. Returns false when the text
 * at i is not a raw tag. */
static bool match_raw_open(const char *s, size_t len, size_t i, size_t *body) {
    size_t j = i + 2;
    if (j < len && (s[j] == '-' || s[j] == '+')) j++;
    while (j < len && is_space((unsigned char)s[j])) j++;
    if (j + 3 > len || memcmp(s + j, "raw", 3)) return false;
    j += 3;
    if (j < len && is_name_char((unsigned char)s[j])) return false;
    while (j < len && is_space((unsigned char)s[j])) j++;
    if (j + 3 <= len && s[j] == '-' && s[j + 1] == '%' && s[j + 2] == '}') {
        j += 3;
        while (j < len && is_space((unsigned char)s[j])) j++;
    } else if (j + 2 <= len && s[j] == '%' && s[j + 1] == '}') {
        j += 2;
    } else {
        return false;
    }
    *body = j;
    return true;
}

static lmc_status lex_raw(lexer *lx, size_t open, size_t body, size_t *ip, bool *ended_nl) {
    const char *s = lx->s;
    size_t len = lx->len;
    for (size_t k = body; k + 1 < len; k++) {
        if (s[k] != '{' || s[k + 1] != '%') continue;
        size_t j = k + 2;
        bool strip_before = j < len && s[j] == '-';
        if (j < len && (s[j] == '-' || s[j] == '+')) j++;
        while (j < len && is_space((unsigned char)s[j])) j++;
        if (j + 6 > len || memcmp(s + j, "endraw", 6)) continue;
        j += 6;
        while (j < len && is_space((unsigned char)s[j])) j++;
        size_t end = k;
        if (strip_before)
            while (end > body && is_space((unsigned char)s[end - 1])) end--;
        if (j + 3 <= len && s[j] == '-' && s[j + 1] == '%' && s[j + 2] == '}') {
            j += 3;
            while (j < len && is_space((unsigned char)s[j])) j++;
        } else if (j + 3 <= len && s[j] == '+' && s[j + 1] == '%' && s[j + 2] == '}') {
            j += 3;
        } else if (j + 2 <= len && s[j] == '%' && s[j + 1] == '}') {
            j += 2;
            if (j < len && s[j] == '\n') j++;
        } else {
            continue;
        }
        lmc_status st = LMC_OK;
        if (end > body) st = push(lx, TOK_TEXT, body, s + body, end - body, NULL);
        *ip = j;
        *ended_nl = s[j - 1] == '\n';
        return st;
    }
    return fail(lx, open, "%s", "missing {% endraw %}");
}

lmc_status tpl_lex(tpl_arena *a, const char *text, size_t len, tpl_source *src, tpl_token **tokens,
                   size_t *count) {
    char *norm = tpl_alloc(a, len + 1);
    if (!norm) return tpl_arena_status(a);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\r') {
            norm[n++] = '\n';
            if (i + 1 < len && text[i + 1] == '\n') i++;
        } else {
            norm[n++] = text[i];
        }
    }
    if (n && norm[n - 1] == '\n') n--;
    norm[n] = '\0';
    src->text = norm;
    src->len = n;

    lexer lx = {.arena = a, .src = src, .s = norm, .len = n};
    const char *s = norm;
    size_t i = 0;
    bool line_starting = true;
    lmc_status st;
    while (i < n) {
        /* Next tag opener. */
        size_t k = i;
        while (k + 1 < n &&
               !(s[k] == '{' && (s[k + 1] == '{' || s[k + 1] == '%' || s[k + 1] == '#')))
            k++;
        if (k + 1 >= n) {
            if ((st = push(&lx, TOK_TEXT, i, s + i, n - i, NULL)) != LMC_OK) return st;
            break;
        }
        char kind = s[k + 1];
        char sign = k + 2 < n && (s[k + 2] == '-' || s[k + 2] == '+') ? s[k + 2] : 0;
        size_t text_end = k;
        if (sign == '-') {
            while (text_end > i && is_space((unsigned char)s[text_end - 1])) text_end--;
        } else if (sign != '+' && kind != '{') {
            /* lstrip_blocks: only whitespace between the line start and the tag. */
            size_t l = text_end;
            while (l > i && s[l - 1] != '\n') l--;
            bool at_line_start = l > i || (l == i && line_starting);
            if (at_line_start && l < text_end) {
                size_t q = l;
                while (q < text_end && is_space((unsigned char)s[q])) q++;
                if (q == text_end) text_end = l;
            }
        }
        if (text_end > i && (st = push(&lx, TOK_TEXT, i, s + i, text_end - i, NULL)) != LMC_OK)
            return st;
        size_t body;
        if (kind == '%' && match_raw_open(s, n, k, &body)) {
            if ((st = lex_raw(&lx, k, body, &i, &line_starting)) != LMC_OK) return st;
            continue;
        }
        size_t after = k + 2 + (sign ? 1 : 0);
        if (kind == '#') {
            size_t q = after;
            while (q + 1 < n && !(s[q] == '#' && s[q + 1] == '}')) q++;
            if (q + 1 >= n) return fail(&lx, k, "%s", "missing end of comment tag");
            size_t j = q + 2;
            char close = q > after ? s[q - 1] : 0;
            if (close == '-') {
                while (j < n && is_space((unsigned char)s[j])) j++;
            } else if (close != '+' && j < n && s[j] == '\n') {
                j++;
            }
            i = j;
            line_starting = s[j - 1] == '\n';
            continue;
        }
        bool block = kind == '%';
        if ((st = push(&lx, block ? TOK_BLOCK_BEGIN : TOK_VAR_BEGIN, k, s + k, after - k, NULL)) !=
            LMC_OK)
            return st;
        i = after;
        if ((st = lex_tag(&lx, &i, block, &line_starting)) != LMC_OK) return st;
    }
    if ((st = push(&lx, TOK_EOF, n, s + n, 0, NULL)) != LMC_OK) return st;
    *tokens = lx.toks;
    *count = lx.count;
    return LMC_OK;
}
