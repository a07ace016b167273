#include "models/bind.h"

#include <stdio.h>
#include <string.h>

void lmc_binder_at(lmc_binder *b, const char *prefix) {
    snprintf(b->prefix, sizeof b->prefix, "%s", prefix);
}

lmc_status lmc_bind_explain(const lmc_binder *b, lmc_status st, const char *module,
                            const char *expected) {
    if (st != LMC_ERR_NOT_FOUND) return st;
    /* lmc_weights_get's message already lists what the file holds there. */
    return lmc_error_prefix(st, "%s expects '%s%s' with %s", b->arch, b->prefix, module, expected);
}

lmc_status lmc_bind_linear(lmc_binder *b, lmc_linear *l, const char *module, int64_t in,
                           int64_t out, bool bias) {
    char name[256];
    snprintf(name, sizeof name, "%s%s", b->prefix, module);
    lmc_status st = lmc_linear_bind(l, b->w, name, in, out, bias);
    return lmc_bind_explain(b, st, module,
                            bias ? "weight and bias (or weight, scales, biases, bias)"
                                 : "weight (or weight, scales, biases)");
}

lmc_status lmc_bind_norm(lmc_binder *b, lmc_norm *n, const char *module, int64_t dim, float eps,
                         float offset, bool layer_norm) {
    char name[256];
    snprintf(name, sizeof name, "%s%s", b->prefix, module);
    lmc_status st = lmc_norm_bind(n, b->w, name, dim, eps, offset, layer_norm);
    return lmc_bind_explain(b, st, module, layer_norm ? "weight and bias" : "weight");
}

double lmc_config_optional(const json_t *cfg, const char *key, double def) {
    const json_t *v = json_object_get(cfg, key);
    if (!v) return def;
    return json_is_number(v) ? json_number_value(v) : 0.0;
}

lmc_status lmc_bind_attention(lmc_binder *b, lmc_decoder_layer *y, int64_t hidden, int64_t n_heads,
                              int64_t n_kv_heads, int64_t head_dim, bool qkv_bias, bool o_bias) {
    lmc_status st;
    int64_t q = n_heads * head_dim, kv = n_kv_heads * head_dim;
    if ((st = lmc_bind_linear(b, &y->q, "self_attn.q_proj", hidden, q, qkv_bias)) ||
        (st = lmc_bind_linear(b, &y->k, "self_attn.k_proj", hidden, kv, qkv_bias)) ||
        (st = lmc_bind_linear(b, &y->v, "self_attn.v_proj", hidden, kv, qkv_bias)) ||
        (st = lmc_bind_linear(b, &y->o, "self_attn.o_proj", q, hidden, o_bias)))
        return st;
    return LMC_OK;
}

lmc_status lmc_bind_gated_mlp(lmc_binder *b, lmc_mlp *m, int64_t hidden, int64_t inter, bool bias,
                              lmc_activation act) {
    lmc_status st;
    if ((st = lmc_bind_linear(b, &m->gate, "mlp.gate_proj", hidden, inter, bias)) ||
        (st = lmc_bind_linear(b, &m->up, "mlp.up_proj", hidden, inter, bias)) ||
        (st = lmc_bind_linear(b, &m->down, "mlp.down_proj", inter, hidden, bias)))
        return st;
    m->gated = true;
    m->act = act;
    return LMC_OK;
}

lmc_status lmc_bind_sandwich_norms(lmc_binder *b, lmc_decoder_layer *y, int64_t hidden, float eps) {
    lmc_status st;
    if ((st = lmc_bind_norm(b, &y->attn_norm, "input_layernorm", hidden, eps, 1.0f, false)) ||
        (st = lmc_bind_norm(b, &y->post_attn_norm, "post_attention_layernorm", hidden, eps, 1.0f,
                            false)) ||
        (st = lmc_bind_norm(b, &y->mlp_norm, "pre_feedforward_layernorm", hidden, eps, 1.0f,
                            false)) ||
        (st = lmc_bind_norm(b, &y->post_mlp_norm, "post_feedforward_layernorm", hidden, eps, 1.0f,
                            false)))
        return st;
    return LMC_OK;
}
