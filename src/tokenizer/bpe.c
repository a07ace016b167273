/* The BPE model: tokenizers/src/models/bpe/{model.rs,word.rs,serialization.rs}.
 * Merge ranks live in an open-addressing table keyed by the (left, right) id
 * pair; each word is merged over an array of symbols linked by their spans
 * (Word::merge_all), with an 8-ary heap of pending merges for words shorter
 * than tok_bpe_bucket_threshold and one bucket of positions per rank for
 * longer ones, so a word costs O(n log n) in its length. */
#include "tok_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- merge table ------------------------------------------------------- */

static lmc_status merges_init(tok_merge_map *m, size_t n) {
    size_t ns = 16;
    while (ns < n * 2) ns *= 2;
    m->slots = malloc(ns * sizeof *m->slots);
    if (!m->slots) return lmc_error(LMC_ERR_NOMEM, "BPE: out of memory");
    for (size_t j = 0; j < ns; j++) m->slots[j].key = UINT64_MAX;
    m->nslots = ns;
    m->n = 0;
    return LMC_OK;
}

static void merges_insert(tok_merge_map *m, struct tok_merge_slot x) {
    size_t mask = m->nslots - 1, j = tok_pair_hash(x.key) & mask;
    while (m->slots[j].key != UINT64_MAX && m->slots[j].key != x.key) j = (j + 1) & mask;
    if (m->slots[j].key == UINT64_MAX) m->n++;
    m->slots[j] = x;
}

/* HF collects the merges into a HashMap, so a repeated pair keeps the rank
 * and result of its last occurrence. */
static lmc_status merges_put(tok_merge_map *m, int32_t a, int32_t b, uint32_t rank, int32_t id) {
    if ((m->n + 1) * 2 > m->nslots) {
        tok_merge_map g = {0};
        lmc_status st = merges_init(&g, m->nslots);
        if (st != LMC_OK) return st;
        for (size_t i = 0; i < m->nslots; i++)
            if (m->slots[i].key != UINT64_MAX) merges_insert(&g, m->slots[i]);
        free(m->slots);
        *m = g;
    }
    merges_insert(m, (struct tok_merge_slot){tok_pair_key(a, b), rank, id});
    if (rank > m->max_rank) m->max_rank = rank;
    return LMC_OK;
}

/* ---- loading ----------------------------------------------------------- */

/* Vocabulary entries and merges are resolved in batches: hash all keys,
 * prefetch their slots, then insert or look them up, so the cache misses of
 * a batch overlap instead of adding up (the vocabulary table is far larger
 * than the caches). */
#define VOCAB_BATCH 32
#define MERGE_BATCH 32

typedef struct vocab_ctx {
    tok_bpe *bpe;
    struct {
        tok_key key;
        uint32_t off;
        int32_t id;
    } items[VOCAB_BATCH];
    size_t n;
} vocab_ctx;

static lmc_status vocab_flush(vocab_ctx *x) {
    tok_strtab *v = &x->bpe->vocab;
    for (size_t i = 0; i < x->n; i++) {
        tok_key *k = &x->items[i].key;
        k->s = v->pool.data + x->items[i].off; /* the pool may have moved */
        lmc_status st = tok_strtab_put_pooled(v, k, x->items[i].off, x->items[i].id);
        if (st != LMC_OK) return st;
    }
    x->n = 0;
    return LMC_OK;
}

static lmc_status vocab_entry(void *ctx, const char *key, size_t key_len, int64_t value) {
    vocab_ctx *x = ctx;
    tok_bpe *bpe = x->bpe;
    tok_strtab *v = &bpe->vocab;
    if (value < 0 || value >= INT32_MAX)
        return lmc_error(LMC_ERR_FORMAT, "model.vocab: id %lld of \"%.*s\" is out of range",
                         (long long)value, (int)(key_len > 40 ? 40 : key_len), key);
    if (key_len > UINT32_MAX || v->pool.len > UINT32_MAX - key_len - 1)
        return lmc_error(LMC_ERR_LIMIT, "tokenizer: vocabulary too large");
    if ((int32_t)value > bpe->max_id) bpe->max_id = (int32_t)value;
    uint32_t off = (uint32_t)v->pool.len;
    lmc_status st = tok_buf_append(&v->pool, key, key_len);
    if (st != LMC_OK) return st;
    tok_key *k = &x->items[x->n].key;
    tok_key_make(k, key, key_len);
    tok_strtab_prefetch(v, k->hash);
    x->items[x->n].off = off;
    x->items[x->n].id = (int32_t)value;
    return ++x->n == VOCAB_BATCH ? vocab_flush(x) : LMC_OK;
}

