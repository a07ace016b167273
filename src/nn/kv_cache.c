/* KV cache: per layer and KV head, f32. Layers with full attention keep
 * every position in order; sliding-window layers can be rotating caches
 * (position p in slot p % capacity) bounded by the window plus one batch,
 * as mlx-lm's RotatingKVCache (mlx_lm/models/cache.py) and llama.cpp's
 * SWA cache. A batch of T tokens at start.. needs keys from
 * start - window + 1 to start + T - 1, i.e. window + T - 1 slots, so with
 * T <= max_batch the ring of window + max_batch - 1 slots never overwrites
 * a key that the batch's queries still read. */
#include "nn/nn.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* lmc_set_kv_f16: -1 until set, then 0 or 1 */
static atomic_int g_kv_f16 = -1;

void lmc_set_kv_f16(int f16) {
    atomic_store(&g_kv_f16, f16 ? 1 : 0);
}

int lmc_get_kv_f16(void) {
    int v = atomic_load(&g_kv_f16);
    if (v < 0) {
        const char *e = getenv("LMC_KV_F16");
        v = e && *e && *e != '0';
    }
    return v;
}

lmc_status lmc_kv_cache_init(lmc_kv_cache *c, int64_t n_layers, int64_t n_kv_heads,
                             int64_t head_dim, int64_t max_capacity) {
    memset(c, 0, sizeof *c);
    c->layers = calloc((size_t)n_layers, sizeof *c->layers);
    if (!c->layers) return lmc_error(LMC_ERR_NOMEM, "out of memory for the KV cache");
    c->n_layers = n_layers;
    c->n_kv_heads = n_kv_heads;
    c->head_dim = head_dim;
    c->dtype = lmc_get_kv_f16() ? LMC_DTYPE_F16 : LMC_DTYPE_F32;
    c->max_capacity = max_capacity;
    return LMC_OK;
}

static void free_layer(lmc_kv_layer *L) {
    lmc_free_aligned(L->k);
    lmc_free_aligned(L->v);
    L->k = L->v = NULL;
    L->capacity = 0;
}

void lmc_kv_cache_free(lmc_kv_cache *c) {
    for (int64_t l = 0; l < c->n_layers && c->layers; l++) free_layer(&c->layers[l]);
    free(c->layers);
    free(c->tokens);
    memset(c, 0, sizeof *c);
}

lmc_status lmc_kv_cache_set_window(lmc_kv_cache *c, int64_t layer, int64_t window) {
    if (layer < 0 || layer >= c->n_layers || window < 0)
        return lmc_error(LMC_ERR_INVALID_ARG, "KV cache: bad layer %lld or window %lld",
                         (long long)layer, (long long)window);
    if (c->length > 0)
        return lmc_error(LMC_ERR_INVALID_ARG,
                         "KV cache: a layer's window can only change while the cache is empty");
    c->layers[layer].window = window;
    if (!window) c->layers[layer].keep = 0;
    int64_t smallest = 0;
    for (int64_t l = 0; l < c->n_layers; l++) {
        int64_t w = c->layers[l].window;
        if (w > 0 && (smallest == 0 || w < smallest)) smallest = w;
    }
    c->max_batch = smallest ? (smallest > LMC_KV_MIN_BATCH ? smallest : LMC_KV_MIN_BATCH) : 0;
    c->capacity = 0;
    for (int64_t l = 0; l < c->n_layers; l++) {
        lmc_kv_layer *L = &c->layers[l];
        L->limit = L->window ? L->keep + L->window + c->max_batch - 1 : 0;
        if (L->limit > c->max_capacity) L->limit = c->max_capacity;
        /* Empty cache: buffers of the wrong size are simply dropped. */
        if (L->window && L->capacity > L->limit) free_layer(L);
        if (L->capacity > c->capacity) c->capacity = L->capacity;
    }
    return LMC_OK;
}

lmc_status lmc_kv_cache_set_rotating(lmc_kv_cache *c, int64_t layer, int64_t window, int64_t keep) {
    if (layer < 0 || layer >= c->n_layers || window <= 0 || keep < 0)
        return lmc_error(LMC_ERR_INVALID_ARG, "KV cache: bad layer %lld, window %lld or keep %lld",
                         (long long)layer, (long long)window, (long long)keep);
    if (c->length > 0)
        return lmc_error(LMC_ERR_INVALID_ARG,
                         "KV cache: a layer's window can only change while the cache is empty");
    c->layers[layer].keep = keep;
    return lmc_kv_cache_set_window(c, layer, window);
}

