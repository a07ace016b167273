/* Starcoder2ForCausalLM (transformers modeling_starcoder2.py, mlx-lm
 * models/starcoder2.py): LayerNorm with bias (eps norm_epsilon) before
 * attention and MLP and at the end; biases on q/k/v/o and on the MLP with
 * use_bias (default true); a plain two-layer MLP c_proj(act(c_fc(x)))
 * (hidden_act, default gelu_pytorch_tanh); head_dim from config.json or
 * hidden / heads; the sliding window, when set, on every layer; tied
 * embeddings by default (lm_head, when untied, has no bias). mlx-lm keeps
 * HF's key names (no sanitize). */
#include "models/bind.h"
#include "models/model.h"

#include <stdio.h>
#include <stdlib.h>

static lmc_status starcoder2_load(lmc_model *m) {
    const lmc_model_config *c = &m->cfg;
    const lmc_weights *w = &m->weights;
    lmc_decoder *d = calloc(1, sizeof *d);
    if (!d) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    m->impl = d;
    lmc_status st = lmc_decoder_init(d, c);
    if (st != LMC_OK) return st;
    lmc_activation act;
    const char *act_name = lmc_json_string(c->json, "hidden_act", "gelu_pytorch_tanh", NULL);
    if ((st = lmc_activation_parse(act_name, &act)) != LMC_OK) return st;
    float eps = (float)lmc_json_number(c->json, "norm_epsilon", 1e-5, NULL);
    bool bias = lmc_json_bool(c->json, "use_bias", true, NULL);
    int64_t H = d->hidden, hd = d->head_dim, nh = d->n_heads, nkv = d->n_kv_heads,
            I = d->intermediate;
    lmc_binder b = {.w = w, .arch = "starcoder2"};
    if ((st = lmc_embedding_bind(&d->embed, w, "model.embed_tokens.weight", d->vocab, H)) != LMC_OK)
        return lmc_bind_explain(&b, st, "model.embed_tokens", "weight");
    if ((st = lmc_bind_norm(&b, &d->final_norm, "model.norm", H, eps, 0.0f, true)) != LMC_OK)
        return st;
    d->tied = c->tie_word_embeddings && !lmc_weights_find(w, "lm_head.weight");
    if (!d->tied && (st = lmc_bind_linear(&b, &d->lm_head, "lm_head", H, d->vocab, false)))
        return st;
    for (int64_t i = 0; i < d->n_layers; i++) {
        lmc_decoder_layer *y = &d->layers[i];
        char p[64];
        snprintf(p, sizeof p, "model.layers.%lld.", (long long)i);
        lmc_binder_at(&b, p);
        if ((st = lmc_bind_linear(&b, &y->q, "self_attn.q_proj", H, nh * hd, bias)) ||
            (st = lmc_bind_linear(&b, &y->k, "self_attn.k_proj", H, nkv * hd, bias)) ||
            (st = lmc_bind_linear(&b, &y->v, "self_attn.v_proj", H, nkv * hd, bias)) ||
            (st = lmc_bind_linear(&b, &y->o, "self_attn.o_proj", nh * hd, H, bias)) ||
            (st = lmc_bind_linear(&b, &y->mlp.up, "mlp.c_fc", H, I, bias)) ||
            (st = lmc_bind_linear(&b, &y->mlp.down, "mlp.c_proj", I, H, bias)) ||
            (st = lmc_bind_norm(&b, &y->attn_norm, "input_layernorm", H, eps, 0.0f, true)) ||
            (st = lmc_bind_norm(&b, &y->mlp_norm, "post_attention_layernorm", H, eps, 0.0f, true)))
            return st;
        y->mlp.gated = false;
        y->mlp.act = act;
    }
    if (c->sliding_window > 0) lmc_decoder_set_sliding(d, c->sliding_window, true);
    return LMC_OK;
}

static const lmc_config_defaults starcoder2_defaults = {.rms_norm_eps = 1e-5,
                                                        .max_position_embeddings = 4096,
                                                        .tie_word_embeddings = true,
                                                        .sliding_window = 0,
                                                        .bos_token_id = 50256,
                                                        .eos_token_id = 50256};

const lmc_arch lmc_arch_starcoder2 = {"starcoder2", &starcoder2_defaults, starcoder2_load,
                                      LMC_DECODER_HOOKS};
