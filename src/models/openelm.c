/* OpenELMForCausalLM (apple/OpenELM-*, HF hub modeling_openelm.py; mlx-lm
 * models/openelm.py). Layer-wise scaling: layer i has num_query_heads[i]
 * and num_kv_heads[i] heads of head_dim, a fused qkv_proj [q; k; v], RMSNorm
 * q_norm / k_norm over head_dim when normalize_qk_projections, and an FFN of
 * make_divisible(ffn_multipliers[i] * model_dim, ffn_dim_divisor) with
 * proj_1 = [gate; up] when ffn_with_glu. Every RMSNorm uses eps 1e-6
 * (OpenELMRMSNorm's default; the config has none). The head is the
 * embedding when share_input_output_layers. Keys (HF and mlx-lm alike):
 * transformer.token_embeddings, transformer.layers.N.{attn_norm, attn.qkv_proj,
 * attn.q_norm, attn.k_norm, attn.out_proj, ffn_norm, ffn.proj_1, ffn.proj_2},
 * transformer.norm, lm_head. */
#include "models/model.h"
#include "nn/decoder.h"

#include <stdio.h>
#include <stdlib.h>

/* apple's configuration_openelm.make_divisible (min_value = divisor) */
static int64_t make_divisible(double v, int64_t divisor) {
    int64_t nv = (int64_t)(v + (double)divisor / 2.0) / divisor * divisor;
    if (nv < divisor) nv = divisor;
    if ((double)nv < 0.9 * v) nv += divisor;
    return nv;
}

/* Reads config.json's per-layer list key[n] (numbers). */
static lmc_status layer_list(const lmc_model *m, const char *key, int64_t n, double *out) {
    const json_t *a = json_object_get(m->cfg.json, key);
    if (!json_is_array(a) || (int64_t)json_array_size(a) != n)
        return lmc_error(LMC_ERR_FORMAT,
                         "%s/config.json: '%s' must be a list of %lld numbers "
                         "(one per layer)",
                         m->dir, key, (long long)n);
    for (int64_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(a, (size_t)i);
        if (!json_is_number(v))
            return lmc_error(LMC_ERR_FORMAT, "%s/config.json: '%s'[%lld] is not a number", m->dir,
                             key, (long long)i);
        out[i] = json_number_value(v);
    }
    return LMC_OK;
}

/* OpenELM's config names, mapped onto the common fields before the decoder
 * is built (the sanitize step of this architecture). */
static lmc_status openelm_config(lmc_model *m, double *qh, double *kvh, double *ffn) {
    lmc_model_config *c = &m->cfg;
    const json_t *j = c->json;
    bool bad = false;
    int64_t L = lmc_json_int(j, "num_transformer_layers", 0, &bad);
    int64_t dim = lmc_json_int(j, "model_dim", 0, &bad);
    int64_t hd = lmc_json_int(j, "head_dim", 0, &bad);
    if (bad || L <= 0 || L > 4096 || dim <= 0 || hd <= 0)
        return lmc_error(LMC_ERR_FORMAT,
                         "%s/config.json: OpenELM needs positive integers "
                         "num_transformer_layers, model_dim and head_dim",
                         m->dir);
    lmc_status st = lmc_model_check_layers(m, "num_transformer_layers", L);
    if (st != LMC_OK) return st;
    c->num_hidden_layers = L;
    c->hidden_size = dim;
    c->head_dim = hd;
    if ((st = layer_list(m, "num_query_heads", L, qh)) != LMC_OK) return st;
    if ((st = layer_list(m, "num_kv_heads", L, kvh)) != LMC_OK) return st;
    if ((st = layer_list(m, "ffn_multipliers", L, ffn)) != LMC_OK) return st;
    int64_t max_q = 0, max_kv = 0;
    for (int64_t i = 0; i < L; i++) {
        int64_t q = (int64_t)qh[i], kv = (int64_t)kvh[i];
        if (q <= 0 || kv <= 0 || q % kv != 0)
            return lmc_error(LMC_ERR_FORMAT,
                             "%s/config.json: layer %lld has %lld query and %lld kv heads", m->dir,
                             (long long)i, (long long)q, (long long)kv);
        if (q > max_q) max_q = q;
        if (kv > max_kv) max_kv = kv;
    }
    c->num_attention_heads = max_q;
    c->num_key_value_heads = max_kv;
    c->max_position_embeddings = lmc_json_int(j, "max_context_length", 2048, &bad);
    c->rope.theta = lmc_json_number(j, "rope_freq_constant", 10000.0, &bad);
    c->tie_word_embeddings = lmc_json_bool(j, "share_input_output_layers", true, &bad);
    c->rms_norm_eps = 1e-6;
    if (bad)
        return lmc_error(LMC_ERR_FORMAT, "%s/config.json: an OpenELM field has the wrong type",
                         m->dir);
    return LMC_OK;
}

