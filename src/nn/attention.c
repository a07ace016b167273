/* Grouped-query causal attention over the KV cache, as transformers' eager
 * attention: softmax(q k^T * scale + mask) v in float32 (keys and values
 * read as the cache holds them, f32 or f16). Keys are read in
 * position order from their slots (lmc_kv_slot), so a rotating layer's ring
 * gives the same sums in the same order as a full cache. */
#include "nn/nn.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

typedef struct attn_job {
    const lmc_attention_params *p;
    const lmc_kv_cache *c;
    int64_t layer;
    const float *q;
    int64_t start, T;
    float *out;
    atomic_bool failed; /* a worker could not get its score buffer */
} attn_job;

/* The slots of the keys an item sees, as at most three runs of consecutive
 * slots: the sinks [0, sinks), then the ring from lo's slot to the end of
 * the buffer, then from `keep` on after it wraps. */
typedef struct slot_runs {
    int64_t first[3], count[3];
    int n;
} slot_runs;

static slot_runs runs_of(const lmc_kv_layer *L, int64_t sinks, int64_t lo, int64_t n) {
    slot_runs r = {{0}, {0}, 0};
    if (sinks) r.first[r.n] = 0, r.count[r.n++] = sinks;
    int64_t rest = n - sinks, slot = lmc_kv_slot(L, lo);
    while (rest > 0) {
        int64_t m = L->capacity - slot < rest ? L->capacity - slot : rest;
        r.first[r.n] = slot, r.count[r.n++] = m;
        rest -= m;
        slot = L->keep;
    }
    return r;
}

/* One item: token t and KV head kvh with its `group` query heads together,
 * so each block of key and value rows is read once for all of them
 * (lmc_attn_kernels: scores, exp_sum, values). The queries are scaled
 * first. */
static void attn_body(void *ctx, int64_t b, int64_t e, int worker) {
    attn_job *j = ctx;
    (void)worker;
    const lmc_attention_params *p = j->p;
    const lmc_attn_kernels *k = lmc_attn_kernels_get();
    const lmc_kv_layer *L = &j->c->layers[j->layer];
    int64_t hd = p->head_dim, group = p->n_heads / p->n_kv_heads, cap = L->capacity;
    for (int64_t idx = b; idx < e; idx++) {
        int64_t t = idx / p->n_kv_heads, kvh = idx % p->n_kv_heads;
        int64_t pos = j->start + t;
        /* the keys seen: [lo, pos], and a rotating layer's sinks [0, sinks) */
        int64_t window = L->keep ? L->window : p->sliding_window, lo = 0;
        if (window > 0 && pos - window + 1 > 0) lo = pos - window + 1;
        int64_t sinks = L->keep < lo ? L->keep : lo;
        int64_t last = pos; /* the last key seen */
        if (p->prefix > pos + 1 && window <= 0 && !L->keep) last = p->prefix - 1;
        int64_t n = sinks + last - lo + 1;
        /* scores [group][n], then the scaled queries [group][hd] */
        float *s = lmc_thread_scratch(LMC_SCRATCH_ATTENTION,
                                      (size_t)(n * group + group * hd) * sizeof(float));
        if (!s) {
            atomic_store(&j->failed, true);
            return;
        }
        const float *qv = j->q + (t * p->n_heads + kvh * group) * hd; /* [group][hd] */
        float *qs = s + n * group;
        for (int64_t i = 0; i < group * hd; i++) qs[i] = qv[i] * p->scale;
        bool f16 = j->c->dtype == LMC_DTYPE_F16;
        size_t es = f16 ? 2 : 4, row = (size_t)hd * es;
        const uint8_t *keys = (const uint8_t *)L->k + (size_t)(kvh * cap) * row;
        const uint8_t *vals = (const uint8_t *)L->v + (size_t)(kvh * cap) * row;
        slot_runs r = runs_of(L, sinks, lo, n);
        for (int64_t ri = 0, at = 0; ri < r.n; at += r.count[ri++]) {
            const void *kr = keys + (size_t)r.first[ri] * row;
            if (f16)
                k->scores_f16(qs, group, hd, kr, r.count[ri], s + at, n);
            else
                k->scores(qs, group, hd, kr, r.count[ri], s + at, n);
        }
        float *o = j->out + (t * p->n_heads + kvh * group) * hd; /* [group][hd] */
        memset(o, 0, (size_t)(group * hd) * sizeof(float));
        /* each query's exp(score - max) weight the values; the sum of the
         * weights divides the output (hd numbers, not n) */
        float *inv = qs; /* the scaled queries are no longer needed */
        for (int64_t g = 0; g < group; g++) {
            float *sg = s + g * n;
            if (p->softcap > 0)
                for (int64_t i = 0; i < n; i++) sg[i] = tanhf(sg[i] / p->softcap) * p->softcap;
            inv[g] = 1.0f / k->exp_sum(sg, n);
        }
        for (int64_t ri = 0, at = 0; ri < r.n; at += r.count[ri++]) {
            const void *vr = vals + (size_t)r.first[ri] * row;
            if (f16)
                k->values_f16(s + at, n, group, vr, r.count[ri], hd, o);
            else
                k->values(s + at, n, group, vr, r.count[ri], hd, o);
        }
        for (int64_t g = 0; g < group; g++)
            for (int64_t d = 0; d < hd; d++) o[g * hd + d] *= inv[g];
    }
}

lmc_status lmc_attention(const lmc_attention_params *p, const lmc_kv_cache *c, int64_t layer,
                         const float *q, int64_t start, int64_t T, float *out) {
    attn_job j = {p, c, layer, q, start, T, out, false};
    lmc_parallel_for(T * p->n_kv_heads, 1, attn_body, &j);
    if (atomic_load(&j.failed))
        return lmc_error(LMC_ERR_NOMEM, "out of memory for attention scores over %lld positions",
                         (long long)(start + T));
    return LMC_OK;
}

typedef struct full_job {
    const float *q, *k, *v;
    int64_t n, n_heads, hd;
    float scale;
    float *out;
    float *scores; /* [n_heads, n, n] */
} full_job;

static void softmax_rows(void *ctx, int64_t b, int64_t e, int worker) {
    full_job *j = ctx;
    for (int64_t r = b; r < e; r++) lmc_softmax(j->scores + r * j->n, j->n);
}

lmc_status lmc_attention_full(const float *q, const float *k, const float *v, int64_t n,
                              int64_t n_heads, int64_t head_dim, float scale, float *out) {
    size_t bytes = (size_t)n_heads * (size_t)n * (size_t)n * sizeof(float);
    float *scores = lmc_alloc_aligned(bytes);
    if (!scores)
        return lmc_error(LMC_ERR_NOMEM, "out of memory for %lld x %lld attention scores",
                         (long long)n, (long long)n);
    int64_t ld = n_heads * head_dim;
    for (int64_t h = 0; h < n_heads; h++)
        lmc_sgemm(true, n, n, head_dim, scale, q + h * head_dim, ld, k + h * head_dim, ld, 0.0f,
                  scores + h * n * n, n);
    full_job j = {q, k, v, n, n_heads, head_dim, scale, out, scores};
    lmc_parallel_for(n_heads * n, 8, softmax_rows, &j);
    for (int64_t h = 0; h < n_heads; h++)
        lmc_sgemm(false, n, head_dim, n, 1.0f, scores + h * n * n, n, v + h * head_dim, ld, 0.0f,
                  out + h * head_dim, ld);
    lmc_free_aligned(scores);
    return LMC_OK;
}
