/* The shared decoder forward pass (transformers' *DecoderLayer.forward):
 *   h = x + post_attn_norm(attn(attn_norm(x)))
 *   out = h + post_mlp_norm(mlp(mlp_norm(h)))
 * with optional pieces absent for plain Llama. */
#include "nn/decoder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lmc_status lmc_decoder_init(lmc_decoder *d, const lmc_model_config *c) {
    memset(d, 0, sizeof *d);
    d->cfg = c;
    d->n_layers = c->num_hidden_layers;
    d->hidden = c->hidden_size;
    d->n_heads = c->num_attention_heads;
    d->n_kv_heads = c->num_key_value_heads;
    d->head_dim = c->head_dim;
    d->intermediate = c->intermediate_size;
    d->vocab = c->vocab_size;
    d->embed_scale = 1.0f;
    d->layers = calloc((size_t)d->n_layers, sizeof *d->layers);
    if (!d->layers) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    d->attn = (lmc_attention_params){.n_heads = d->n_heads,
                                     .n_kv_heads = d->n_kv_heads,
                                     .head_dim = d->head_dim,
                                     .scale = (float)(1.0 / sqrt((double)d->head_dim))};
    lmc_status st = lmc_rope_init(&d->rope, &c->rope, d->head_dim, c->max_position_embeddings);
    if (st != LMC_OK) return st;
    for (int64_t i = 0; i < d->n_layers; i++) d->layers[i].rope = &d->rope;
    return LMC_OK;
}

void lmc_decoder_free(lmc_decoder *d) {
    for (int64_t i = 0; d->layers && i < d->n_layers; i++)
        if (d->layers[i].moe) {
            lmc_moe_free(d->layers[i].moe);
            free(d->layers[i].moe);
        }
    free(d->layers);
    lmc_rope_free(&d->rope);
    lmc_rope_free(&d->rope_local);
    memset(d, 0, sizeof *d);
}

lmc_status lmc_decoder_bind_ends(lmc_decoder *d, const lmc_weights *w, float norm_offset) {
    const lmc_model_config *c = d->cfg;
    lmc_status st =
        lmc_embedding_bind(&d->embed, w, "model.embed_tokens.weight", d->vocab, d->hidden);
    if (st != LMC_OK) return st;
    st = lmc_norm_bind(&d->final_norm, w, "model.norm", d->hidden, (float)c->rms_norm_eps,
                       norm_offset, false);
    if (st != LMC_OK) return st;
    /* A tied model may still ship lm_head.weight; it is then the head. */
    d->tied = c->tie_word_embeddings && !lmc_weights_find(w, "lm_head.weight");
    if (!d->tied) return lmc_linear_bind(&d->lm_head, w, "lm_head", d->hidden, d->vocab, false);
    return LMC_OK;
}

void lmc_decoder_set_sliding(lmc_decoder *d, int64_t window, bool all_sliding) {
    const json_t *types = json_object_get(d->cfg->json, "layer_types");
    for (int64_t i = 0; i < d->n_layers; i++) {
        bool sliding = all_sliding;
        if (json_is_array(types) && (int64_t)json_array_size(types) == d->n_layers) {
            const char *t = json_string_value(json_array_get(types, (size_t)i));
            sliding = t && !strcmp(t, "sliding_attention");
        }
        d->layers[i].sliding_window = sliding ? window : 0;
    }
}

