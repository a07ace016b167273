/* The public model and session functions over the architecture table. */
#include "models/model.h"
#include "nn/decoder.h"

#include <stdlib.h>
#include <string.h>

lmc_status lmc_model_load(const char *dir, lmc_model **out) {
    if (!out) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_model_load: out is NULL");
    *out = NULL;
    if (!dir) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_model_load: dir is NULL");
    lmc_model *m = calloc(1, sizeof *m);
    if (!m) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    lmc_status st;
    char *cfg_path = lmc_path_join(dir, "config.json");
    m->dir = lmc_strdup(dir);
    if (!m->dir || !cfg_path) {
        st = lmc_error(LMC_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((st = lmc_config_load(dir, &m->cfg)) != LMC_OK) goto fail;
    m->arch = lmc_arch_find(m->cfg.model_type);
    if (!m->arch) {
        st = lmc_error(LMC_ERR_UNSUPPORTED, "%s: model_type '%s' is not supported (supported: %s)",
                       cfg_path, m->cfg.model_type, lmc_arch_names());
        goto fail;
    }
    if ((st = lmc_config_parse(&m->cfg, cfg_path, m->arch->defaults)) != LMC_OK) goto fail;
    if ((st = lmc_weights_open(dir, &m->weights)) != LMC_OK) goto fail;
    if ((st = lmc_config_quantization(&m->cfg, cfg_path, &m->weights.quantization)) != LMC_OK)
        goto fail;
    if ((st = m->arch->load(m)) != LMC_OK) {
        /* Errors from the weights name the folder; others come from the config. */
        if (!strstr(lmc_last_error(), dir)) lmc_error_prefix(st, "%s", cfg_path);
        goto fail;
    }
    free(cfg_path);
    *out = m;
    return LMC_OK;
fail:
    free(cfg_path);
    lmc_model_free(m);
    return st;
}

void lmc_model_free(lmc_model *m) {
    if (!m) return;
    if (m->arch && m->arch->free) m->arch->free(m);
    lmc_weights_close(&m->weights);
    lmc_config_free(&m->cfg);
    free(m->dir);
    free(m);
}

void lmc_model_get_info(const lmc_model *m, lmc_model_info *info) {
    memset(info, 0, sizeof *info);
    info->model_type = m->cfg.model_type;
    info->vocab_size = (int32_t)m->cfg.vocab_size;
    info->hidden_size = (int32_t)m->cfg.hidden_size;
    info->num_layers = (int32_t)m->cfg.num_hidden_layers;
    info->max_position_embeddings = (int32_t)m->cfg.max_position_embeddings;
    info->bos_token_id = m->cfg.bos_token_id;
    info->eos_token_ids = m->cfg.eos_token_ids;
    info->num_eos_token_ids = m->cfg.n_eos;
    info->weight_bytes = m->weights.total_bytes;
    const lmc_decoder *d = m->arch->decoder && m->impl ? m->arch->decoder(m) : NULL;
    if (d) info->decode_bytes = lmc_decoder_bytes_per_token(d);
}

lmc_status lmc_session_create(lmc_model *model, int32_t max_tokens, lmc_session **out) {
    if (!out) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_session_create: out is NULL");
    *out = NULL;
    if (!model) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_session_create: model is NULL");
    if (max_tokens < 0)
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_session_create: max_tokens = %d is negative",
                         max_tokens);
    lmc_session *s = calloc(1, sizeof *s);
    if (!s) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    s->model = model;
    s->max_tokens = max_tokens > 0 ? max_tokens : model->cfg.max_position_embeddings;
    const lmc_model_config *c = &model->cfg;
    lmc_status st = lmc_kv_cache_init(&s->kv, c->num_hidden_layers, c->num_key_value_heads,
                                      c->head_dim, s->max_tokens);
    /* Sliding-window layers of decoder models get rotating caches, bounded
     * by their window; full-attention layers keep every position. Not with
     * longrope: its switch to the long factors re-runs the whole sequence in
     * one batch, which needs every position kept. */
    const lmc_decoder *d = model->arch->decoder ? model->arch->decoder(model) : NULL;
    if (st == LMC_OK && d && !d->rope.long_inv_freq) {
        for (int64_t l = 0; l < d->n_layers && st == LMC_OK; l++)
            if (d->layers[l].sliding_window > 0)
                st = lmc_kv_cache_set_window(&s->kv, l, d->layers[l].sliding_window);
    }
    if (st != LMC_OK) {
        lmc_kv_cache_free(&s->kv);
        free(s);
        return st;
    }
    *out = s;
    return LMC_OK;
}

void lmc_session_free(lmc_session *s) {
    if (!s) return;
    lmc_kv_cache_free(&s->kv);
    free(s);
}

void lmc_session_reset(lmc_session *s) {
    s->kv.length = 0;
}

int32_t lmc_session_position(const lmc_session *s) {
    return (int32_t)s->kv.length;
}

lmc_status lmc_session_forward(lmc_session *s, const int32_t *tokens, int32_t n, int all_positions,
                               float *logits_out) {
    if (!s || (!tokens && n > 0) || n < 0)
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_session_forward: bad arguments");
    if (n == 0) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_session_forward: no tokens");
    int64_t V = s->model->cfg.vocab_size;
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return lmc_error(LMC_ERR_RANGE,
                             "token id %d at position %d is outside the vocabulary (0..%lld)",
                             tokens[i], i, (long long)V - 1);
    if (s->kv.length + n > s->max_tokens)
        return lmc_error(LMC_ERR_RANGE, "%lld tokens exceed the session's context of %lld",
                         (long long)(s->kv.length + n), (long long)s->max_tokens);
    /* A rotating cache takes at most max_batch tokens at once; longer inputs
     * run in consecutive batches, which is exact (causal attention over the
     * cache). If a later batch fails, the earlier ones stay in the session. */
    int32_t batch = s->kv.max_batch > 0 && s->kv.max_batch < n ? (int32_t)s->kv.max_batch : n;
    for (int32_t off = 0; off < n; off += batch) {
        int32_t m = n - off < batch ? n - off : batch;
        float *lg = NULL;
        if (logits_out && all_positions)
            lg = logits_out + (size_t)off * (size_t)V;
        else if (logits_out && off + m == n)
            lg = logits_out;
        lmc_status st =
            s->model->arch->forward(s->model, &s->kv, tokens + off, m, all_positions != 0, lg);
        if (st != LMC_OK) return st;
    }
    return LMC_OK;
}
