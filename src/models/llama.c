/* LlamaForCausalLM and MistralForCausalLM (transformers modeling_llama.py,
 * modeling_mistral.py): pre-norm decoder, RMSNorm, GQA with rotary
 * embeddings, SwiGLU MLP, tied or untied head. Mistral adds a sliding
 * window. */
#include "models/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct llama_layer {
    const lmc_tensor *attn_norm, *mlp_norm;
    lmc_linear q, k, v, o;
    lmc_linear gate, up, down;
} llama_layer;

typedef struct llama {
    lmc_embedding embed;
    llama_layer *layers;
    const lmc_tensor *final_norm;
    lmc_linear lm_head; /* unused when tied */
    bool tied;
    lmc_rope rope;
    lmc_attention_params attn;
    int64_t sliding_window;
} llama;

static lmc_status bind_norm(const lmc_weights *w, const char *name, int64_t n,
                            const lmc_tensor **out) {
    lmc_status st = lmc_weights_get_shaped(w, name, 1, &n, out);
    if (st != LMC_OK) return st;
    lmc_dtype dt = (*out)->dtype;
    if (dt != LMC_DTYPE_F32 && dt != LMC_DTYPE_F16 && dt != LMC_DTYPE_BF16)
        return lmc_error(LMC_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s (need F32/F16/BF16)",
                         w->dir, name, lmc_dtype_name(dt));
    return LMC_OK;
}

static lmc_status llama_load(lmc_model *m) {
    const lmc_model_config *c = &m->cfg;
    const lmc_weights *w = &m->weights;
    /* The MLP below is SwiGLU; another activation would run silently wrong. */
    if (strcmp(c->hidden_act, "silu") != 0)
        return lmc_error(LMC_ERR_UNSUPPORTED,
                         "%s/config.json: hidden_act '%s' is not supported (silu)", m->dir,
                         c->hidden_act);
    llama *L = calloc(1, sizeof *L);
    if (!L) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    m->impl = L;
    L->layers = calloc((size_t)c->num_hidden_layers, sizeof *L->layers);
    if (!L->layers) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    int64_t H = c->hidden_size, hd = c->head_dim, nh = c->num_attention_heads,
            nkv = c->num_key_value_heads, I = c->intermediate_size;
    lmc_status st = lmc_embedding_bind(&L->embed, w, "model.embed_tokens.weight", c->vocab_size, H);
    if (st != LMC_OK) return st;
    for (int64_t i = 0; i < c->num_hidden_layers; i++) {
        llama_layer *y = &L->layers[i];
        char p[256], n[256];
#define BIND(lin, sub, in, out, bias)                                                              \
    snprintf(p, sizeof p, "model.layers.%lld.%s", (long long)i, sub);                              \
    if ((st = lmc_linear_bind(&y->lin, w, p, in, out, bias)) != LMC_OK) return st
        BIND(q, "self_attn.q_proj", H, nh * hd, c->attention_bias);
        BIND(k, "self_attn.k_proj", H, nkv * hd, c->attention_bias);
        BIND(v, "self_attn.v_proj", H, nkv * hd, c->attention_bias);
        BIND(o, "self_attn.o_proj", nh * hd, H, c->attention_bias);
        BIND(gate, "mlp.gate_proj", H, I, c->mlp_bias);
        BIND(up, "mlp.up_proj", H, I, c->mlp_bias);
        BIND(down, "mlp.down_proj", I, H, c->mlp_bias);
#undef BIND
        snprintf(n, sizeof n, "model.layers.%lld.input_layernorm.weight", (long long)i);
        if ((st = bind_norm(w, n, H, &y->attn_norm)) != LMC_OK) return st;
        snprintf(n, sizeof n, "model.layers.%lld.post_attention_layernorm.weight", (long long)i);
        if ((st = bind_norm(w, n, H, &y->mlp_norm)) != LMC_OK) return st;
    }
    if ((st = bind_norm(w, "model.norm.weight", H, &L->final_norm)) != LMC_OK) return st;
    /* A tied model may still ship lm_head.weight (some exports do); use it
     * when present, as loading it into the tied parameter would. */
    L->tied = c->tie_word_embeddings && !lmc_weights_find(w, "lm_head.weight");
    if (!L->tied) {
        st = lmc_linear_bind(&L->lm_head, w, "lm_head", H, c->vocab_size, false);
        if (st != LMC_OK) return st;
    }
    if ((st = lmc_rope_init(&L->rope, &c->rope, hd, c->max_position_embeddings)) != LMC_OK)
        return lmc_error_prefix(st, "%s/config.json", m->dir);
    L->attn = (lmc_attention_params){.n_heads = nh, .n_kv_heads = nkv, .head_dim = hd,
                                     .scale = (float)(1.0 / sqrt((double)hd))};
    if (!strcmp(c->model_type, "mistral")) L->attn.sliding_window = c->sliding_window;
    return LMC_OK;
}