typedef struct merge_item {
    size_t index;
    tok_key key[3];     /* a, b, merged token */
    size_t long_off[3]; /* offset in the batch text of keys over 16 bytes */
} merge_item;

typedef struct merge_ctx {
    tok_bpe *bpe;
    size_t prefix_len;
    tok_buf text; /* bytes of the keys over 16 bytes */
    merge_item items[MERGE_BATCH];
    size_t n;
} merge_ctx;

static lmc_status missing(size_t index, const char *s, size_t n) {
    return lmc_error(LMC_ERR_FORMAT, "merge %zu: token \"%.*s\" is not in the vocabulary",
                     index + 1, (int)(n > 60 ? 60 : n), s);
}

static lmc_status key_missing(size_t index, const tok_key *k) {
    char b[16];
    memcpy(b, &k->w0, 8);
    memcpy(b + 8, &k->w1, 8);
    return missing(index, k->len <= 16 ? b : k->s, k->len);
}

static lmc_status merge_flush(merge_ctx *x) {
    const tok_strtab *v = &x->bpe->vocab;
    tok_merge_map *mm = &x->bpe->merges;
    int32_t ids[MERGE_BATCH][3];
    for (size_t i = 0; i < x->n; i++) {
        merge_item *m = &x->items[i];
        for (int k = 0; k < 3; k++) {
            if (m->key[k].len > 16) m->key[k].s = x->text.data + m->long_off[k];
            ids[i][k] = tok_strtab_get_key(v, &m->key[k]);
            if (ids[i][k] < 0) return key_missing(m->index, &m->key[k]);
        }
        __builtin_prefetch(
            &mm->slots[tok_pair_hash(tok_pair_key(ids[i][0], ids[i][1])) & (mm->nslots - 1)]);
    }
    for (size_t i = 0; i < x->n; i++) {
        lmc_status st =
            merges_put(mm, ids[i][0], ids[i][1], (uint32_t)x->items[i].index, ids[i][2]);
        if (st != LMC_OK) return st;
    }
    x->n = 0;
    tok_buf_clear(&x->text);
    return LMC_OK;
}

/* Prepares key k of m from s[0..n); keys over 16 bytes are kept in x->text. */
static lmc_status merge_key(merge_ctx *x, merge_item *m, int k, const char *s, size_t n) {
    tok_key_make(&m->key[k], s, n);
    if (n > 16) {
        m->long_off[k] = x->text.len;
        return tok_buf_append(&x->text, s, n);
    }
    return LMC_OK;
}

