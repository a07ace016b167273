/* Grouped-query causal attention over the KV cache, as transformers' eager
 * attention: softmax(q k^T * scale + mask) v in float32. */
#include "nn/nn.h"

#include <math.h>
#include <string.h>

typedef struct attn_job {
    const lmc_attention_params *p;
    const lmc_kv_cache *c;
    int64_t layer;
    const float *q;
    int64_t start, T;
    float *out;
} attn_job;

static void attn_body(void *ctx, int64_t b, int64_t e, int worker) {
    const attn_job *j = ctx;
    const lmc_attention_params *p = j->p;
    const lmc_kernel_table *k = lmc_kernels();
    const lmc_kv_layer *L = &j->c->layers[j->layer];
    int64_t hd = p->head_dim, group = p->n_heads / p->n_kv_heads, cap = j->c->capacity;
    for (int64_t idx = b; idx < e; idx++) {
        int64_t t = idx / p->n_heads, h = idx % p->n_heads, kvh = h / group;
        int64_t pos = j->start + t;
        int64_t lo = 0;
        if (p->sliding_window > 0 && pos - p->sliding_window + 1 > 0)
            lo = pos - p->sliding_window + 1;
        int64_t n = pos - lo + 1;
        float *s = lmc_thread_scratch(LMC_SCRATCH_ATTENTION, (size_t)n * sizeof(float));
        if (!s) return;
        const float *qv = j->q + (t * p->n_heads + h) * hd;
        const float *keys = L->k + (kvh * cap + lo) * hd;
        const float *vals = L->v + (kvh * cap + lo) * hd;
        for (int64_t i = 0; i < n; i++) {
            float x = k->dot_f32(qv, keys + i * hd, hd) * p->scale;
            if (p->softcap > 0) x = tanhf(x / p->softcap) * p->softcap;
            s[i] = x;
        }
        lmc_softmax(s, n);
        float *o = j->out + (t * p->n_heads + h) * hd;
        memset(o, 0, (size_t)hd * sizeof(float));
        for (int64_t i = 0; i < n; i++) k->axpy(s[i], vals + i * hd, o, hd);
    }
}

void lmc_attention(const lmc_attention_params *p, const lmc_kv_cache *c, int64_t layer,
                   const float *q, int64_t start, int64_t T, float *out) {
    attn_job j = {p, c, layer, q, start, T, out};
    lmc_parallel_for(T * p->n_heads, 1, attn_body, &j);
}
