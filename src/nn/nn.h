/* Layers built from kernels: linear, embedding, rope, attention, KV cache.
 * Weights are bound by name from an lmc_weights and read in place. */
#ifndef LMC_NN_H
#define LMC_NN_H

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "nn/config.h"
#include "tensor/safetensors.h"

/* ---- linear ---- */

typedef struct lmc_linear {
    const lmc_tensor *weight; /* dense [out, in], or the packed U32 weight */
    const lmc_tensor *bias;   /* [out] or NULL */
    bool quantized;           /* MLX affine: qw holds the view */
    lmc_qweight qw;
    int64_t in, out;
} lmc_linear;

/* Bits and group size of a quantized module: inferred from the packed
 * width and the scales' width for `in` inputs, and checked against
 * config.json's "quantization" (its default and any per-module override
 * keyed by the module path; `false` there means dense). Errors name the
 * module and both values when the file and the config disagree. */
lmc_status lmc_quant_params(const lmc_weights *w, const char *module, const lmc_tensor *weight,
                            const lmc_tensor *scales, int64_t in, int *bits, int *group_size);

/* Binds prefix.weight (and prefix.bias when has_bias) checking the shape
 * [out, in]; a module stored MLX-quantized (prefix.scales and
 * prefix.biases beside a U32 weight) binds as quantized. Errors name the
 * key and both shapes. */
lmc_status lmc_linear_bind(lmc_linear *l, const lmc_weights *w, const char *prefix, int64_t in,
                           int64_t out, bool has_bias);
/* y [T, out] = x [T, in] W^T + b */
void lmc_linear_forward(const lmc_linear *l, const float *x, int64_t T, float *y);
/* The same, a dense weight as one GEMM over all T rows (lmc_matmul_gemm:
 * OpenBLAS when built with it), for large batches such as a vision
 * encoder's patches; a quantized one through lmc_qmatmul_rows. */
void lmc_linear_forward_gemm(const lmc_linear *l, const float *x, int64_t T, float *y);
/* ys[i] = ls[i](x) for n <= 4 layers that read the same x (q/k/v, gate/up):
 * quantized ones share one quantization of x and one parallel loop. */
void lmc_linear_forward_multi(const lmc_linear *const *ls, int n, const float *x, int64_t T,
                              float *const *ys);

/* ---- embedding ---- */

typedef struct lmc_embedding {
    const lmc_tensor *weight; /* [vocab, dim], or packed U32 when quantized */
    bool quantized;
    lmc_qweight qw;
    int64_t vocab, dim;
} lmc_embedding;

lmc_status lmc_embedding_bind(lmc_embedding *e, const lmc_weights *w, const char *name,
                              int64_t vocab, int64_t dim);
/* out [n, dim]; ids must be in range (checked by the caller). */
void lmc_embedding_lookup(const lmc_embedding *e, const int32_t *ids, int64_t n, float *out);
/* The embedding as an output projection (tied heads): logits = x E^T. */
void lmc_embedding_as_linear(const lmc_embedding *e, const float *x, int64_t T, float *y);

/* ---- rotary position embedding (HF rotate-half layout) ---- */

typedef struct lmc_rope {
    int64_t head_dim;
    int64_t rotary_dim; /* <= head_dim; the first rotary_dim dims rotate */
    float *inv_freq;    /* [rotary_dim / 2] */
    float attention_scaling;
    /* longrope / su (Phi-3.5): inv_freq holds the short factors; a forward
     * call whose positions reach past original_max (transformers'
     * seq_len = max(position_ids) + 1 > original_max_position_embeddings)
     * rotates with long_inv_freq and long_scaling instead. NULL otherwise. */
    float *long_inv_freq;
    float long_scaling;
    int64_t original_max;
} lmc_rope;

/* inv_freq as transformers' ROPE_INIT_FUNCTIONS compute it. */
lmc_status lmc_rope_init(lmc_rope *r, const lmc_rope_config *cfg, int64_t head_dim,
                         int64_t max_position_embeddings);
void lmc_rope_free(lmc_rope *r);
/* Whether a forward call covering positions up to seq_len - 1 uses the long
 * factors (always false unless longrope). */
bool lmc_rope_uses_long(const lmc_rope *r, int64_t seq_len);
/* Rotates x [T, n_heads, head_dim] in place; token t sits at positions[t].
 * A longrope rope picks its factors from max(positions) + 1. */
void lmc_rope_apply(const lmc_rope *r, float *x, int64_t T, int64_t n_heads,
                    const int32_t *positions);

/* ---- KV cache ---- */

/* One layer's keys and values. Position p lives in slot p % capacity: a
 * layer that keeps every position never wraps (capacity grows with the
 * context); a rotating layer (window > 0; mlx-lm's RotatingKVCache,
 * llama.cpp's SWA cache) holds at most window + max_batch - 1 slots, enough
 * for the last window - 1 positions plus one batch, and overwrites the
 * oldest. */
