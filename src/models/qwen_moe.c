/* Qwen2MoeForCausalLM and Qwen3MoeForCausalLM (transformers
 * modeling_qwen2_moe.py, modeling_qwen3_moe.py). Attention: qwen2_moe has
 * q/k/v biases (qkv_bias, default true), qwen3_moe per-head q_norm/k_norm
 * RMSNorms and attention_bias. Layer i is sparse when it is not in
 * mlp_only_layers and (i + 1) % decoder_sparse_step == 0 (dense MLP of
 * intermediate_size otherwise). Router: softmax over num_experts in float32,
 * top num_experts_per_tok, renormalized when norm_topk_prob; experts of
 * moe_intermediate_size. qwen2_moe adds a shared expert
 * (shared_expert_intermediate_size) scaled by sigmoid(shared_expert_gate(x)).
 * Experts: HF mlp.experts.N.{gate,up,down}_proj or mlx-lm's stacked
 * mlp.switch_mlp.{gate,up,down}_proj. */
#include "models/model.h"
#include "nn/decoder.h"

#include <stdio.h>
#include <stdlib.h>

static bool in_list(const json_t *a, int64_t i) {
    size_t k;
    json_t *v;
    json_array_foreach(a, k, v) {
        if (json_is_integer(v) && json_integer_value(v) == i) return true;
    }
    return false;
}

static lmc_status bind_mlp(lmc_mlp *mlp, const lmc_weights *w, const char *prefix, int64_t H,
                           int64_t I, lmc_activation act) {
    char p[300];
    lmc_status st;
    snprintf(p, sizeof p, "%s.gate_proj", prefix);
    if ((st = lmc_linear_bind(&mlp->gate, w, p, H, I, false)) != LMC_OK) return st;
    snprintf(p, sizeof p, "%s.up_proj", prefix);
    if ((st = lmc_linear_bind(&mlp->up, w, p, H, I, false)) != LMC_OK) return st;
    snprintf(p, sizeof p, "%s.down_proj", prefix);
    if ((st = lmc_linear_bind(&mlp->down, w, p, I, H, false)) != LMC_OK) return st;
    mlp->gated = true;
    mlp->act = act;
    return LMC_OK;
}