static lmc_status merge_entry(void *vctx, size_t index, const char *a, size_t a_len, const char *b,
                              size_t b_len) {
    merge_ctx *x = vctx;
    if (!b) /* HF Error::BadMerges(rank + 1) */
        return lmc_error(LMC_ERR_FORMAT, "merge %zu: \"%.*s\" is not two tokens split by a space",
                         index + 1, (int)(a_len > 60 ? 60 : a_len), a);
    if (index >= UINT32_MAX) return lmc_error(LMC_ERR_LIMIT, "BPE: too many merges");
    /* The merged token drops the right part's continuing_subword_prefix
     * (BpeBuilder::build). */
    if (b_len < x->prefix_len)
        return lmc_error(LMC_ERR_FORMAT, "merge %zu: right part shorter than the subword prefix",
                         index + 1);
    merge_item *m = &x->items[x->n];
    m->index = index;
    lmc_status st;
    if ((st = merge_key(x, m, 0, a, a_len)) != LMC_OK ||
        (st = merge_key(x, m, 1, b, b_len)) != LMC_OK)
        return st;
    const char *r = b + x->prefix_len;
    size_t r_len = b_len - x->prefix_len, n = a_len + r_len;
    if (n <= 16) {
        /* The merged key from the words of its parts: no copy. */
        __extension__ typedef unsigned __int128 u128;
        tok_key rk;
        const tok_key *rp = &m->key[1];
        if (x->prefix_len) {
            tok_key_make(&rk, r, r_len);
            rp = &rk;
        }
        u128 w = (u128)m->key[0].w0 | ((u128)m->key[0].w1 << 64);
        if (r_len) w |= ((u128)rp->w0 | ((u128)rp->w1 << 64)) << (8 * a_len);
        tok_key *k = &m->key[2];
        k->w0 = (uint64_t)w;
        k->w1 = (uint64_t)(w >> 64);
        k->len = (uint32_t)n;
        k->s = NULL;
        tok_key_rehash_short(k);
    } else {
        size_t off = x->text.len;
        if ((st = tok_buf_append(&x->text, a, a_len)) != LMC_OK ||
            (st = tok_buf_append(&x->text, r, r_len)) != LMC_OK)
            return st;
        tok_key_make(&m->key[2], x->text.data + off, n);
        m->long_off[2] = off;
    }
    const tok_strtab *v = &x->bpe->vocab;
    for (int k = 0; k < 3; k++) tok_strtab_prefetch(v, m->key[k].hash);
    return ++x->n == MERGE_BATCH ? merge_flush(x) : LMC_OK;
}

static lmc_status opt_string(const json_t *model, const char *key, char **out) {
    bool bad = false;
    const char *s = lmc_json_string(model, key, NULL, &bad);
    if (bad) return lmc_error(LMC_ERR_FORMAT, "model.%s must be a string or null", key);
    *out = NULL;
    if (s && !(*out = lmc_strdup(s))) return lmc_error(LMC_ERR_NOMEM, "BPE: out of memory");
    return LMC_OK;
}

static size_t count_entries(const char *s, size_t n) {
    /* A cheap over-estimate of the number of entries, to size tables once. */
    size_t c = 1;
    for (size_t i = 0; i < n; i++) c += s[i] == ',';
    return c;
}

#define META "\xE2\x96\x81" /* U+2581, SentencePiece's space */

static void find_meta_boundaries(tok_bpe *bpe) {
    bpe->split_meta = false;
    bpe->n_meta_blockers = 0;
    if ((bpe->prefix && *bpe->prefix) || (bpe->suffix && *bpe->suffix)) return;
    if (tok_strtab_get(&bpe->vocab, META, 3) < 0) return;
    const tok_strtab *v = &bpe->vocab;
    for (size_t i = 0; i < v->n; i++) {
        const char *s = v->pool.data + v->ents[i].off;
        size_t n = v->ents[i].len;
        for (const char *p = s + 1; p + 3 <= s + n && (p = memmem(p, (size_t)(s + n - p), META, 3));
             p += 3) {
            /* The character before this "▁". */
            const char *q = p - 1;
            while (q > s && ((uint8_t)*q & 0xC0) == 0x80) q--;
            int32_t cp;
            lmc_utf8_decode(q, (size_t)(p - q), &cp);
            if (cp == 0x2581) continue;
            bool known = false;
            for (int k = 0; k < bpe->n_meta_blockers; k++) known |= bpe->meta_blockers[k] == cp;
            if (known) continue;
            if (bpe->n_meta_blockers == 16) return; /* too many: keep words whole */
            bpe->meta_blockers[bpe->n_meta_blockers++] = cp;
        }
    }
    bpe->split_meta = true;
}

