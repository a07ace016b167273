/* Arena allocation and growable byte buffers for the template engine.
 *
 * A parse owns one arena (tokens, AST, literal strings) and a render owns
 * another (every value it creates). Nothing is freed on its own: the arena
 * goes at once, so error paths never leak. The arena has a byte limit, which
 * is how the sandbox bounds memory (LMC_ERR_LIMIT when reached). */
#ifndef LMC_TEMPLATE_ARENA_H
#define LMC_TEMPLATE_ARENA_H

#include "base/base.h"

typedef struct tpl_arena_block tpl_arena_block;

typedef struct tpl_arena {
    tpl_arena_block *head;
    size_t total;    /* bytes obtained from malloc so far */
    size_t limit;    /* 0 = no limit */
    bool over_limit; /* the last failure was the limit, not malloc */
} tpl_arena;

void tpl_arena_init(tpl_arena *a, size_t limit);
void tpl_arena_free(tpl_arena *a);
/* 16-byte aligned, zeroed memory; NULL when out of memory or over the limit
 * (then tpl_arena_status() tells which). */
void *tpl_alloc(tpl_arena *a, size_t size);
/* Copies len bytes and a terminating NUL. */
char *tpl_strndup(tpl_arena *a, const char *s, size_t len);
/* LMC_ERR_LIMIT or LMC_ERR_NOMEM with a message, after a failed tpl_alloc. */
lmc_status tpl_arena_status(const tpl_arena *a);

/* A growable buffer in an arena; data is always NUL-terminated. `limit`
 * (0 = none) caps its length: appends past it fail with LMC_ERR_LIMIT. */
typedef struct tpl_buf {
    tpl_arena *arena;
    char *data;
    size_t len, cap;
    size_t limit;
} tpl_buf;

void tpl_buf_init(tpl_buf *b, tpl_arena *a, size_t limit);
lmc_status tpl_buf_append(tpl_buf *b, const char *s, size_t len);
lmc_status tpl_buf_putc(tpl_buf *b, char c);
lmc_status tpl_buf_puts(tpl_buf *b, const char *s);
lmc_status tpl_buf_printf(tpl_buf *b, const char *fmt, ...) LMC_PRINTF(2, 3);

#endif
