/* Gemma2ForCausalLM (transformers modeling_gemma2.py, mlx-lm
 * models/gemma2.py). Differences from Gemma:
 * - sandwich norms, all RMSNorm with (1 + w): h = x +
 *   post_attention_layernorm(attn(input_layernorm(x))), then
 *   out = h + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h)))
 *   (Gemma2DecoderLayer.forward);
 * - attention scale query_pre_attn_scalar ** -0.5, and the scores capped as
 *   tanh(s / c) * c with c = attn_logit_softcapping before the mask
 *   (eager_attention_forward's softcap);
 * - final logits capped the same way with final_logit_softcapping
 *   (Gemma2ForCausalLM.forward);
 * - layers alternate sliding / global: layer_types when present, else
 *   Gemma2Config's rule, layer i sliding when (i + 1) % 2 != 0;
 * - embeddings times sqrt(hidden_size) in the activation dtype (float32).
 * The head is the tied embedding unless the file has lm_head.weight (mlx-lm
 * always ties). */
#include "models/bind.h"
#include "models/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static lmc_status gemma2_load(lmc_model *m) {
    const lmc_model_config *c = &m->cfg;
    lmc_decoder *d = calloc(1, sizeof *d);
    if (!d) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    m->impl = d;
    lmc_status st = lmc_decoder_init(d, c);
    if (st != LMC_OK) return st;
    const char *act_name = lmc_json_string(c->json, "hidden_activation", NULL, NULL);
    if (!act_name) act_name = lmc_json_string(c->json, "hidden_act", "gelu_pytorch_tanh", NULL);
    lmc_activation act;
    if ((st = lmc_activation_parse(act_name, &act)) != LMC_OK) return st;
    if ((st = lmc_decoder_bind_ends(d, &m->weights, 1.0f)) != LMC_OK) return st;
    int64_t H = d->hidden, hd = d->head_dim, nh = d->n_heads, nkv = d->n_kv_heads,
            I = d->intermediate;
    float eps = (float)c->rms_norm_eps;
    bool bias = c->attention_bias;
    lmc_binder b = {.w = &m->weights, .arch = "gemma2"};
    for (int64_t i = 0; i < d->n_layers; i++) {
        lmc_decoder_layer *y = &d->layers[i];
        char p[64];
        snprintf(p, sizeof p, "model.layers.%lld.", (long long)i);
        lmc_binder_at(&b, p);
        if ((st = lmc_bind_attention(&b, y, H, nh, nkv, hd, bias, bias)) ||
            (st = lmc_bind_gated_mlp(&b, &y->mlp, H, I, false, act)) ||
            (st = lmc_bind_sandwich_norms(&b, y, H, eps)))
            return st;
    }
    d->embed_scale = sqrtf((float)H);
    double qpas = lmc_json_number(c->json, "query_pre_attn_scalar", 256.0, NULL);
    if (!(qpas > 0))
        return lmc_error(LMC_ERR_FORMAT, "%s: gemma2 query_pre_attn_scalar must be positive",
                         m->dir);
    d->attn.scale = (float)pow(qpas, -0.5);
    d->attn.softcap = (float)lmc_config_optional(c->json, "attn_logit_softcapping", 50.0);
    d->final_softcap = (float)lmc_config_optional(c->json, "final_logit_softcapping", 30.0);
    int64_t window = (int64_t)lmc_config_optional(c->json, "sliding_window", 4096);
    if (window > 0) {
        lmc_decoder_set_sliding(d, window, false);
        if (!json_is_array(json_object_get(c->json, "layer_types")))
            for (int64_t i = 0; i < d->n_layers; i++)
                d->layers[i].sliding_window = (i + 1) % 2 ? window : 0;
    }
    return LMC_OK;
}

static const lmc_config_defaults gemma2_defaults = {.rms_norm_eps = 1e-6,
                                                    .max_position_embeddings = 8192,
                                                    .tie_word_embeddings = true,
                                                    .sliding_window = 4096,
                                                    .bos_token_id = 2,
                                                    .eos_token_id = 1};

const lmc_arch lmc_arch_gemma2 = {"gemma2", &gemma2_defaults, gemma2_load, LMC_DECODER_HOOKS};
