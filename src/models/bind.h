/* Binding helpers for the model files: bind one module of a layer by its
 * name under the layer's prefix and, when a tensor is missing, turn the
 * error into one that names the architecture, the module and the tensors it
 * expects, before what the file holds there (a wrong key layout then reads
 * as such, not as one missing name). */
#ifndef LMC_MODELS_BIND_H
#define LMC_MODELS_BIND_H

#include "nn/decoder.h"

typedef struct lmc_binder {
    const lmc_weights *w;
    const char *arch; /* model_type, for messages */
    char prefix[128]; /* e.g. "model.layers.3."; "" for top-level modules */
} lmc_binder;

/* Sets the prefix modules are looked up under ("" for none). */
void lmc_binder_at(lmc_binder *b, const char *prefix);
/* prefix + module, e.g. "model.layers.3.mlp.c_fc": dense or MLX-quantized
 * linear (lmc_linear_bind). */
lmc_status lmc_bind_linear(lmc_binder *b, lmc_linear *l, const char *module, int64_t in,
                           int64_t out, bool bias);
/* prefix + module as RMSNorm, or LayerNorm (weight and bias) when layer_norm. */
lmc_status lmc_bind_norm(lmc_binder *b, lmc_norm *n, const char *module, int64_t dim, float eps,
                         float offset, bool layer_norm);
/* The usual attention projections under prefix: self_attn.{q,k,v,o}_proj. */
lmc_status lmc_bind_attention(lmc_binder *b, lmc_decoder_layer *y, int64_t hidden, int64_t n_heads,
                              int64_t n_kv_heads, int64_t head_dim, bool qkv_bias, bool o_bias);
/* A gated MLP under prefix: mlp.{gate,up,down}_proj, activation act. */
lmc_status lmc_bind_gated_mlp(lmc_binder *b, lmc_mlp *m, int64_t hidden, int64_t inter, bool bias,
                              lmc_activation act);
/* Gemma 2/3's four (1 + w) norms around attention and the MLP:
 * input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
 * post_feedforward_layernorm. */
lmc_status lmc_bind_sandwich_norms(lmc_binder *b, lmc_decoder_layer *y, int64_t hidden, float eps);

/* When st is LMC_ERR_NOT_FOUND, prefixes the error (which names the missing
 * tensor and what the file holds under its module) with
 * "<arch> expects '<prefix><module>' with <expected>". Returns st. */
lmc_status lmc_bind_explain(const lmc_binder *b, lmc_status st, const char *module,
                            const char *expected);

/* config.json value that transformers treats as Optional: def when the key
 * is absent, 0 when it is null (None: the feature is off), else the number. */
double lmc_config_optional(const json_t *cfg, const char *key, double def);

#endif
