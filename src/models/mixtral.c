/* MixtralForCausalLM (transformers modeling_mixtral.py): the Mistral
 * attention with a sparse MoE in place of the MLP (softmax router, top-k,
 * renormalized). Experts load from HF per-expert tensors
 * (block_sparse_moe.experts.N.w1/w3/w2) or mlx-lm's stacked switch_mlp. */
#include "models/bind.h"
#include "models/model.h"
#include "nn/decoder.h"

#include <stdio.h>
#include <stdlib.h>

static lmc_status mixtral_load(lmc_model *m) {
    const lmc_model_config *c = &m->cfg;
    const lmc_weights *w = &m->weights;
    lmc_decoder *d = calloc(1, sizeof *d);
    if (!d) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    m->impl = d;
    lmc_status st = lmc_decoder_init(d, c);
    if (st != LMC_OK) return st;
    if ((st = lmc_decoder_bind_ends(d, w, 0.0f)) != LMC_OK) return st;
    int64_t H = d->hidden, hd = d->head_dim, nh = d->n_heads, nkv = d->n_kv_heads;
    const lmc_expert_stacking *stk = lmc_expert_stacking_find(c->model_type);
    if (!stk) return lmc_error(LMC_ERR_UNSUPPORTED, "%s: no expert names", c->model_type);
    int64_t E = lmc_expert_count(stk, c->json);
    lmc_expert_names names;
    lmc_expert_names_of(stk, &names);
    int64_t K = lmc_json_int(c->json, "num_experts_per_tok", 2, NULL);
    float eps = (float)c->rms_norm_eps;
    lmc_binder b = {.w = w, .arch = c->model_type};
    for (int64_t i = 0; i < d->n_layers; i++) {
        lmc_decoder_layer *y = &d->layers[i];
        char p[256];
        snprintf(p, sizeof p, "model.layers.%lld.", (long long)i);
        lmc_binder_at(&b, p);
        if ((st = lmc_bind_attention(&b, y, H, nh, nkv, hd, false, false)) != LMC_OK) return st;
        y->moe = calloc(1, sizeof *y->moe);
        if (!y->moe) return lmc_error(LMC_ERR_NOMEM, "out of memory");
        snprintf(p, sizeof p, "model.layers.%lld.%s", (long long)i, stk->block);
        st = lmc_moe_bind(y->moe, w, p, "gate", E, K, H, c->intermediate_size, names.stacked,
                          names.per_expert);
        if (st != LMC_OK) return st;
        y->moe->norm_topk = true;
        if ((st = lmc_bind_norm(&b, &y->attn_norm, "input_layernorm", H, eps, 0.0f, false)) ||
            (st = lmc_bind_norm(&b, &y->mlp_norm, "post_attention_layernorm", H, eps, 0.0f, false)))
            return st;
    }
    if (c->sliding_window > 0) lmc_decoder_set_sliding(d, c->sliding_window, true);
    return LMC_OK;
}

static const lmc_config_defaults mixtral_defaults = {.rms_norm_eps = 1e-5,
                                                     .max_position_embeddings = 4096 * 32,
                                                     .tie_word_embeddings = false,
                                                     .sliding_window = 0,
                                                     .bos_token_id = 1,
                                                     .eos_token_id = 2};

const lmc_arch lmc_arch_mixtral = {"mixtral", &mixtral_defaults, mixtral_load, LMC_DECODER_HOOKS};