static lmc_status openelm_load(lmc_model *m) {
    const lmc_weights *w = &m->weights;
    const json_t *j = m->cfg.json;
    lmc_decoder *d = calloc(1, sizeof *d);
    int64_t L = lmc_json_int(j, "num_transformer_layers", 0, NULL);
    double *lists = calloc((size_t)(L > 0 && L <= 4096 ? 3 * L : 3), sizeof(double));
    if (!d || !lists) {
        free(d);
        free(lists);
        return lmc_error(LMC_ERR_NOMEM, "out of memory");
    }
    m->impl = d;
    double *qh = lists, *kvh = lists + L, *ffn = lists + 2 * L;
    lmc_status st = openelm_config(m, qh, kvh, ffn);
    const lmc_model_config *c = &m->cfg;
    if (st == LMC_OK) st = lmc_decoder_init(d, c);
    lmc_activation act = LMC_ACT_SILU;
    if (st == LMC_OK)
        st = lmc_activation_parse(lmc_json_string(j, "activation_fn_name", "swish", NULL), &act);
    int64_t H = c->hidden_size, hd = c->head_dim;
    int64_t divisor = lmc_json_int(j, "ffn_dim_divisor", 256, NULL);
    bool glu = lmc_json_bool(j, "ffn_with_glu", true, NULL);
    bool qk_norm = lmc_json_bool(j, "normalize_qk_projections", true, NULL);
    float eps = (float)c->rms_norm_eps;
    if (st == LMC_OK)
        st = lmc_embedding_bind(&d->embed, w, "transformer.token_embeddings.weight", d->vocab, H);
    if (st == LMC_OK)
        st = lmc_norm_bind(&d->final_norm, w, "transformer.norm", H, eps, 0.0f, false);
    d->tied = c->tie_word_embeddings && !lmc_weights_find(w, "lm_head.weight");
    if (st == LMC_OK && !d->tied)
        st = lmc_linear_bind(&d->lm_head, w, "lm_head", H, d->vocab, false);
    for (int64_t i = 0; i < d->n_layers && st == LMC_OK; i++) {
        lmc_decoder_layer *y = &d->layers[i];
        int64_t nq = (int64_t)qh[i], nkv = (int64_t)kvh[i];
        int64_t I = make_divisible(ffn[i] * (double)H, divisor);
        y->n_heads = nq;
        y->n_kv_heads = nkv;
        y->fused_qkv = true;
        y->mlp.gated = glu;
        y->mlp.fused_gate_up = glu;
        y->mlp.act = act;
        char p[256];
#define PREFIX(sub) snprintf(p, sizeof p, "transformer.layers.%lld.%s", (long long)i, sub)
        PREFIX("attn.qkv_proj");
        if ((st = lmc_linear_bind(&y->qkv, w, p, H, (nq + 2 * nkv) * hd, false)) != LMC_OK) break;
        PREFIX("attn.out_proj");
        if ((st = lmc_linear_bind(&y->o, w, p, nq * hd, H, false)) != LMC_OK) break;
        PREFIX("ffn.proj_1");
        if ((st = lmc_linear_bind(glu ? &y->mlp.gate : &y->mlp.up, w, p, H, glu ? 2 * I : I,
                                  false)) != LMC_OK)
            break;
        PREFIX("ffn.proj_2");
        if ((st = lmc_linear_bind(&y->mlp.down, w, p, I, H, false)) != LMC_OK) break;
        PREFIX("attn_norm");
        if ((st = lmc_norm_bind(&y->attn_norm, w, p, H, eps, 0.0f, false)) != LMC_OK) break;
        PREFIX("ffn_norm");
        if ((st = lmc_norm_bind(&y->mlp_norm, w, p, H, eps, 0.0f, false)) != LMC_OK) break;
        if (qk_norm) {
            PREFIX("attn.q_norm");
            if ((st = lmc_norm_bind(&y->q_norm, w, p, hd, eps, 0.0f, false)) != LMC_OK) break;
            PREFIX("attn.k_norm");
            if ((st = lmc_norm_bind(&y->k_norm, w, p, hd, eps, 0.0f, false)) != LMC_OK) break;
        }
#undef PREFIX
    }
    free(lists);
    return st;
}

static const lmc_config_defaults openelm_defaults = {.rms_norm_eps = 1e-6,
                                                     .max_position_embeddings = 2048,
                                                     .tie_word_embeddings = true,
                                                     .sliding_window = 0,
                                                     .bos_token_id = 1,
                                                     .eos_token_id = 2};

const lmc_arch lmc_arch_openelm = {"openelm", &openelm_defaults, openelm_load, LMC_DECODER_HOOKS};