static void *regrow(void *old, int64_t heads, int64_t old_cap, int64_t new_cap, int64_t hd,
                    int64_t length, size_t es) {
    uint8_t *p = lmc_alloc_aligned((size_t)(heads * new_cap * hd) * es);
    if (!p) return NULL;
    for (int64_t h = 0; h < heads && old; h++)
        memcpy(p + (size_t)(h * new_cap * hd) * es,
               (const uint8_t *)old + (size_t)(h * old_cap * hd) * es, (size_t)(length * hd) * es);
    return p;
}

lmc_status lmc_kv_cache_reserve(lmc_kv_cache *c, int64_t needed) {
    if (needed > c->max_capacity)
        return lmc_error(LMC_ERR_RANGE, "%lld tokens exceed the context of %lld", (long long)needed,
                         (long long)c->max_capacity);
    if (c->max_batch > 0 && needed - c->length > c->max_batch)
        return lmc_error(LMC_ERR_INVALID_ARG,
                         "a batch of %lld tokens exceeds the %lld a rotating KV cache takes at "
                         "once",
                         (long long)(needed - c->length), (long long)c->max_batch);
    for (int64_t l = 0; l < c->n_layers; l++) {
        lmc_kv_layer *L = &c->layers[l];
        int64_t limit = L->window ? L->limit : c->max_capacity;
        int64_t want = needed < limit ? needed : limit;
        if (want <= L->capacity) continue;
        int64_t cap = L->capacity ? L->capacity : 256;
        while (cap < want) cap *= 2;
        if (cap > limit) cap = limit;
        /* Below its limit a layer has not wrapped yet (a position >= capacity
         * would have grown it first), so positions 0..length-1 sit in slots
         * 0..length-1 and copy over as they are. */
        size_t es = lmc_dtype_size(c->dtype);
        void *k = regrow(L->k, c->n_kv_heads, L->capacity, cap, c->head_dim, c->length, es);
        void *v = regrow(L->v, c->n_kv_heads, L->capacity, cap, c->head_dim, c->length, es);
        if (!k || !v) {
            lmc_free_aligned(k);
            lmc_free_aligned(v);
            return lmc_error(LMC_ERR_NOMEM, "out of memory growing the KV cache to %lld tokens",
                             (long long)cap);
        }
        lmc_free_aligned(L->k);
        lmc_free_aligned(L->v);
        L->k = k;
        L->v = v;
        L->capacity = cap;
        if (cap > c->capacity) c->capacity = cap;
    }
    return LMC_OK;
}

lmc_status lmc_kv_cache_remember(lmc_kv_cache *c, const int32_t *tokens, int64_t start, int64_t n) {
    if (start + n > c->tokens_cap) {
        int64_t cap = c->tokens_cap ? c->tokens_cap : 256;
        while (cap < start + n) cap *= 2;
        int32_t *p = realloc(c->tokens, (size_t)cap * sizeof *p);
        if (!p) return lmc_error(LMC_ERR_NOMEM, "out of memory for the token history");
        c->tokens = p;
        c->tokens_cap = cap;
    }
    memcpy(c->tokens + start, tokens, (size_t)n * sizeof *tokens);
    return LMC_OK;
}

size_t lmc_kv_cache_bytes(const lmc_kv_cache *c) {
    size_t n = 0;
    for (int64_t l = 0; l < c->n_layers; l++)
        n += 2 * (size_t)(c->n_kv_heads * c->layers[l].capacity * c->head_dim) *
             lmc_dtype_size(c->dtype);
    return n;
}

void lmc_kv_cache_store(lmc_kv_cache *c, int64_t layer, int64_t start, const float *k,
                        const float *v, int64_t T) {
    lmc_kv_layer *L = &c->layers[layer];
    int64_t hd = c->head_dim;
    size_t es = lmc_dtype_size(c->dtype);
    for (int64_t t = 0; t < T; t++) {
        int64_t slot = lmc_kv_slot(L, start + t);
        for (int64_t h = 0; h < c->n_kv_heads; h++) {
            size_t dst = (size_t)((h * L->capacity + slot) * hd) * es;
            size_t src = (size_t)((t * c->n_kv_heads + h) * hd);
            lmc_convert_from_f32(c->dtype, k + src, (uint8_t *)L->k + dst, hd);
            lmc_convert_from_f32(c->dtype, v + src, (uint8_t *)L->v + dst, hd);
        }
    }
}