lmc_status lmc_decoder_bind_llama_layout(lmc_decoder *d, const lmc_weights *w, float norm_offset,
                                         lmc_activation act, bool qkv_bias, bool o_bias) {
    const lmc_model_config *c = d->cfg;
    int64_t H = d->hidden, hd = d->head_dim, nh = d->n_heads, nkv = d->n_kv_heads,
            I = d->intermediate;
    float eps = (float)c->rms_norm_eps;
    lmc_status st = lmc_decoder_bind_ends(d, w, norm_offset);
    if (st != LMC_OK) return st;
    for (int64_t i = 0; i < d->n_layers; i++) {
        lmc_decoder_layer *y = &d->layers[i];
        char p[256];
#define BIND(lin, sub, in, out, bias)                                                              \
    snprintf(p, sizeof p, "model.layers.%lld.%s", (long long)i, sub);                              \
    if ((st = lmc_linear_bind(&y->lin, w, p, in, out, bias)) != LMC_OK) return st
        BIND(q, "self_attn.q_proj", H, nh * hd, qkv_bias);
        BIND(k, "self_attn.k_proj", H, nkv * hd, qkv_bias);
        BIND(v, "self_attn.v_proj", H, nkv * hd, qkv_bias);
        BIND(o, "self_attn.o_proj", nh * hd, H, o_bias);
        BIND(mlp.gate, "mlp.gate_proj", H, I, c->mlp_bias);
        BIND(mlp.up, "mlp.up_proj", H, I, c->mlp_bias);
        BIND(mlp.down, "mlp.down_proj", I, H, c->mlp_bias);
#undef BIND
        y->mlp.gated = true;
        y->mlp.act = act;
        snprintf(p, sizeof p, "model.layers.%lld.input_layernorm", (long long)i);
        if ((st = lmc_norm_bind(&y->attn_norm, w, p, H, eps, norm_offset, false)) != LMC_OK)
            return st;
        snprintf(p, sizeof p, "model.layers.%lld.post_attention_layernorm", (long long)i);
        if ((st = lmc_norm_bind(&y->mlp_norm, w, p, H, eps, norm_offset, false)) != LMC_OK)
            return st;
    }
    return LMC_OK;
}

/* Per-head norm over head_dim (qwen3/gemma3 q_norm, k_norm). */
static void head_norm(const lmc_norm *n, float *x, int64_t T, int64_t heads, int64_t hd) {
    if (!n->weight) return;
    lmc_norm_forward(n, x, x, T * heads, hd);
}

static void add_into(float *x, const float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] += y[i];
}

/* Phi3/PhiMoE prepare_inputs_for_generation (transformers): the first time
 * the sequence grows past original_max_position_embeddings the cache,
 * rotated with the short factors, is dropped and the whole sequence is run
 * again (now with the long factors). Same here, from the token history
 * (kv->tokens, which the session records before each forward). */
static lmc_status rerun_with_long_factors(lmc_decoder *d, lmc_kv_cache *kv, const int32_t *tokens,
                                          int64_t T, bool all_positions, float *logits) {
    int64_t start = kv->length, n = start + T, V = d->vocab;
    int32_t *all = malloc((size_t)n * sizeof *all);
    float *full = logits && all_positions ? malloc((size_t)(n * V) * sizeof(float)) : NULL;
    if (!all || (logits && all_positions && !full)) {
        free(all);
        free(full);
        return lmc_error(LMC_ERR_NOMEM, "out of memory re-running %lld tokens", (long long)n);
    }
    memcpy(all, kv->tokens, (size_t)start * sizeof *all);
    memcpy(all + start, tokens, (size_t)T * sizeof *all);
    kv->length = 0;
    lmc_status st = lmc_decoder_forward(d, kv, all, n, all_positions, full ? full : logits);
    if (st == LMC_OK && full) memcpy(logits, full + start * V, (size_t)(T * V) * sizeof(float));
    if (st != LMC_OK) kv->length = 0;
    free(all);
    free(full);
    return st;
}

lmc_status lmc_decoder_forward(lmc_decoder *d, lmc_kv_cache *kv, const int32_t *tokens, int64_t T,
                               bool all_positions, float *logits) {
    return lmc_decoder_forward_inputs(d, kv, tokens, T, NULL, all_positions, logits);
}

