/* PhimoeForCausalLM (Phi-3.5-MoE; transformers modeling_phimoe.py): Llama
 * attention (q/k/v/o biases when attention_bias), LayerNorm with bias
 * (eps = rms_norm_eps) before attention, before the MoE and at the end, an
 * lm_head bias when lm_head_bias, and a sparse MoE routed by sparsemixer
 * (inference path: top-2, jitter-masked softmax per pick, no
 * renormalization). Rotary: longrope's short-factor frequencies at every
 * length, with rope_parameters' short_mscale, past
 * original_max_position_embeddings long_mscale, as the cos/sin scale
 * (PhimoeRotaryEmbedding.forward, as transformers 5.17 runs it).
 * Experts: HF per-expert block_sparse_moe.experts.N.w1/w3/w2, or mlx-lm's
 * sanitized block_sparse_moe.switch_mlp.{gate,up,down}_proj (dense or
 * quantized SwitchLinear). */
#include "models/bind.h"
#include "models/model.h"
#include "nn/decoder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static lmc_status phimoe_load(lmc_model *m) {
    const lmc_model_config *c = &m->cfg;
    const lmc_weights *w = &m->weights;
    lmc_decoder *d = calloc(1, sizeof *d);
    if (!d) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    m->impl = d;
    lmc_status st = lmc_decoder_init(d, c);
    if (st != LMC_OK) return st;
    if (d->rope.long_inv_freq) {
        const json_t *p = c->rope.params;
        bool bad = false;
        d->rope.attention_scaling =
            (float)lmc_json_number(p, "short_mscale", d->rope.attention_scaling, &bad);
        d->rope.long_scaling = (float)lmc_json_number(p, "long_mscale", d->rope.long_scaling, &bad);
        if (bad)
            return lmc_error(LMC_ERR_FORMAT, "%s: short_mscale / long_mscale not numbers", m->dir);
        /* PhimoeRotaryEmbedding.forward as transformers 5.17 runs it: past
         * original_max_position_embeddings only the cos/sin scale changes
         * (short_mscale -> long_mscale); the frequencies stay the
         * short-factor ones (unlike Phi3, long_factor is not applied). The
         * arch-b phimoe fixtures (24-token prompt, original 16) match so at
         * rel L2 3e-7, and at 9e-2 with long_factor. So the "long"
         * frequencies are the short ones; the long_scaling switch and the
         * cache rerun at the crossing (decoder.c) are kept. */
        memcpy(d->rope.long_inv_freq, d->rope.inv_freq,
               (size_t)(d->rope.rotary_dim / 2) * sizeof(float));
    }
    int64_t H = d->hidden, hd = d->head_dim, nh = d->n_heads, nkv = d->n_kv_heads;
    const lmc_expert_stacking *stk = lmc_expert_stacking_find(c->model_type);
    if (!stk) return lmc_error(LMC_ERR_UNSUPPORTED, "%s: no expert names", c->model_type);
    int64_t E = lmc_expert_count(stk, c->json);
    lmc_expert_names names;
    lmc_expert_names_of(stk, &names);
    int64_t K = lmc_json_int(c->json, "num_experts_per_tok", 2, NULL);
    float jitter = (float)lmc_json_number(c->json, "router_jitter_noise", 0.01, NULL);
    bool lm_head_bias = lmc_json_bool(c->json, "lm_head_bias", false, NULL);
    bool bias = c->attention_bias;
    float eps = (float)c->rms_norm_eps;

    if ((st = lmc_embedding_bind(&d->embed, w, "model.embed_tokens.weight", d->vocab, H)) != LMC_OK)
        return st;
    if ((st = lmc_norm_bind(&d->final_norm, w, "model.norm", H, eps, 0.0f, true)) != LMC_OK)
        return st;
    d->tied = c->tie_word_embeddings && !lmc_weights_find(w, "lm_head.weight");
    if (!d->tied &&
        (st = lmc_linear_bind(&d->lm_head, w, "lm_head", H, d->vocab, lm_head_bias)) != LMC_OK)
        return st;
    lmc_binder b = {.w = w, .arch = c->model_type};
    for (int64_t i = 0; i < d->n_layers; i++) {
        lmc_decoder_layer *y = &d->layers[i];
        char p[256];
        snprintf(p, sizeof p, "model.layers.%lld.", (long long)i);
        lmc_binder_at(&b, p);
        if ((st = lmc_bind_attention(&b, y, H, nh, nkv, hd, bias, bias)) != LMC_OK) return st;
        y->moe = calloc(1, sizeof *y->moe);
        if (!y->moe) return lmc_error(LMC_ERR_NOMEM, "out of memory");
        snprintf(p, sizeof p, "model.layers.%lld.%s", (long long)i, stk->block);
        char router[32] = "gate", name[300];
        snprintf(name, sizeof name, "%s.router.weight", p);
        if (lmc_weights_find(w, name)) snprintf(router, sizeof router, "router");
        st = lmc_moe_bind(y->moe, w, p, router, E, K, H, c->intermediate_size, names.stacked,
                          names.per_expert);
        if (st != LMC_OK) return st;
        y->moe->routing = LMC_MOE_SPARSEMIXER;
        y->moe->jitter_eps = jitter;
        if ((st = lmc_bind_norm(&b, &y->attn_norm, "input_layernorm", H, eps, 0.0f, true)) ||
            (st = lmc_bind_norm(&b, &y->mlp_norm, "post_attention_layernorm", H, eps, 0.0f, true)))
            return st;
    }
    if (c->sliding_window > 0) lmc_decoder_set_sliding(d, c->sliding_window, true);
    return LMC_OK;
}

static const lmc_config_defaults phimoe_defaults = {.rms_norm_eps = 1e-5,
                                                    .max_position_embeddings = 4096 * 32,
                                                    .tie_word_embeddings = false,
                                                    .sliding_window = 0,
                                                    .bos_token_id = 1,
                                                    .eos_token_id = 2};

const lmc_arch lmc_arch_phimoe = {"phimoe", &phimoe_defaults, phimoe_load, LMC_DECODER_HOOKS};