static void llama_free(lmc_model *m) {
    llama *L = m->impl;
    if (!L) return;
    lmc_rope_free(&L->rope);
    free(L->layers);
    free(L);
    m->impl = NULL;
}

static lmc_status llama_forward(lmc_model *m, lmc_kv_cache *kv, const int32_t *tokens, int64_t T,
                                bool all_positions, float *logits) {
    const lmc_model_config *c = &m->cfg;
    llama *L = m->impl;
    int64_t H = c->hidden_size, hd = c->head_dim, nh = c->num_attention_heads,
            nkv = c->num_key_value_heads, I = c->intermediate_size, V = c->vocab_size;
    int64_t start = kv->length;
    lmc_status st = lmc_kv_cache_reserve(kv, start + T);
    if (st != LMC_OK) return st;
    size_t n_floats = (size_t)(T * (2 * H + 2 * nh * hd + 2 * nkv * hd + 2 * I));
    float *buf = lmc_alloc_aligned(n_floats * sizeof(float));
    int32_t *pos = malloc((size_t)T * sizeof *pos);
    if (!buf || !pos) {
        lmc_free_aligned(buf);
        free(pos);
        return lmc_error(LMC_ERR_NOMEM, "out of memory for %lld tokens", (long long)T);
    }
    float *x = buf, *xn = x + T * H, *q = xn + T * H, *attn = q + T * nh * hd;
    float *k = attn + T * nh * hd, *v = k + T * nkv * hd, *g = v + T * nkv * hd, *u = g + T * I;
    for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)(start + t);

    lmc_embedding_lookup(&L->embed, tokens, T, x);
    for (int64_t l = 0; l < c->num_hidden_layers; l++) {
        const llama_layer *y = &L->layers[l];
        lmc_rmsnorm(x, y->attn_norm, 0.0f, (float)c->rms_norm_eps, xn, T, H);
        lmc_linear_forward(&y->q, xn, T, q);
        lmc_linear_forward(&y->k, xn, T, k);
        lmc_linear_forward(&y->v, xn, T, v);
        lmc_rope_apply(&L->rope, q, T, nh, pos);
        lmc_rope_apply(&L->rope, k, T, nkv, pos);
        lmc_kv_cache_store(kv, l, start, k, v, T);
        lmc_attention(&L->attn, kv, l, q, start, T, attn);
        lmc_linear_forward(&y->o, attn, T, xn);
        for (int64_t i = 0; i < T * H; i++) x[i] += xn[i];
        lmc_rmsnorm(x, y->mlp_norm, 0.0f, (float)c->rms_norm_eps, xn, T, H);
        lmc_linear_forward(&y->gate, xn, T, g);
        lmc_linear_forward(&y->up, xn, T, u);
        lmc_silu_mul(g, u, T * I);
        lmc_linear_forward(&y->down, g, T, xn);
        for (int64_t i = 0; i < T * H; i++) x[i] += xn[i];
    }
    kv->length = start + T;
    if (logits) {
        int64_t first = all_positions ? 0 : T - 1, rows = T - first;
        lmc_rmsnorm(x + first * H, L->final_norm, 0.0f, (float)c->rms_norm_eps, xn, rows, H);
        if (L->tied) lmc_embedding_as_linear(&L->embed, xn, rows, logits);
        else lmc_linear_forward(&L->lm_head, xn, rows, logits);
        (void)V;
    }
    lmc_free_aligned(buf);
    free(pos);
    return LMC_OK;
}

static const lmc_config_defaults llama_defaults = {
    .rms_norm_eps = 1e-6, .max_position_embeddings = 2048, .tie_word_embeddings = false,
    .sliding_window = 0, .bos_token_id = 1, .eos_token_id = 2};
static const lmc_config_defaults mistral_defaults = {
    .rms_norm_eps = 1e-6, .max_position_embeddings = 4096 * 32, .tie_word_embeddings = false,
    .sliding_window = 4096, .bos_token_id = 1, .eos_token_id = 2};

const lmc_arch lmc_arch_llama = {"llama", &llama_defaults, llama_load, llama_free, llama_forward};
const lmc_arch lmc_arch_mistral = {"mistral", &mistral_defaults, llama_load, llama_free,
                                   llama_forward};
