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

static inline uint64_t load64(const char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint32_t load32(const char *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint64_t mix(uint64_t a, uint64_t b) {
    __extension__ typedef unsigned __int128 u128;
    u128 r = (u128)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

#define K0 0xa0761d6478bd642fULL
#define K1 0xe7037ed1a0b428dbULL
#define K2 0x8ebc6af09c88c6e3ULL

/* wyhash-style: the first 16 bytes (zero-padded, read with overlapping
 * loads, never past the key) and the length, then 16-byte blocks. */
void tok_key_make(tok_key *k, const char *s, size_t n) {
    uint64_t w0 = 0, w1 = 0;
    if (n >= 8) {
        w0 = load64(s);
        if (n > 16)
            w1 = load64(s + 8);
        else if (n > 8)
            w1 = load64(s + n - 8) >> (8 * (16 - n));
    } else if (n >= 4) {
        w0 = load32(s) | ((uint64_t)load32(s + n - 4) << (8 * (n - 4)));
    } else if (n) {
        w0 = (uint64_t)(uint8_t)s[0] | ((uint64_t)(uint8_t)s[n >> 1] << (8 * (n >> 1))) |
             ((uint64_t)(uint8_t)s[n - 1] << (8 * (n - 1)));
    }
    uint64_t h = mix(w0 ^ K0, w1 ^ K1 ^ (uint64_t)n);
    for (size_t i = 16; i < n; i += 16) {
        uint64_t a, b;
        if (i + 16 <= n) {
            a = load64(s + i);
            b = load64(s + i + 8);
        } else {
            a = load64(s + n - 16); /* n > 16 here: overlapping tail */
            b = load64(s + n - 8);
        }
        h = mix(a ^ K1, b ^ h ^ K2);
    }
    k->w0 = w0;
    k->w1 = w1;
    k->hash = (uint32_t)(h ^ (h >> 32));
    k->len = (uint32_t)n;
    k->s = s;
}

void tok_key_rehash_short(tok_key *k) {
    uint64_t h = mix(k->w0 ^ K0, k->w1 ^ K1 ^ (uint64_t)k->len);
    k->hash = (uint32_t)(h ^ (h >> 32));
}

static lmc_status rehash(tok_strtab *t, size_t nslots) {
    struct tok_strslot *slots = malloc(nslots * sizeof *slots);
    if (!slots) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory (hash table)");
    for (size_t j = 0; j < nslots; j++) slots[j].ent = -1;
    for (size_t i = 0; i < t->n; i++) {
        const struct tok_strent *x = &t->ents[i];
        size_t j = x->hash & (nslots - 1);
        while (slots[j].ent >= 0) j = (j + 1) & (nslots - 1);
        tok_key k;
        tok_key_make(&k, t->pool.data + x->off, x->len);
        slots[j] = (struct tok_strslot){k.w0, k.w1, x->hash, x->len, (int32_t)i, x->id};
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

static inline size_t find_slot(const tok_strtab *t, const tok_key *k) {
    size_t mask = t->nslots - 1, j = k->hash & mask;
    for (;;) {
        const struct tok_strslot *x = &t->slots[j];
        if (x->ent < 0) return j;
        if (x->hash == k->hash && x->len == k->len && x->w0 == k->w0 && x->w1 == k->w1 &&
            (k->len <= 16 ||
             !memcmp(t->pool.data + t->ents[x->ent].off + 16, k->s + 16, k->len - 16)))
            return j;
        j = (j + 1) & mask;
    }
}

int32_t tok_strtab_get_key(const tok_strtab *t, const tok_key *k) {
    if (!t->nslots) return -1;
    const struct tok_strslot *x = &t->slots[find_slot(t, k)];
    return x->ent >= 0 ? x->id : -1;
}

int32_t tok_strtab_get(const tok_strtab *t, const char *s, size_t n) {
    if (!t->nslots) return -1;
    tok_key k;
    tok_key_make(&k, s, n);
    return tok_strtab_get_key(t, &k);
}

lmc_status tok_strtab_put_pooled(tok_strtab *t, const tok_key *k, uint32_t off, int32_t id) {
    if (t->n >= INT32_MAX) return lmc_error(LMC_ERR_LIMIT, "tokenizer: vocabulary too large");
    lmc_status st;
    if ((t->n + 1) * 2 > t->nslots && (st = rehash(t, t->nslots ? t->nslots * 2 : 16)) != LMC_OK)
        return st;
    size_t j = find_slot(t, k);
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
    t->ents[t->n] = (struct tok_strent){.off = off, .len = k->len, .id = id, .hash = k->hash};
    t->slots[j] = (struct tok_strslot){k->w0, k->w1, k->hash, k->len, (int32_t)t->n, id};
    t->n++;
    return LMC_OK;
}

lmc_status tok_strtab_put(tok_strtab *t, const char *s, size_t n, int32_t id) {
    if (n > UINT32_MAX || t->pool.len > UINT32_MAX - n - 1 || t->n >= INT32_MAX)
        return lmc_error(LMC_ERR_LIMIT, "tokenizer: vocabulary too large");
    tok_key k;
    tok_key_make(&k, s, n);
    lmc_status st;
    if ((t->n + 1) * 2 > t->nslots && (st = rehash(t, t->nslots ? t->nslots * 2 : 16)) != LMC_OK)
        return st;
    size_t j = find_slot(t, &k);
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
    t->ents[t->n] = (struct tok_strent){.off = off, .len = k.len, .id = id, .hash = k.hash};
    t->slots[j] = (struct tok_strslot){k.w0, k.w1, k.hash, k.len, (int32_t)t->n, id};
    t->n++;
    return LMC_OK;
}

void tok_strtab_free(tok_strtab *t) {
    tok_buf_free(&t->pool);
    free(t->ents);
    free(t->slots);
    memset(t, 0, sizeof *t);
}
