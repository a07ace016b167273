/* Qwen3ForCausalLM (transformers modeling_qwen3.py, mlx-lm models/qwen3.py):
 * the Llama layout plus per-head RMSNorms q_norm / k_norm over head_dim,
 * applied to q and k before rotary embedding (Qwen3Attention.forward);
 * head_dim comes from config.json (not hidden / heads), biases on q/k/v/o
 * only with attention_bias. The sliding window, as in Qwen2, applies only
 * with use_sliding_window, to layers from max_window_layers on (or as
 * layer_types says). mlx-lm's sanitize only drops lm_head.weight of tied
 * models, which the shared head binding already handles. */
#include "models/bind.h"
#include "models/model.h"

#include <stdio.h>
#include <stdlib.h>

static lmc_status qwen3_load(lmc_model *m) {
    const lmc_model_config *c = &m->cfg;
    lmc_decoder *d = calloc(1, sizeof *d);
    if (!d) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    m->impl = d;
    lmc_status st = lmc_decoder_init(d, c);
    if (st != LMC_OK) return st;
    lmc_activation act;
    if ((st = lmc_activation_parse(c->hidden_act, &act)) != LMC_OK) return st;
    if ((st = lmc_decoder_bind_ends(d, &m->weights, 0.0f)) != LMC_OK) return st;
    int64_t H = d->hidden, hd = d->head_dim, nh = d->n_heads, nkv = d->n_kv_heads,
            I = d->intermediate;
    float eps = (float)c->rms_norm_eps;
    bool bias = c->attention_bias;
    lmc_binder b = {.w = &m->weights, .arch = "qwen3"};
    for (int64_t i = 0; i < d->n_layers; i++) {
        lmc_decoder_layer *y = &d->layers[i];
        char p[64];
        snprintf(p, sizeof p, "model.layers.%lld.", (long long)i);
        lmc_binder_at(&b, p);
        if ((st = lmc_bind_attention(&b, y, H, nh, nkv, hd, bias, bias)) ||
            (st = lmc_bind_norm(&b, &y->q_norm, "self_attn.q_norm", hd, eps, 0.0f, false)) ||
            (st = lmc_bind_norm(&b, &y->k_norm, "self_attn.k_norm", hd, eps, 0.0f, false)) ||
            (st = lmc_bind_gated_mlp(&b, &y->mlp, H, I, false, act)) ||
            (st = lmc_bind_norm(&b, &y->attn_norm, "input_layernorm", H, eps, 0.0f, false)) ||
            (st = lmc_bind_norm(&b, &y->mlp_norm, "post_attention_layernorm", H, eps, 0.0f, false)))
            return st;
    }
    /* Qwen3Config: sliding_window only with use_sliding_window; layer_types
     * default to sliding from max_window_layers on. */
    bool use_sw = lmc_json_bool(c->json, "use_sliding_window", false, NULL);
    int64_t max_window_layers = lmc_json_int(c->json, "max_window_layers", 28, NULL);
    if (use_sw && c->sliding_window > 0) {
        lmc_decoder_set_sliding(d, c->sliding_window, false);
        if (!json_object_get(c->json, "layer_types"))
            for (int64_t i = max_window_layers; i < d->n_layers; i++)
                d->layers[i].sliding_window = c->sliding_window;
    }
    return LMC_OK;
}

static const lmc_config_defaults qwen3_defaults = {.rms_norm_eps = 1e-6,
                                                   .max_position_embeddings = 32768,
                                                   .tie_word_embeddings = false,
                                                   .sliding_window = 0,
                                                   .bos_token_id = -1,
                                                   .eos_token_id = -1};

const lmc_arch lmc_arch_qwen3 = {"qwen3", &qwen3_defaults, qwen3_load, LMC_DECODER_HOOKS};