lmc_status tok_bpe_load(tok_bpe *bpe, const json_t *model, const tok_model_json *raw) {
    memset(bpe, 0, sizeof *bpe);
    bpe->unk_id = -1;
    bpe->max_id = -1;
    for (int i = 0; i < 256; i++) bpe->byte_ids[i] = -1;
    bool bad = false;
    lmc_status st;
    const json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout) &&
        !(json_is_number(dropout) && json_number_value(dropout) == 0.0))
        return lmc_error(LMC_ERR_UNSUPPORTED, "BPE: dropout is not supported (must be null)");
    bpe->byte_fallback = lmc_json_bool(model, "byte_fallback", false, &bad);
    bpe->fuse_unk = lmc_json_bool(model, "fuse_unk", false, &bad);
    bpe->ignore_merges = lmc_json_bool(model, "ignore_merges", false, &bad);
    if (bad)
        return lmc_error(LMC_ERR_FORMAT,
                         "BPE: byte_fallback/fuse_unk/ignore_merges must be booleans");
    if ((st = opt_string(model, "continuing_subword_prefix", &bpe->prefix)) != LMC_OK ||
        (st = opt_string(model, "end_of_word_suffix", &bpe->suffix)) != LMC_OK)
        return st;
    if (!raw->vocab) return lmc_error(LMC_ERR_FORMAT, "BPE: model.vocab is missing");
    if (!raw->merges) return lmc_error(LMC_ERR_FORMAT, "BPE: model.merges is missing");

    size_t nv = count_entries(raw->vocab, raw->vocab_len);
    if ((st = tok_strtab_reserve(&bpe->vocab, nv, raw->vocab_len)) != LMC_OK) return st;
    double t0 = lmc_time_now();
    vocab_ctx *vc = malloc(sizeof *vc);
    if (!vc) return lmc_error(LMC_ERR_NOMEM, "BPE: out of memory");
    vc->bpe = bpe;
    vc->n = 0;
    st = tok_json_scan_vocab(raw->vocab, raw->vocab_len, vocab_entry, vc);
    if (st == LMC_OK) st = vocab_flush(vc);
    free(vc);
    if (st != LMC_OK) return st;
    double t1 = lmc_time_now();

    if ((st = merges_init(&bpe->merges, count_entries(raw->merges, raw->merges_len))) != LMC_OK)
        return st;
    merge_ctx *mc = calloc(1, sizeof *mc);
    if (!mc) return lmc_error(LMC_ERR_NOMEM, "BPE: out of memory");
    mc->bpe = bpe;
    mc->prefix_len = bpe->prefix ? strlen(bpe->prefix) : 0;
    st = tok_json_scan_merges(raw->merges, raw->merges_len, merge_entry, mc);
    if (st == LMC_OK) st = merge_flush(mc);
    tok_buf_free(&mc->text);
    free(mc);
    if (st != LMC_OK) return lmc_error_prefix(st, "BPE");
    lmc_log(LMC_LOG_DEBUG, "tokenizer: vocab %zu entries %.1f ms, merges %zu %.1f ms", bpe->vocab.n,
            (t1 - t0) * 1e3, bpe->merges.n, (lmc_time_now() - t1) * 1e3);

    const char *unk = lmc_json_string(model, "unk_token", NULL, &bad);
    if (bad) return lmc_error(LMC_ERR_FORMAT, "BPE: unk_token must be a string or null");
    if (unk) {
        /* HF only fails when an unknown character needs the unk token; an
         * unk token outside the vocabulary then raises UnkTokenOutOfVocabulary. */
        bpe->unk_id = tok_strtab_get(&bpe->vocab, unk, strlen(unk));
        if (bpe->unk_id < 0)
            return lmc_error(LMC_ERR_FORMAT, "BPE: unk_token \"%s\" is not in the vocabulary", unk);
    }
    find_meta_boundaries(bpe);
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        bpe->byte_ids[b] = tok_strtab_get(&bpe->vocab, name, 6);
    }
    return LMC_OK;
}

void tok_bpe_free(tok_bpe *bpe) {
    tok_strtab_free(&bpe->vocab);
    free(bpe->merges.slots);
    free(bpe->prefix);
    free(bpe->suffix);
    memset(bpe, 0, sizeof *bpe);
}

/* ---- encoding ---------------------------------------------------------- */

void tok_bpe_scratch_free(tok_bpe_scratch *s) {
    free(s->sym);
    free(s->heap);
    for (size_t i = 0; i < s->n_buckets; i++) free(s->buckets[i].pos);
    free(s->buckets);
    free(s->bits1);
    free(s->bits2);
    tok_buf_free(&s->tmp);
    tok_strtab_free(&s->cache);
    free(s->cache_ids);
    memset(s, 0, sizeof *s);
}