typedef struct lmc_kv_layer {
    void *k, *v;      /* [n_kv_heads, capacity, head_dim] of the cache's dtype */
    int64_t capacity; /* slots allocated */
    int64_t window;   /* 0 = keeps every position */
    int64_t limit;    /* most slots a rotating layer takes */
    int64_t keep;     /* a rotating layer's first `keep` positions stay (attention sinks) */
} lmc_kv_layer;

/* The slot of position p: sinks first, then the ring (p % capacity without sinks). */
static inline int64_t lmc_kv_slot(const lmc_kv_layer *L, int64_t p) {
    if (p < L->keep) return p;
    return L->keep + (p - L->keep) % (L->capacity - L->keep);
}

typedef struct lmc_kv_cache {
    lmc_kv_layer *layers;
    int64_t n_layers, n_kv_heads, head_dim;
    lmc_dtype dtype;  /* of the keys and values: LMC_DTYPE_F32 or LMC_DTYPE_F16 */
    int64_t capacity; /* most slots allocated in any layer */
    int64_t max_capacity;
    int64_t length;    /* positions filled */
    int64_t max_batch; /* most tokens one forward may add; 0 = any (no rotating layer) */
    /* the token at each filled position (lmc_kv_cache_remember): the
     * session's prompt cache, and what longrope re-runs */
    int32_t *tokens;
    int64_t tokens_cap;
    /* optional, owned by whoever set it: MoE expert invocation counts of
     * this cache's forwards, layer l's experts at expert_calls + l *
     * expert_calls_stride; NULL (the default) counts nothing */
    int64_t *expert_calls;
    int64_t expert_calls_stride;
} lmc_kv_cache;

/* An empty cache whose keys and values are f16 when lmc_get_kv_f16(), else
 * f32. */
lmc_status lmc_kv_cache_init(lmc_kv_cache *c, int64_t n_layers, int64_t n_kv_heads,
                             int64_t head_dim, int64_t max_capacity);
/* Makes layer a rotating cache for attention that sees the last `window`
 * positions (window 0 makes it keep every position again). Only on an empty
 * cache (LMC_ERR_INVALID_ARG otherwise). Sets max_batch to
 * max(LMC_KV_MIN_BATCH, the smallest window): callers split longer inputs
 * into batches of at most max_batch tokens. */
#define LMC_KV_MIN_BATCH 16
lmc_status lmc_kv_cache_set_window(lmc_kv_cache *c, int64_t layer, int64_t window);
/* Like set_window, but the first `keep` positions stay too and attention
 * sees them plus the last `window` (mlx-lm's RotatingKVCache(max_size =
 * keep + window, keep)): every query of the layer, whatever its own
 * sliding window. */
lmc_status lmc_kv_cache_set_rotating(lmc_kv_cache *c, int64_t layer, int64_t window, int64_t keep);
/* Makes room for positions up to `needed` (grows geometrically up to max;
 * rotating layers up to their limit). LMC_ERR_RANGE past max_capacity;
 * LMC_ERR_INVALID_ARG when needed - length exceeds max_batch. */
lmc_status lmc_kv_cache_reserve(lmc_kv_cache *c, int64_t needed);
void lmc_kv_cache_free(lmc_kv_cache *c);
/* Records tokens[0..n) as the tokens of positions start.. (before the
 * forward that fills them). */
lmc_status lmc_kv_cache_remember(lmc_kv_cache *c, const int32_t *tokens, int64_t start, int64_t n);
/* Bytes of keys and values allocated. */
size_t lmc_kv_cache_bytes(const lmc_kv_cache *c);
/* Stores k, v [T, n_kv_heads, head_dim] of layer at positions start.. */
void lmc_kv_cache_store(lmc_kv_cache *c, int64_t layer, int64_t start, const float *k,
                        const float *v, int64_t T);

/* ---- attention ---- */

typedef struct lmc_attention_params {
    int64_t n_heads, n_kv_heads, head_dim;
    float scale;            /* usually 1/sqrt(head_dim) */
    int64_t sliding_window; /* 0 = none; else key j is seen by query i when i - j < window */
    float softcap;          /* 0 = none */
    /* > 0: queries also see every key at a position < prefix (PaliGemma's
     * bidirectional prefix); only for layers that keep every position */
    int64_t prefix;
} lmc_attention_params;

/* Causal attention of q [T, n_heads, head_dim] at positions start..start+T-1
 * over the layer's cached keys/values 0..start+T-1 (the last sliding_window
 * of them when set; a rotating layer needs a sliding_window no larger than
 * its own); out [T, n_heads*head_dim]. */
lmc_status lmc_attention(const lmc_attention_params *p, const lmc_kv_cache *c, int64_t layer,
                         const float *q, int64_t start, int64_t T, float *out);

/* Full (non-causal) multi-head self-attention of n tokens, as the vision
 * encoders' eager attention: q, k, v [n, n_heads, head_dim] (rows of
 * n_heads * head_dim), out [n, n_heads * head_dim]; per head one GEMM for
 * the scores, a softmax per row, one GEMM for the values. */
lmc_status lmc_attention_full(const float *q, const float *k, const float *v, int64_t n,
                              int64_t n_heads, int64_t head_dim, float scale, float *out);

#endif