static lmc_status qwen_moe_load(lmc_model *m, bool qwen3) {
    const lmc_model_config *c = &m->cfg;
    const json_t *j = c->json;
    const lmc_weights *w = &m->weights;
    lmc_decoder *d = calloc(1, sizeof *d);
    if (!d) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    m->impl = d;
    lmc_status st = lmc_decoder_init(d, c);
    if (st != LMC_OK) return st;
    lmc_activation act;
    if ((st = lmc_activation_parse(c->hidden_act, &act)) != LMC_OK) return st;
    if ((st = lmc_decoder_bind_ends(d, w, 0.0f)) != LMC_OK) return st;
    int64_t H = d->hidden, hd = d->head_dim, nh = d->n_heads, nkv = d->n_kv_heads;
    const lmc_expert_stacking *stk = lmc_expert_stacking_find(c->model_type);
    if (!stk) return lmc_error(LMC_ERR_UNSUPPORTED, "%s: no expert names", c->model_type);
    int64_t E = lmc_expert_count(stk, c->json);
    lmc_expert_names names;
    lmc_expert_names_of(stk, &names);
    int64_t K = lmc_json_int(j, "num_experts_per_tok", qwen3 ? 8 : 4, NULL);
    int64_t moe_I = lmc_json_int(j, "moe_intermediate_size", qwen3 ? 768 : 1408, NULL);
    int64_t shared_I = lmc_json_int(j, "shared_expert_intermediate_size", 5632, NULL);
    int64_t step = lmc_json_int(j, "decoder_sparse_step", 1, NULL);
    bool norm_topk = lmc_json_bool(j, "norm_topk_prob", false, NULL);
    const json_t *mlp_only = json_object_get(j, "mlp_only_layers");
    /* qwen2_moe: qkv_bias when the config has it, else whether the file has the biases */
    bool has_bias = lmc_weights_find(w, "model.layers.0.self_attn.q_proj.bias") != NULL;
    bool qkv_bias = qwen3 ? c->attention_bias : lmc_json_bool(j, "qkv_bias", has_bias, NULL);
    bool o_bias = qwen3 ? c->attention_bias : false;
    float eps = (float)c->rms_norm_eps;
    for (int64_t i = 0; i < d->n_layers; i++) {
        lmc_decoder_layer *y = &d->layers[i];
        char p[256];
#define PREFIX(sub) snprintf(p, sizeof p, "model.layers.%lld.%s", (long long)i, sub)
#define BIND(lin, sub, in, out, b)                                                                 \
    PREFIX(sub);                                                                                   \
    if ((st = lmc_linear_bind(&y->lin, w, p, in, out, b)) != LMC_OK) return st
        BIND(q, "self_attn.q_proj", H, nh * hd, qkv_bias);
        BIND(k, "self_attn.k_proj", H, nkv * hd, qkv_bias);
        BIND(v, "self_attn.v_proj", H, nkv * hd, qkv_bias);
        BIND(o, "self_attn.o_proj", nh * hd, H, o_bias);
#undef BIND
        if (qwen3) {
            PREFIX("self_attn.q_norm");
            if ((st = lmc_norm_bind(&y->q_norm, w, p, hd, eps, 0.0f, false)) != LMC_OK) return st;
            PREFIX("self_attn.k_norm");
            if ((st = lmc_norm_bind(&y->k_norm, w, p, hd, eps, 0.0f, false)) != LMC_OK) return st;
        }
        PREFIX("input_layernorm");
        if ((st = lmc_norm_bind(&y->attn_norm, w, p, H, eps, 0.0f, false)) != LMC_OK) return st;
        PREFIX("post_attention_layernorm");
        if ((st = lmc_norm_bind(&y->mlp_norm, w, p, H, eps, 0.0f, false)) != LMC_OK) return st;
        PREFIX("mlp");
#undef PREFIX
        bool sparse = !in_list(mlp_only, i) && E > 0 && step > 0 && (i + 1) % step == 0;
        if (!sparse) {
            if ((st = bind_mlp(&y->mlp, w, p, H, c->intermediate_size, act)) != LMC_OK) return st;
            continue;
        }
        lmc_moe *moe = y->moe = calloc(1, sizeof *y->moe);
        if (!moe) return lmc_error(LMC_ERR_NOMEM, "out of memory");
        if ((st = lmc_moe_bind(moe, w, p, "gate", E, K, H, moe_I, names.stacked,
                               names.per_expert)) != LMC_OK)
            return st;
        moe->norm_topk = norm_topk;
        if (qwen3) continue;
        char q[300];
        moe->shared = calloc(1, sizeof *moe->shared);
        if (!moe->shared) return lmc_error(LMC_ERR_NOMEM, "out of memory");
        snprintf(q, sizeof q, "%s.shared_expert", p);
        if ((st = bind_mlp(moe->shared, w, q, H, shared_I, act)) != LMC_OK) return st;
        snprintf(q, sizeof q, "%s.shared_expert_gate", p);
        if ((st = lmc_linear_bind(&moe->shared_gate, w, q, H, 1, false)) != LMC_OK) return st;
    }
    /* sliding window as Qwen2 (use_sliding_window, max_window_layers / layer_types) */
    bool use_sw = lmc_json_bool(j, "use_sliding_window", false, NULL);
    int64_t max_window_layers = lmc_json_int(j, "max_window_layers", 28, NULL);
    if (use_sw && c->sliding_window > 0) {
        lmc_decoder_set_sliding(d, c->sliding_window, false);
        if (!json_object_get(j, "layer_types"))
            for (int64_t i = max_window_layers; i < d->n_layers; i++)
                d->layers[i].sliding_window = c->sliding_window;
    }
    return LMC_OK;
}

static lmc_status qwen2_moe_load(lmc_model *m) {
    return qwen_moe_load(m, false);
}
static lmc_status qwen3_moe_load(lmc_model *m) {
    return qwen_moe_load(m, true);
}

static const lmc_config_defaults qwen_moe_defaults = {.rms_norm_eps = 1e-6,
                                                      .max_position_embeddings = 32768,
                                                      .tie_word_embeddings = false,
                                                      .sliding_window = 0,
                                                      .bos_token_id = -1,
                                                      .eos_token_id = -1};

const lmc_arch lmc_arch_qwen2_moe = {"qwen2_moe", &qwen_moe_defaults, qwen2_moe_load,
                                     LMC_DECODER_HOOKS};
const lmc_arch lmc_arch_qwen3_moe = {"qwen3_moe", &qwen_moe_defaults, qwen3_moe_load,
                                     LMC_DECODER_HOOKS};