static lmc_status push_id(int32_t **ids, size_t *n, size_t *cap, int32_t id) {
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        int32_t *v = realloc(*ids, c * sizeof *v);
        if (!v) return lmc_error(LMC_ERR_NOMEM, "tokenizer: out of memory (ids)");
        *ids = v;
        *cap = c;
    }
    (*ids)[(*n)++] = id;
    return LMC_OK;
}

/* A 4-ary min-heap of rank << 32 | position: the lowest rank first, then
 * the leftmost position, as HF's BinaryHeap of Merge orders them. Four
 * children share a cache line, so a pop touches half the lines a binary
 * heap does on long words. */
#define HEAP_D 8
static void heap_push(uint64_t *h, size_t *n, uint64_t x) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / HEAP_D;
        if (h[p] <= x) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static void heap_sift_down(uint64_t *h, size_t n, size_t i, uint64_t x) {
    for (;;) {
        size_t c = HEAP_D * i + 1, m = i;
        uint64_t best = x;
        for (size_t k = c; k < c + HEAP_D && k < n; k++)
            if (h[k] < best) best = h[k], m = k;
        if (m == i) break;
        h[i] = best;
        i = m;
    }
    h[i] = x;
}

static uint64_t heap_pop(uint64_t *h, size_t *n) {
    uint64_t top = h[0], x = h[--*n];
    if (*n) heap_sift_down(h, *n, 0, x);
    return top;
}

static lmc_status add_symbol(tok_bpe_scratch *s, size_t *ns, int32_t id) {
    if (*ns == s->sym_cap) {
        size_t c = s->sym_cap ? s->sym_cap * 2 : 64;
        tok_sym *v = realloc(s->sym, c * sizeof *v);
        if (!v) return lmc_error(LMC_ERR_NOMEM, "BPE: out of memory");
        s->sym = v;
        s->sym_cap = c;
    }
    s->sym[(*ns)++].id = id;
    return LMC_OK;
}

/* BPE::merge_word: one symbol per character (with prefix/suffix), byte
 * fallback or (fused) unk for characters outside the vocabulary. */
static lmc_status split_chars(const tok_bpe *bpe, const char *w, size_t n, tok_bpe_scratch *s,
                              size_t *ns) {
    bool affix = (bpe->prefix && *bpe->prefix) || (bpe->suffix && *bpe->suffix);
    int32_t unk = -1;
    lmc_status st;
    *ns = 0;
    if (!affix && n > s->sym_cap) {
        /* Without affixes a word has at most one symbol per byte: reserve
         * them at once (no doubling slack and no copies for long words). */
        size_t c = n;
        if (n < 65536 && c < 2 * s->sym_cap) c = 2 * s->sym_cap;
        if (c < 64) c = 64;
        tok_sym *v = realloc(s->sym, c * sizeof *v);
        if (!v) return lmc_error(LMC_ERR_NOMEM, "BPE: out of memory");
        s->sym = v;
        s->sym_cap = c;
    }
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t cl = lmc_utf8_decode(w + i, n - i, &cp);
        const char *key = w + i;
        size_t key_len = cl;
        if (affix) {
            tok_buf_clear(&s->tmp);
            if (i > 0 && bpe->prefix)
                st = tok_buf_append(&s->tmp, bpe->prefix, strlen(bpe->prefix));
            else
                st = LMC_OK;
            if (st == LMC_OK) st = tok_buf_append(&s->tmp, w + i, cl);
            if (st == LMC_OK && i + cl == n && bpe->suffix)
                st = tok_buf_append(&s->tmp, bpe->suffix, strlen(bpe->suffix));
            if (st != LMC_OK) return st;
            key = s->tmp.data;
            key_len = s->tmp.len;
        }
        i += cl;
        int32_t id = tok_strtab_get(&bpe->vocab, key, key_len);
        if (id >= 0) {
            if (unk >= 0 && (st = add_symbol(s, ns, unk)) != LMC_OK) return st;
            unk = -1;
            if ((st = add_symbol(s, ns, id)) != LMC_OK) return st;
            continue;
        }
        if (bpe->byte_fallback) {
            bool all = true;
            for (size_t k = 0; k < key_len; k++) all = all && bpe->byte_ids[(uint8_t)key[k]] >= 0;
            if (all) {
                /* HF adds the byte tokens without flushing a pending unk. */
                for (size_t k = 0; k < key_len; k++)
                    if ((st = add_symbol(s, ns, bpe->byte_ids[(uint8_t)key[k]])) != LMC_OK)
                        return st;
                continue;
            }
        }
        if (bpe->unk_id >= 0) {
            /* a fused unk covers the whole run of unknown characters */
            if (unk < 0 || !bpe->fuse_unk) {
                if (unk >= 0 && (st = add_symbol(s, ns, unk)) != LMC_OK) return st;
                unk = bpe->unk_id;
            }
        }
        /* Without unk_token HF silently drops the character. */
    }
    if (unk >= 0 && (st = add_symbol(s, ns, unk)) != LMC_OK) return st;
    return LMC_OK;
}

