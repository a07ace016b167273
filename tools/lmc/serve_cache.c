/* The server's prompt cache: sessions over the one loaded model, each the
 * KV cache of one conversation prefix. A request continues on the session
 * holding the longest prefix of its prompt (lmc_generate computes only the
 * rest), so a growing chat re-prefills only its new turn while other
 * conversations keep their own sessions. Memory is bounded: after each
 * request the least recently used sessions are freed until the sessions'
 * bytes (lmc_session_memory_bytes) fit max_bytes; the one just used stays. */
#include "serve.h"

#include <stdlib.h>
#include <string.h>

void serve_cache_init(serve_cache *c, lmc_model *model, int32_t max_tokens, size_t max_bytes) {
    memset(c, 0, sizeof *c);
    c->model = model;
    c->max_tokens = max_tokens;
    c->max_bytes = max_bytes;
}

void serve_cache_destroy(serve_cache *c) {
    for (int i = 0; i < c->n; i++) lmc_session_free(c->v[i].session);
    free(c->v);
    memset(c, 0, sizeof *c);
}

size_t serve_cache_bytes(const serve_cache *c) {
    size_t n = 0;
    for (int i = 0; i < c->n; i++) n += lmc_session_memory_bytes(c->v[i].session);
    return n;
}

static int32_t common_prefix(lmc_session *s, const int32_t *p, int32_t n) {
    const int32_t *t = lmc_session_tokens(s);
    int32_t m = lmc_session_position(s), k = 0;
    if (m > n) m = n;
    while (k < m && t[k] == p[k]) k++;
    return k;
}

static void evict(serve_cache *c, int i) {
    lmc_session_free(c->v[i].session);
    c->v[i] = c->v[--c->n];
    c->evictions++;
}

lmc_status serve_cache_acquire(serve_cache *c, const int32_t *prompt, int32_t n, lmc_session **out,
                               int32_t *reused) {
    *out = NULL;
    *reused = 0;
    int best = -1, lru = -1;
    int32_t best_len = 0;
    for (int i = 0; i < c->n; i++) {
        int32_t k = common_prefix(c->v[i].session, prompt, n);
        if (k > best_len) best = i, best_len = k;
        if (lru < 0 || c->v[i].last_used < c->v[lru].last_used) lru = i;
    }
    if (best >= 0) {
        /* Continue it when it is (nearly) all prefix of the prompt: the
         * growing-chat case; a few tokens of slack let a re-tokenized reply
         * differ at its end. Otherwise taking it would cut another
         * conversation short: only when memory allows no fresh session. */
        int32_t held = lmc_session_position(c->v[best].session);
        bool extends = held - best_len <= 8 || best_len * 2 >= held;
        if (extends || serve_cache_bytes(c) >= c->max_bytes) {
            c->hits++;
            *out = c->v[best].session;
            *reused = best_len;
            return LMC_OK;
        }
    }
    if (c->n > 0 && serve_cache_bytes(c) >= c->max_bytes) {
        /* full: the least recently used session starts over */
        lmc_session *s = c->v[lru].session;
        lmc_session_reset(s);
        c->evictions++;
        *out = s;
        return LMC_OK;
    }
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 8;
        serve_cache_entry *v = realloc(c->v, (size_t)cap * sizeof *v);
        if (!v) return LMC_ERR_NOMEM;
        c->v = v;
        c->cap = cap;
    }
    lmc_session *s;
    lmc_status st = lmc_session_create(c->model, c->max_tokens, &s);
    if (st != LMC_OK) return st;
    c->v[c->n++] = (serve_cache_entry){.session = s, .last_used = ++c->clock};
    *out = s;
    return LMC_OK;
}

void serve_cache_release(serve_cache *c, lmc_session *s) {
    for (int i = 0; i < c->n; i++)
        if (c->v[i].session == s) c->v[i].last_used = ++c->clock;
    while (c->n > 1 && serve_cache_bytes(c) > c->max_bytes) {
        int lru = -1;
        for (int i = 0; i < c->n; i++)
            if (c->v[i].session != s && (lru < 0 || c->v[i].last_used < c->v[lru].last_used))
                lru = i;
        if (lru < 0) break;
        evict(c, lru);
    }
}
