/* Gemma3ForCausalLM, text only (model_type gemma3_text; transformers
 * modeling_gemma3.py Gemma3TextModel, mlx-lm models/gemma3_text.py). As
 * Gemma2 (sandwich norms with (1 + w), scale query_pre_attn_scalar ** -0.5,
 * embeddings times sqrt(hidden_size)), plus:
 * - per-head q_norm / k_norm (RMSNorm with (1 + w) over head_dim) before
 *   rotary embedding (Gemma3Attention.forward);
 * - two rotary embeddings: sliding layers use rope_local_base_freq
 *   (default 10000) without scaling, global layers rope_theta (default 1e6)
 *   with rope_scaling; transformers 5 writes them as
 *   rope_parameters {"sliding_attention": {...}, "full_attention": {...}};
 * - layer_types, else sliding_window_pattern (default 6): layer i is global
 *   when (i + 1) % pattern == 0;
 * - no attention softcapping (transformers' Gemma3Attention does not pass
 *   attn_logit_softcapping to the attention), final_logit_softcapping only
 *   when set.
 * The embedding scale is float32 here: transformers casts it to the weight
 * dtype, which is float32 for a float32 reference (mlx-lm rounds it to
 * bfloat16). As mlx-lm's sanitize, a file without lm_head.weight ties the
 * head to the embedding. */
#include "models/bind.h"
#include "models/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The rope parameters of one layer type: transformers 5's nested
 * rope_parameters[type], else the classic keys (global layers: rope_theta
 * and rope_scaling / flat rope_parameters; local ones: rope_local_base_freq). */
static lmc_status layer_rope(const lmc_model_config *c, const char *type, bool global,
                             const char *what, lmc_rope_config *out) {
    const json_t *rp = json_object_get(c->json, "rope_parameters");
    const json_t *params = json_is_object(rp) ? json_object_get(rp, type) : NULL;
    bool nested = json_is_object(rp) && (json_object_get(rp, "sliding_attention") ||
                                         json_object_get(rp, "full_attention"));
    if (!nested && global)
        params = json_is_object(rp) ? rp : json_object_get(c->json, "rope_scaling");
    double theta = global ? lmc_json_number(c->json, "rope_theta", 1e6, NULL)
                          : lmc_json_number(c->json, "rope_local_base_freq", 10000.0, NULL);
    return lmc_rope_config_from(c, json_is_object(params) ? params : NULL, theta, what, out);
}

static lmc_status gemma3_load(lmc_model *m) {
    const lmc_model_config *c = &m->cfg;
    if (lmc_json_bool(c->json, "use_bidirectional_attention", false, NULL))
        return lmc_error(LMC_ERR_UNSUPPORTED,
                         "%s: gemma3_text with use_bidirectional_attention is an encoder, not a "
                         "causal LM",
                         m->dir);
    lmc_decoder *d = calloc(1, sizeof *d);
    if (!d) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    m->impl = d;
    if (!lmc_weights_find(&m->weights, "lm_head.weight")) m->cfg.tie_word_embeddings = true;
    lmc_status st = lmc_decoder_init(d, c);
    if (st != LMC_OK) return st;
    const char *act_name = lmc_json_string(c->json, "hidden_activation", NULL, NULL);
    if (!act_name) act_name = lmc_json_string(c->json, "hidden_act", "gelu_pytorch_tanh", NULL);
    lmc_activation act;
    if ((st = lmc_activation_parse(act_name, &act)) != LMC_OK) return st;
    if ((st = lmc_decoder_bind_ends(d, &m->weights, 1.0f)) != LMC_OK) return st;

    lmc_rope_config global, local;
    if ((st = layer_rope(c, "full_attention", true, m->dir, &global)) != LMC_OK ||
        (st = layer_rope(c, "sliding_attention", false, m->dir, &local)) != LMC_OK)
        return st;
    lmc_rope_free(&d->rope);
    if ((st = lmc_rope_init(&d->rope, &global, d->head_dim, c->max_position_embeddings)) ||
        (st = lmc_rope_init(&d->rope_local, &local, d->head_dim, c->max_position_embeddings)))
        return st;

    int64_t window = (int64_t)lmc_config_optional(c->json, "sliding_window", 4096);
    int64_t pattern = lmc_json_int(c->json, "sliding_window_pattern", 0, NULL);
    if (pattern <= 0) pattern = lmc_json_int(c->json, "_sliding_window_pattern", 6, NULL);
    if (pattern <= 0) pattern = 6;
    lmc_decoder_set_sliding(d, 1, false); /* marks layer_types' sliding layers */
    bool typed = json_is_array(json_object_get(c->json, "layer_types"));

    int64_t H = d->hidden, hd = d->head_dim, nh = d->n_heads, nkv = d->n_kv_heads,
            I = d->intermediate;
    float eps = (float)c->rms_norm_eps;
    bool bias = c->attention_bias;
    lmc_binder b = {.w = &m->weights, .arch = "gemma3_text"};
    for (int64_t i = 0; i < d->n_layers; i++) {
        lmc_decoder_layer *y = &d->layers[i];
        bool sliding = typed ? y->sliding_window > 0 : (i + 1) % pattern != 0;
        y->sliding_window = sliding && window > 0 ? window : 0;
        y->rope = sliding ? &d->rope_local : &d->rope;
        char p[64];
        snprintf(p, sizeof p, "model.layers.%lld.", (long long)i);
        lmc_binder_at(&b, p);
        if ((st = lmc_bind_attention(&b, y, H, nh, nkv, hd, bias, bias)) ||
            (st = lmc_bind_norm(&b, &y->q_norm, "self_attn.q_norm", hd, eps, 1.0f, false)) ||
            (st = lmc_bind_norm(&b, &y->k_norm, "self_attn.k_norm", hd, eps, 1.0f, false)) ||
            (st = lmc_bind_gated_mlp(&b, &y->mlp, H, I, false, act)) ||
            (st = lmc_bind_sandwich_norms(&b, y, H, eps)))
            return st;
    }
    d->embed_scale = sqrtf((float)H);
    double qpas = lmc_json_number(c->json, "query_pre_attn_scalar", 256.0, NULL);
    if (!(qpas > 0))
        return lmc_error(LMC_ERR_FORMAT, "%s: gemma3 query_pre_attn_scalar must be positive",
                         m->dir);
    d->attn.scale = (float)pow(qpas, -0.5);
    d->final_softcap = (float)lmc_config_optional(c->json, "final_logit_softcapping", 0.0);
    return LMC_OK;
}

static const lmc_config_defaults gemma3_defaults = {.rms_norm_eps = 1e-6,
                                                    .max_position_embeddings = 131072,
                                                    .tie_word_embeddings = true,
                                                    .sliding_window = 4096,
                                                    .bos_token_id = 2,
                                                    .eos_token_id = 1};

const lmc_arch lmc_arch_gemma3_text = {"gemma3_text", &gemma3_defaults, gemma3_load,
                                       LMC_DECODER_HOOKS};