lmc_status lmc_decoder_forward_inputs(lmc_decoder *d, lmc_kv_cache *kv, const int32_t *tokens,
                                      int64_t T, const lmc_decoder_inputs *in, bool all_positions,
                                      float *logits) {
    int64_t H = d->hidden, hd = d->head_dim, nh = d->n_heads, nkv = d->n_kv_heads;
    int64_t qd = nh * hd, kd = nkv * hd;
    int64_t start = kv->length;
    bool longrope = d->rope.long_inv_freq != NULL;
    if (in && in->prefix > 0)
        for (int64_t l = 0; l < kv->n_layers; l++)
            if (kv->layers[l].window > 0 || kv->layers[l].keep > 0 || d->layers[l].sliding_window)
                return lmc_error(LMC_ERR_UNSUPPORTED,
                                 "a bidirectional prefix needs a KV cache that keeps every "
                                 "position (layer %lld rotates)",
                                 (long long)l);
    if (longrope && start > 0 && kv->tokens && !lmc_rope_uses_long(&d->rope, start) &&
        lmc_rope_uses_long(&d->rope, start + T))
        return rerun_with_long_factors(d, kv, tokens, T, all_positions, logits);
    lmc_status st = lmc_kv_cache_reserve(kv, start + T);
    if (st != LMC_OK) return st;
    size_t n_floats = (size_t)(T * (3 * H + 2 * qd + 2 * kd + (qd + 2 * kd)));
    /* the positions after the activations */
    size_t act_bytes = (n_floats * sizeof(float) + 63) / 64 * 64;
    bool owned;
    uint8_t *mem =
        lmc_tmp_get(LMC_SCRATCH_FORWARD, act_bytes + (size_t)T * sizeof(int32_t), &owned);
    if (!mem) return lmc_error(LMC_ERR_NOMEM, "out of memory for %lld tokens", (long long)T);
    float *buf = (float *)mem;
    int32_t *pos = (int32_t *)(mem + act_bytes);
    float *x = buf, *xn = x + T * H, *tmp = xn + T * H, *q = tmp + T * H, *attn = q + T * qd;
    float *k = attn + T * qd, *v = k + T * kd, *qkv = v + T * kd;
    for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)(start + t);

    if (in && in->embeds) {
        memcpy(x, in->embeds, (size_t)(T * H) * sizeof(float));
    } else {
        lmc_embedding_lookup(&d->embed, tokens, T, x);
        if (d->embed_scale != 1.0f)
            for (int64_t i = 0; i < T * H; i++) x[i] *= d->embed_scale;
    }
    for (int64_t l = 0; l < d->n_layers && st == LMC_OK; l++) {
        const lmc_decoder_layer *y = &d->layers[l];
        /* this layer's heads (OpenELM varies them per layer) */
        int64_t lnh = y->n_heads ? y->n_heads : nh, lnkv = y->n_kv_heads ? y->n_kv_heads : nkv;
        int64_t lqd = lnh * hd, lkd = lnkv * hd;
        lmc_kv_cache lkv = *kv;
        lkv.n_kv_heads = lnkv; /* layer storage is [heads, capacity, hd]: a prefix of it */
        lmc_norm_forward(&y->attn_norm, x, xn, T, H);
        if (y->fused_qkv) {
            lmc_linear_forward(&y->qkv, xn, T, qkv);
            for (int64_t t = 0; t < T; t++) {
                const float *row = qkv + t * (lqd + 2 * lkd);
                memcpy(q + t * lqd, row, (size_t)lqd * sizeof(float));
                memcpy(k + t * lkd, row + lqd, (size_t)lkd * sizeof(float));
                memcpy(v + t * lkd, row + lqd + lkd, (size_t)lkd * sizeof(float));
            }
        } else {
            const lmc_linear *ls[3] = {&y->q, &y->k, &y->v};
            float *ys[3] = {q, k, v};
            lmc_linear_forward_multi(ls, 3, xn, T, ys);
        }
        head_norm(&y->q_norm, q, T, lnh, hd);
        head_norm(&y->k_norm, k, T, lnkv, hd);
        lmc_rope_apply(y->rope, q, T, lnh, pos);
        lmc_rope_apply(y->rope, k, T, lnkv, pos);
        lmc_kv_cache_store(&lkv, l, start, k, v, T);
        lmc_attention_params ap = d->attn;
        ap.sliding_window = y->sliding_window;
        ap.prefix = in ? in->prefix : 0;
        ap.n_heads = lnh;
        ap.n_kv_heads = lnkv;
        if ((st = lmc_attention(&ap, &lkv, l, q, start, T, attn)) != LMC_OK) break;
        lmc_linear_forward(&y->o, attn, T, tmp);
        if (y->post_attn_norm.weight) lmc_norm_forward(&y->post_attn_norm, tmp, tmp, T, H);
        add_into(x, tmp, T * H);
        lmc_norm_forward(&y->mlp_norm, x, xn, T, H);
        if (y->moe)
            st = lmc_moe_forward(y->moe, xn, T, H, tmp,
                                 kv->expert_calls ? kv->expert_calls + l * kv->expert_calls_stride
                                                  : NULL);
        else
            st = lmc_mlp_forward(&y->mlp, xn, T, tmp);
        if (st != LMC_OK) break;
        if (y->post_mlp_norm.weight) lmc_norm_forward(&y->post_mlp_norm, tmp, tmp, T, H);
        add_into(x, tmp, T * H);
    }
    if (st == LMC_OK) {
        kv->length = start + T;
        if (logits) {
            int64_t first = all_positions ? 0 : T - 1, rows = T - first;
            lmc_norm_forward(&d->final_norm, x + first * H, xn, rows, H);
            if (d->tied)
                lmc_embedding_as_linear(&d->embed, xn, rows, logits);
            else
                lmc_linear_forward(&d->lm_head, xn, rows, logits);
            if (d->final_softcap > 0)
                for (int64_t i = 0; i < rows * d->vocab; i++)
                    logits[i] = tanhf(logits[i] / d->final_softcap) * d->final_softcap;
        }
    }
    lmc_tmp_put(mem, owned);
    return st;
}

