/* Growable byte buffers, lists of text pieces and a string -> id hash table:
 * the containers the tokenizer pipeline passes between its stages. */
#include "tok_internal.h"

#include <stdlib.h>
#include <string.h>

lmc_status tok_buf_reserve(tok_buf *b, size_t extra) {
    if (b->cap - b->len >= extra) return LMC_OK;
    size_t need = b->len + extra;
    if (need < b->len) return lmc_error(LMC_ERR_NOMEM, "tokenizer: buffer size overflow");
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) return lmc_error(LMC_ERR_NOMEM, "tokenizer: buffer too large");
        cap *= 2;
    }
    char *d = realloc(b->data, cap);
    if (!d) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory (%zu bytes)", cap);
    b->data = d;
    b->cap = cap;
    return LMC_OK;
}

lmc_status tok_buf_append(tok_buf *b, const void *s, size_t n) {
    lmc_status st = tok_buf_reserve(b, n + 1);
    if (st != LMC_OK) return st;
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0; /* always NUL-terminated for convenience */
    return LMC_OK;
}

void tok_buf_free(tok_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

lmc_status tok_list_push(tok_list *l, const char *s, size_t n, int32_t id, bool at_start) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        tok_span *v = realloc(l->v, cap * sizeof *v);
        if (!v) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory");
        l->v = v;
        l->cap = cap;
    }
    size_t off = l->text.len;
    lmc_status st = tok_buf_append(&l->text, s, n);
    if (st != LMC_OK) return st;
    l->v[l->n++] = (tok_span){.off = off, .len = n, .id = id, .at_start = at_start};
    return LMC_OK;
}

lmc_status tok_list_extend(tok_list *l, const char *s, size_t n) {
    lmc_status st = tok_buf_append(&l->text, s, n);
    if (st != LMC_OK) return st;
    l->v[l->n - 1].len += n;
    return LMC_OK;
}

void tok_list_free(tok_list *l) {
    tok_buf_free(&l->text);
    free(l->v);
    memset(l, 0, sizeof *l);
}

void tok_list_swap(tok_list *a, tok_list *b) {
    tok_list t = *a;
    *a = *b;
    *b = t;
}

/* ---- string table ------------------------------------------------------ */

static uint32_t hash_bytes(const char *s, size_t n) {
    /* FNV-1a, 32-bit: token strings are short, this is fast enough and
     * well-distributed for them. */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    /* FNV's low bits are weak for similar short keys: finish with the
     * murmur3 mixer before masking. */
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

static lmc_status rehash(tok_strtab *t, size_t nslots) {
    struct tok_strslot *slots = malloc(nslots * sizeof *slots);
    if (!slots) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory (hash table)");
    for (size_t j = 0; j < nslots; j++) slots[j].ent = -1;
    for (size_t i = 0; i < t->n; i++) {
        const struct tok_strent *x = &t->ents[i];
        size_t j = x->hash & (nslots - 1);
        while (slots[j].ent >= 0) j = (j + 1) & (nslots - 1);
        slots[j] = (struct tok_strslot){x->hash, x->len, x->off, (int32_t)i, x->id, {0}};
        if (x->len <= sizeof slots[j].inline_)
            memcpy(slots[j].inline_, t->pool.data + x->off, x->len);
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = nslots;
    return LMC_OK;
}

lmc_status tok_strtab_reserve(tok_strtab *t, size_t n_keys, size_t n_bytes) {
    lmc_status st = tok_buf_reserve(&t->pool, n_bytes);
    if (st != LMC_OK) return st;
    if (t->cap < n_keys) {
        void *e = realloc(t->ents, n_keys * sizeof *t->ents);
        if (!e) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory (vocab)");
        t->ents = e;
        t->cap = n_keys;
    }
    size_t want = 16;
    while (want < n_keys * 2) want *= 2;
    if (want > t->nslots) return rehash(t, want);
    return LMC_OK;
}

static size_t find_slot(const tok_strtab *t, const char *s, size_t n, uint32_t h) {
    size_t mask = t->nslots - 1, j = h & mask;
    for (;;) {
        const struct tok_strslot *x = &t->slots[j];
        if (x->ent < 0) return j;
        if (x->hash == h && x->len == n &&
            !memcmp(n <= sizeof x->inline_ ? x->inline_ : t->pool.data + x->off, s, n))
            return j;
        j = (j + 1) & mask;
    }
}

uint32_t tok_strtab_hash(const char *s, size_t n) {
    return hash_bytes(s, n);
}

void tok_strtab_prefetch(const tok_strtab *t, uint32_t hash) {
    if (t->nslots) __builtin_prefetch(&t->slots[hash & (t->nslots - 1)]);
}

int32_t tok_strtab_get_hashed(const tok_strtab *t, const char *s, size_t n, uint32_t hash) {
    if (!t->nslots) return -1;
    const struct tok_strslot *x = &t->slots[find_slot(t, s, n, hash)];
    return x->ent >= 0 ? x->id : -1;
}

int32_t tok_strtab_get(const tok_strtab *t, const char *s, size_t n) {
    if (!t->nslots) return -1;
    const struct tok_strslot *x = &t->slots[find_slot(t, s, n, hash_bytes(s, n))];
    return x->ent >= 0 ? x->id : -1;
}

lmc_status tok_strtab_put(tok_strtab *t, const char *s, size_t n, int32_t id) {
    if (n > UINT32_MAX || t->pool.len > UINT32_MAX - n - 1 || t->n >= INT32_MAX)
        return lmc_error(LMC_ERR_LIMIT, "tokenizer: vocabulary too large");
    lmc_status st;
    if ((t->n + 1) * 2 > t->nslots && (st = rehash(t, t->nslots ? t->nslots * 2 : 16)) != LMC_OK)
        return st;
    uint32_t h = hash_bytes(s, n);
    size_t j = find_slot(t, s, n, h);
    if (t->slots[j].ent >= 0) {
        t->ents[t->slots[j].ent].id = id;
        t->slots[j].id = id;
        return LMC_OK;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        void *e = realloc(t->ents, cap * sizeof *t->ents);
        if (!e) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory (vocab)");
        t->ents = e;
        t->cap = cap;
    }
    uint32_t off = (uint32_t)t->pool.len;
    if ((st = tok_buf_append(&t->pool, s, n)) != LMC_OK) return st;
    t->ents[t->n] = (struct tok_strent){.off = off, .len = (uint32_t)n, .id = id, .hash = h};
    t->slots[j] = (struct tok_strslot){h, (uint32_t)n, off, (int32_t)t->n, id, {0}};
    if (n <= sizeof t->slots[j].inline_) memcpy(t->slots[j].inline_, s, n);
    t->n++;
    return LMC_OK;
}

void tok_strtab_free(tok_strtab *t) {
    tok_buf_free(&t->pool);
    free(t->ents);
    free(t->slots);
    memset(t, 0, sizeof *t);
}
