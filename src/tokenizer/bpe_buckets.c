/* Long words for the BPE model (bpe.c): merge_all's order from one bucket of
 * positions per rank instead of one heap over the whole word. */
#include "tok_internal.h"

#include <stdlib.h>
#include <string.h>

size_t tok_bpe_bucket_threshold = 8192;

typedef struct bucket_queue {
    struct tok_bucket *b;
    uint64_t *bits1, *bits2; /* bit r: bucket r not empty; bit w of bits2: bits1[w] != 0 */
    size_t n_bits2;
    size_t lo2; /* bits2[w] == 0 for every w < lo2 */
    size_t entries;
    const tok_sym *sym; /* to prefetch the symbols of the next pops */
} bucket_queue;

/* Each bucket is a 4-ary min-heap of positions: four children share a
 * cache line, so a pop walks half the levels of a binary heap. */
#define BUCKET_D 4u

static bool bq_push(bucket_queue *q, uint32_t rank, uint32_t pos) {
    struct tok_bucket *b = &q->b[rank];
    if (b->n == b->cap) {
        uint32_t c = b->cap ? b->cap * 2 : 4;
        uint32_t *v = realloc(b->pos, (size_t)c * sizeof *v);
        if (!v) return false;
        b->pos = v;
        b->cap = c;
    }
    uint32_t i = b->n++;
    while (i > 0 && b->pos[(i - 1) / BUCKET_D] > pos) {
        b->pos[i] = b->pos[(i - 1) / BUCKET_D];
        i = (i - 1) / BUCKET_D;
    }
    b->pos[i] = pos;
    if (b->n == 1) {
        q->bits1[rank / 64] |= 1ull << (rank % 64);
        q->bits2[rank / 4096] |= 1ull << (rank / 64 % 64);
        if (rank / 4096 < q->lo2) q->lo2 = rank / 4096;
    }
    q->entries++;
    return true;
}

static void bucket_sift_down(uint32_t *h, uint32_t n, uint32_t i, uint32_t x) {
    for (;;) {
        uint32_t c = BUCKET_D * i + 1, m = i;
        uint32_t best = x;
        for (uint32_t k = c; k < c + BUCKET_D && k < n; k++)
            if (h[k] < best) best = h[k], m = k;
        if (m == i) break;
        h[i] = best;
        i = m;
    }
    h[i] = x;
}

static void bq_clear_bit(bucket_queue *q, uint32_t rank) {
    q->bits1[rank / 64] &= ~(1ull << (rank % 64));
    if (!q->bits1[rank / 64]) q->bits2[rank / 4096] &= ~(1ull << (rank / 64 % 64));
}

/* The lowest (rank, position); false when empty. */
static bool bq_pop(bucket_queue *q, uint32_t *rank, uint32_t *pos) {
    for (size_t w2 = q->lo2; w2 < q->n_bits2; w2++) {
        if (!q->bits2[w2]) continue;
        q->lo2 = w2;
        size_t w1 = w2 * 64 + (size_t)__builtin_ctzll(q->bits2[w2]);
        uint32_t r = (uint32_t)(w1 * 64 + (size_t)__builtin_ctzll(q->bits1[w1]));
        struct tok_bucket *b = &q->b[r];
        *rank = r;
        *pos = b->pos[0];
        uint32_t last = b->pos[--b->n];
        if (b->n) {
            bucket_sift_down(b->pos, b->n, 0, last);
            /* The next pops are most likely this bucket's next positions:
             * start loading their symbols, which lie far apart in a long
             * word, while this merge runs. */
            for (uint32_t k = 0; k < 3 && k < b->n; k++) __builtin_prefetch(&q->sym[b->pos[k]], 1);
        } else {
            bq_clear_bit(q, r);
            if (b->cap >= 4096) {
                /* a drained bucket of a long word gives its memory back for
                 * the buckets that fill later */
                free(b->pos);
                b->pos = NULL;
                b->cap = 0;
            }
        }
        q->entries--;
        return true;
    }
    q->lo2 = q->n_bits2;
    return false;
}

