/* Standard KV cache: per layer and KV head, positions in order, f32. */
#include "nn/nn.h"

#include <stdlib.h>
#include <string.h>

lmc_status lmc_kv_cache_init(lmc_kv_cache *c, int64_t n_layers, int64_t n_kv_heads,
                             int64_t head_dim, int64_t max_capacity) {
    memset(c, 0, sizeof *c);
    c->layers = calloc((size_t)n_layers, sizeof *c->layers);
    if (!c->layers) return lmc_error(LMC_ERR_NOMEM, "out of memory for the KV cache");
    c->n_layers = n_layers;
    c->n_kv_heads = n_kv_heads;
    c->head_dim = head_dim;
    c->max_capacity = max_capacity;
    return LMC_OK;
}

void lmc_kv_cache_free(lmc_kv_cache *c) {
    for (int64_t l = 0; l < c->n_layers && c->layers; l++) {
        lmc_free_aligned(c->layers[l].k);
        lmc_free_aligned(c->layers[l].v);
    }
    free(c->layers);
    free(c->tokens);
    memset(c, 0, sizeof *c);
}

static float *regrow(float *old, int64_t heads, int64_t old_cap, int64_t new_cap, int64_t hd,
                     int64_t length) {
    float *p = lmc_alloc_aligned((size_t)(heads * new_cap * hd) * sizeof(float));
    if (!p) return NULL;
    for (int64_t h = 0; h < heads && old; h++)
        memcpy(p + h * new_cap * hd, old + h * old_cap * hd, (size_t)(length * hd) * sizeof(float));
    return p;
}

lmc_status lmc_kv_cache_reserve(lmc_kv_cache *c, int64_t needed) {
    if (needed <= c->capacity) return LMC_OK;
    if (needed > c->max_capacity)
        return lmc_error(LMC_ERR_RANGE, "%lld tokens exceed the context of %lld",
                         (long long)needed, (long long)c->max_capacity);
    int64_t cap = c->capacity ? c->capacity : 256;
    while (cap < needed) cap *= 2;
    if (cap > c->max_capacity) cap = c->max_capacity;
    for (int64_t l = 0; l < c->n_layers; l++) {
        lmc_kv_layer *L = &c->layers[l];
        float *k = regrow(L->k, c->n_kv_heads, c->capacity, cap, c->head_dim, c->length);
        float *v = regrow(L->v, c->n_kv_heads, c->capacity, cap, c->head_dim, c->length);
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
    }
    c->capacity = cap;
    return LMC_OK;
}

void lmc_kv_cache_store(lmc_kv_cache *c, int64_t layer, int64_t start, const float *k,
                        const float *v, int64_t T) {
    lmc_kv_layer *L = &c->layers[layer];
    int64_t hd = c->head_dim;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < c->n_kv_heads; h++) {
            size_t dst = (size_t)((h * c->capacity + start + t) * hd);
            size_t src = (size_t)((t * c->n_kv_heads + h) * hd);
            memcpy(L->k + dst, k + src, (size_t)hd * sizeof(float));
            memcpy(L->v + dst, v + src, (size_t)hd * sizeof(float));
        }
}