/* Keeps the heap's live entries only (a merge leaves up to two stale ones
 * behind): called when the heap is full, it keeps memory at 1.25 entries a
 * symbol and time linear, since each compaction follows at least a quarter
 * of the word's length in merges. */
static void heap_compact(const tok_bpe *bpe, tok_bpe_scratch *s, size_t ns, size_t *hn) {
    size_t k = 0;
    for (size_t i = 0; i < *hn; i++) {
        uint64_t e = s->heap[i];
        uint32_t pos = (uint32_t)e, rank;
        int32_t id;
        size_t next = pos + (size_t)s->sym[pos].span;
        if (s->sym[pos].span && next < ns &&
            tok_merges_get(&bpe->merges, s->sym[pos].id, s->sym[next].id, &rank, &id) &&
            rank == (uint32_t)(e >> 32))
            s->heap[k++] = e;
    }
    *hn = k;
    for (size_t i = k / HEAP_D + 1; i-- > 0;)
        if (i < k) heap_sift_down(s->heap, k, i, s->heap[i]);
}

static inline uint64_t heap_key(uint32_t rank, size_t pos) {
    return (uint64_t)rank << 32 | (uint32_t)pos;
}

/* Word::merge_all without dropout: the lowest-ranked pair merges first
 * (leftmost among equals), until no pair of neighbours has a merge. */
static lmc_status merge_all(const tok_bpe *bpe, tok_bpe_scratch *s, size_t ns) {
    if (ns < 2) return LMC_OK;
    if (ns > UINT32_MAX) return lmc_error(LMC_ERR_LIMIT, "BPE: a word of %zu symbols", ns);
    if (ns >= tok_bpe_bucket_threshold) return tok_bpe_merge_buckets(bpe, s, ns);
    size_t cap = ns + ns / 4 + 16;
    if (s->heap_cap < cap) {
        uint64_t *h = realloc(s->heap, cap * sizeof *h);
        if (!h) return lmc_error(LMC_ERR_NOMEM, "BPE: out of memory");
        s->heap = h;
        s->heap_cap = cap;
    }
    tok_sym *y = s->sym;
    size_t hn = 0;
    for (size_t i = 0; i < ns; i++) {
        y[i].span = 1;
        y[i].prev = 1;
    }
    uint32_t rank;
    int32_t nid;
    for (size_t i = 0; i + 1 < ns; i++)
        if (tok_merges_get(&bpe->merges, y[i].id, y[i + 1].id, &rank, &nid))
            heap_push(s->heap, &hn, heap_key(rank, i));
    while (hn) {
        uint64_t top = heap_pop(s->heap, &hn);
        size_t pos = (uint32_t)top, right = pos + y[pos].span;
        /* Skip entries made stale by earlier merges. */
        if (!y[pos].span || right >= ns ||
            !tok_merges_get(&bpe->merges, y[pos].id, y[right].id, &rank, &nid) ||
            rank != (uint32_t)(top >> 32))
            continue;
        size_t merged = (size_t)y[pos].span + y[right].span;
        if (merged > UINT16_MAX)
            return lmc_error(LMC_ERR_LIMIT, "BPE: a token of more than %d symbols", UINT16_MAX);
        y[pos].id = nid;
        y[right].span = 0;
        y[pos].span = (uint16_t)merged;
        size_t next = pos + merged;
        if (next < ns) y[next].prev = (uint16_t)merged;
        if (hn + 2 > s->heap_cap) heap_compact(bpe, s, ns, &hn);
        if (pos > 0) {
            size_t left = pos - y[pos].prev;
            if (tok_merges_get(&bpe->merges, y[left].id, y[pos].id, &rank, &nid))
                heap_push(s->heap, &hn, heap_key(rank, left));
        }
        if (next < ns && tok_merges_get(&bpe->merges, y[pos].id, y[next].id, &rank, &nid))
            heap_push(s->heap, &hn, heap_key(rank, pos));
    }
    return LMC_OK;
}