static uint64_t linear_bytes(const lmc_linear *l) {
    if (l->quantized) return lmc_qweight_nbytes(&l->qw);
    return l->weight ? l->weight->nbytes : 0;
}

uint64_t lmc_decoder_bytes_per_token(const lmc_decoder *d) {
    uint64_t total = 0;
    for (int64_t i = 0; i < d->n_layers; i++) {
        const lmc_decoder_layer *y = &d->layers[i];
        total += linear_bytes(&y->q) + linear_bytes(&y->k) + linear_bytes(&y->v) +
                 linear_bytes(&y->o) + linear_bytes(&y->qkv);
        if (y->moe) {
            const lmc_moe *m = y->moe;
            uint64_t experts = 0;
            for (int64_t e = 0; e < m->n_experts; e++)
                experts +=
                    linear_bytes(&m->gate[e]) + linear_bytes(&m->up[e]) + linear_bytes(&m->down[e]);
            total += linear_bytes(&m->router) +
                     (m->n_experts ? experts / (uint64_t)m->n_experts * (uint64_t)m->top_k : 0);
            if (m->shared)
                total += linear_bytes(&m->shared->gate) + linear_bytes(&m->shared->up) +
                         linear_bytes(&m->shared->down) + linear_bytes(&m->shared_gate);
        } else {
            total +=
                linear_bytes(&y->mlp.gate) + linear_bytes(&y->mlp.up) + linear_bytes(&y->mlp.down);
        }
    }
    uint64_t embed = d->embed.quantized ? lmc_qweight_nbytes(&d->embed.qw)
                                        : (d->embed.weight ? d->embed.weight->nbytes : 0);
    total +=
        d->tied ? embed : linear_bytes(&d->lm_head) + embed / (uint64_t)(d->vocab ? d->vocab : 1);
    return total;
}