/* Drops the stale entries of every bucket (as heap_compact). */
static void bq_compact(const tok_bpe *bpe, tok_bpe_scratch *s, bucket_queue *q, size_t ns) {
    q->entries = 0;
    for (size_t w2 = 0; w2 < q->n_bits2; w2++) {
        uint64_t m2 = q->bits2[w2];
        while (m2) {
            size_t w1 = w2 * 64 + (size_t)__builtin_ctzll(m2);
            m2 &= m2 - 1;
            uint64_t m1 = q->bits1[w1];
            while (m1) {
                uint32_t r = (uint32_t)(w1 * 64 + (size_t)__builtin_ctzll(m1));
                m1 &= m1 - 1;
                struct tok_bucket *b = &q->b[r];
                uint32_t k = 0, rank;
                int32_t id;
                for (uint32_t i = 0; i < b->n; i++) {
                    uint32_t pos = b->pos[i];
                    size_t next = pos + (size_t)s->sym[pos].span;
                    if (s->sym[pos].span && next < ns &&
                        tok_merges_get(&bpe->merges, s->sym[pos].id, s->sym[next].id, &rank, &id) &&
                        rank == r)
                        b->pos[k++] = pos;
                }
                b->n = k;
                for (uint32_t i = k / BUCKET_D + 1; i-- > 0;)
                    if (i < k) bucket_sift_down(b->pos, k, i, b->pos[i]);
                if (!k) bq_clear_bit(q, r);
                q->entries += k;
            }
        }
    }
}

static lmc_status bq_init(const tok_bpe *bpe, tok_bpe_scratch *s, bucket_queue *q) {
    size_t n = (size_t)bpe->merges.max_rank + 1;
    size_t n1 = (n + 63) / 64, n2 = (n1 + 63) / 64;
    if (s->n_buckets < n) {
        for (size_t i = 0; i < s->n_buckets; i++) free(s->buckets[i].pos);
        free(s->buckets);
        free(s->bits1);
        free(s->bits2);
        s->n_buckets = 0;
        s->buckets = calloc(n, sizeof *s->buckets);
        s->bits1 = calloc(n1, sizeof *s->bits1);
        s->bits2 = calloc(n2, sizeof *s->bits2);
        if (!s->buckets || !s->bits1 || !s->bits2)
            return lmc_error(LMC_ERR_NOMEM, "BPE: out of memory");
        s->n_buckets = n;
    }
    for (size_t i = 0; i < n; i++) s->buckets[i].n = 0;
    memset(s->bits1, 0, n1 * sizeof *s->bits1);
    memset(s->bits2, 0, n2 * sizeof *s->bits2);
    *q = (bucket_queue){s->buckets, s->bits1, s->bits2, n2, 0, 0, s->sym};
    return LMC_OK;
}

/* merge_all's order (the lowest rank, then the leftmost) from the rank
 * buckets: a pop finds the first non-empty bucket through the bitmaps and
 * takes its leftmost position, so the work per merge does not grow with the
 * word's length (the heap's does, and misses the cache on long words). */
lmc_status tok_bpe_merge_buckets(const tok_bpe *bpe, tok_bpe_scratch *s, size_t ns) {
    bucket_queue q;
    lmc_status st = bq_init(bpe, s, &q);
    if (st != LMC_OK) return st;
    tok_sym *y = s->sym;
    size_t limit = ns + ns / 4 + 16;
    uint32_t rank, pos;
    int32_t nid;
    bool ok = true;
    for (size_t i = 0; i < ns; i++) y[i].span = y[i].prev = 1;
    for (size_t i = 0; i + 1 < ns && ok; i++)
        if (tok_merges_get(&bpe->merges, y[i].id, y[i + 1].id, &rank, &nid))
            ok = bq_push(&q, rank, (uint32_t)i);
    while (ok && bq_pop(&q, &rank, &pos)) {
        uint32_t r;
        size_t right = pos + (size_t)y[pos].span;
        if (!y[pos].span || right >= ns ||
            !tok_merges_get(&bpe->merges, y[pos].id, y[right].id, &r, &nid) || r != rank)
            continue;
        size_t merged = (size_t)y[pos].span + y[right].span;
        if (merged > UINT16_MAX)
            return lmc_error(LMC_ERR_LIMIT, "BPE: a token of more than %d symbols", UINT16_MAX);
        y[pos].id = nid;
        y[right].span = 0;
        y[pos].span = (uint16_t)merged;
        size_t next = pos + merged;
        if (next < ns) y[next].prev = (uint16_t)merged;
        if (q.entries + 2 > limit) bq_compact(bpe, s, &q, ns);
        if (pos > 0) {
            size_t left = pos - y[pos].prev;
            if (tok_merges_get(&bpe->merges, y[left].id, y[pos].id, &r, &nid))
                ok = bq_push(&q, r, (uint32_t)left);
        }
        if (ok && next < ns && tok_merges_get(&bpe->merges, y[pos].id, y[next].id, &r, &nid))
            ok = bq_push(&q, r, pos);
    }
    return ok ? LMC_OK : lmc_error(LMC_ERR_NOMEM, "BPE: out of memory");
}
