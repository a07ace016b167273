#include "template/arena.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tpl_arena_block {
    tpl_arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

#define ARENA_BLOCK_MIN (64 * 1024)

void tpl_arena_init(tpl_arena *a, size_t limit) {
    a->head = NULL;
    a->total = 0;
    a->limit = limit;
    a->over_limit = false;
}

void tpl_arena_free(tpl_arena *a) {
    tpl_arena_block *b = a->head;
    while (b) {
        tpl_arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
    a->total = 0;
}

void *tpl_alloc(tpl_arena *a, size_t size) {
    size = (size + 15) & ~(size_t)15;
    if (size == 0) size = 16;
    tpl_arena_block *b = a->head;
    if (!b || b->cap - b->used < size) {
        size_t cap = size > ARENA_BLOCK_MIN ? size : ARENA_BLOCK_MIN;
        if (size > (size_t)1 << 40) {
            a->over_limit = true;
            return NULL;
        }
        if (a->limit && a->total + cap + sizeof *b > a->limit) {
            a->over_limit = true;
            return NULL;
        }
        tpl_arena_block *nb = malloc(sizeof *nb + cap);
        if (!nb) {
            a->over_limit = false;
            return NULL;
        }
        nb->used = 0;
        nb->cap = cap;
        a->total += cap + sizeof *nb;
        /* A big one-off block goes behind the current one so the current
         * block's free tail stays usable. */
        if (b && cap == size && b->cap - b->used > ARENA_BLOCK_MIN / 4) {
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            a->head = nb;
        }
        b = nb;
    }
    void *p = b->data + b->used;
    b->used += size;
    memset(p, 0, size);
    return p;
}

char *tpl_strndup(tpl_arena *a, const char *s, size_t len) {
    char *p = tpl_alloc(a, len + 1);
    if (!p) return NULL;
    if (len) memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

lmc_status tpl_arena_status(const tpl_arena *a) {
    if (a->over_limit)
        return lmc_error(LMC_ERR_LIMIT, "template memory limit of %zu bytes reached", a->limit);
    return lmc_error(LMC_ERR_NOMEM, "out of memory");
}

void tpl_buf_init(tpl_buf *b, tpl_arena *a, size_t limit) {
    b->arena = a;
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->limit = limit;
}

static lmc_status buf_reserve(tpl_buf *b, size_t extra) {
    if (b->limit && (extra > b->limit || b->len > b->limit - extra))
        return lmc_error(LMC_ERR_LIMIT, "template output limit of %zu bytes reached", b->limit);
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return LMC_OK;
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap < need) cap *= 2;
    char *d = tpl_alloc(b->arena, cap);
    if (!d) return tpl_arena_status(b->arena);
    if (b->len) memcpy(d, b->data, b->len);
    d[b->len] = '\0';
    b->data = d;
    b->cap = cap;
    return LMC_OK;
}

lmc_status tpl_buf_append(tpl_buf *b, const char *s, size_t len) {
    lmc_status st = buf_reserve(b, len);
    if (st != LMC_OK) return st;
    if (len) memcpy(b->data + b->len, s, len);
    b->len += len;
    b->data[b->len] = '\0';
    return LMC_OK;
}

lmc_status tpl_buf_putc(tpl_buf *b, char c) {
    return tpl_buf_append(b, &c, 1);
}

lmc_status tpl_buf_puts(tpl_buf *b, const char *s) {
    return tpl_buf_append(b, s, strlen(s));
}

lmc_status tpl_buf_printf(tpl_buf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return lmc_error(LMC_ERR_FORMAT, "formatting failed");
    if ((size_t)n < sizeof tmp) return tpl_buf_append(b, tmp, (size_t)n);
    lmc_status st = buf_reserve(b, (size_t)n);
    if (st != LMC_OK) return st;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return LMC_OK;
}