#define CACHE_MAX_WORD 256
#define CACHE_MAX_ENTRIES 200000

static lmc_status encode_segment(const tok_bpe *bpe, const char *w, size_t n, tok_bpe_scratch *s,
                                 int32_t **ids, size_t *n_ids, size_t *cap_ids) {
    lmc_status st;
    bool cacheable = n <= CACHE_MAX_WORD;
    if (cacheable) {
        int32_t at = tok_strtab_get(&s->cache, w, n);
        if (at >= 0) {
            int32_t len = s->cache_ids[at];
            for (int32_t k = 0; k < len; k++)
                if ((st = push_id(ids, n_ids, cap_ids, s->cache_ids[at + 1 + k])) != LMC_OK)
                    return st;
            return LMC_OK;
        }
    }
    size_t ns;
    if ((st = split_chars(bpe, w, n, s, &ns)) != LMC_OK) return st;
    if ((st = merge_all(bpe, s, ns)) != LMC_OK) return st;
    size_t first = *n_ids;
    for (size_t i = 0; i<ns; i += ns> 1 ? s->sym[i].span : 1)
        if ((st = push_id(ids, n_ids, cap_ids, s->sym[i].id)) != LMC_OK) return st;
    if (cacheable && s->cache.n < CACHE_MAX_ENTRIES && s->cache_ids_len < INT32_MAX / 2) {
        size_t k = *n_ids - first;
        if (s->cache_ids_len + k + 1 > s->cache_ids_cap) {
            size_t c = s->cache_ids_cap ? s->cache_ids_cap * 2 : 1024;
            while (c < s->cache_ids_len + k + 1) c *= 2;
            int32_t *v = realloc(s->cache_ids, c * sizeof *v);
            if (!v) return LMC_OK; /* the cache is optional */
            s->cache_ids = v;
            s->cache_ids_cap = c;
        }
        int32_t at = (int32_t)s->cache_ids_len;
        s->cache_ids[s->cache_ids_len++] = (int32_t)k;
        if (k) memcpy(s->cache_ids + s->cache_ids_len, *ids + first, k * sizeof(int32_t));
        s->cache_ids_len += k;
        if (tok_strtab_put(&s->cache, w, n, at) != LMC_OK) lmc_clear_error();
    }
    return LMC_OK;
}

lmc_status tok_bpe_encode_word(const tok_bpe *bpe, const char *w, size_t n, tok_bpe_scratch *s,
                               int32_t **ids, size_t *n_ids, size_t *cap_ids) {
    if (!n) return LMC_OK;
    if (bpe->ignore_merges) {
        int32_t id = tok_strtab_get(&bpe->vocab, w, n);
        if (id >= 0) return push_id(ids, n_ids, cap_ids, id);
    }
    if (!bpe->split_meta) return encode_segment(bpe, w, n, s, ids, n_ids, cap_ids);
    size_t start = 0;
    int32_t prev = -1;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t cl = lmc_utf8_decode(w + i, n - i, &cp);
        if (cp == 0x2581 && i > start && prev != 0x2581) {
            bool blocked = false;
            for (int k = 0; k < bpe->n_meta_blockers; k++) blocked |= bpe->meta_blockers[k] == prev;
            if (!blocked) {
                lmc_status st = encode_segment(bpe, w + start, i - start, s, ids, n_ids, cap_ids);
                if (st != LMC_OK) return st;
                start = i;
            }
        }
        prev = cp;
        i += cl;
    }
    return encode_segment(bpe, w + start, n - start, s, ids, n_ids, cap_ids);
}
