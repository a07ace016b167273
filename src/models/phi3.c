/* Phi3ForCausalLM (Phi-3, Phi-3.5; transformers modeling_phi3.py): fused
 * qkv_proj [q; k; v] and gate_up_proj [gate; up], partial rotary factor,
 * sliding window when the config sets one. Phi-3.5's rope_scaling longrope
 * (su) is computed from config.json alone (nn/rope.c); Phi3Config's
 * original_max_position_embeddings defaults to 4096. */
#include "models/model.h"
#include "nn/decoder.h"

#include <stdio.h>
#include <stdlib.h>

static lmc_status phi3_load(lmc_model *m) {
    const lmc_model_config *c = &m->cfg;
    const lmc_weights *w = &m->weights;
    lmc_decoder *d = calloc(1, sizeof *d);
    if (!d) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    m->impl = d;
    if (m->cfg.rope.type == LMC_ROPE_LONGROPE && m->cfg.rope.original_max_position_embeddings <= 0)
        m->cfg.rope.original_max_position_embeddings = 4096;
    lmc_status st = lmc_decoder_init(d, c);
    if (st != LMC_OK) return st;
    lmc_activation act;
    if ((st = lmc_activation_parse(c->hidden_act, &act)) != LMC_OK) return st;
    if ((st = lmc_decoder_bind_ends(d, w, 0.0f)) != LMC_OK) return st;
    int64_t H = d->hidden, hd = d->head_dim, I = d->intermediate;
    int64_t qkv = (d->n_heads + 2 * d->n_kv_heads) * hd;
    float eps = (float)c->rms_norm_eps;
    for (int64_t i = 0; i < d->n_layers; i++) {
        lmc_decoder_layer *y = &d->layers[i];
        char p[256];
#define PREFIX(sub) snprintf(p, sizeof p, "model.layers.%lld.%s", (long long)i, sub)
        PREFIX("self_attn.qkv_proj");
        if ((st = lmc_linear_bind(&y->qkv, w, p, H, qkv, false)) != LMC_OK) return st;
        y->fused_qkv = true;
        PREFIX("self_attn.o_proj");
        if ((st = lmc_linear_bind(&y->o, w, p, d->n_heads * hd, H, false)) != LMC_OK) return st;
        PREFIX("mlp.gate_up_proj");
        if ((st = lmc_linear_bind(&y->mlp.gate, w, p, H, 2 * I, false)) != LMC_OK) return st;
        PREFIX("mlp.down_proj");
        if ((st = lmc_linear_bind(&y->mlp.down, w, p, I, H, false)) != LMC_OK) return st;
        y->mlp.fused_gate_up = true;
        y->mlp.gated = true;
        y->mlp.act = act;
        PREFIX("input_layernorm");
        if ((st = lmc_norm_bind(&y->attn_norm, w, p, H, eps, 0.0f, false)) != LMC_OK) return st;
        PREFIX("post_attention_layernorm");
        if ((st = lmc_norm_bind(&y->mlp_norm, w, p, H, eps, 0.0f, false)) != LMC_OK) return st;
#undef PREFIX
    }
    if (c->sliding_window > 0) lmc_decoder_set_sliding(d, c->sliding_window, true);
    return LMC_OK;
}

static const lmc_config_defaults phi3_defaults = {.rms_norm_eps = 1e-5,
                                                  .max_position_embeddings = 4096,
                                                  .tie_word_embeddings = false,
                                                  .sliding_window = 0,
                                                  .bos_token_id = 1,
                                                  .eos_token_id = 32000};

const lmc_arch lmc_arch_phi3 = {"phi3", &phi3_defaults, phi3_load, LMC_DECODER_HOOKS};
