/* The public model and session functions over the architecture table. */
#include "models/model.h"
#include "nn/decoder.h"

#include <stdlib.h>
#include <string.h>

/* The number of decoder layers the weights hold: 1 + the largest N of a
 * tensor named "...layers.N....". Checked against config.json before any
 * per-layer allocation, so a config's numbers cannot ask for more memory
 * than the weights' metadata describes. */
static int64_t layers_in_weights(const lmc_weights *w);

lmc_status lmc_model_check_layers(const lmc_model *m, const char *key, int64_t n) {
    int64_t held = layers_in_weights(&m->weights);
    if (n <= held || n <= 1) return LMC_OK; /* one layer: let the missing tensor be named */
    return lmc_error(LMC_ERR_FORMAT,
                     "%s/config.json: %s is %lld but the weights in %s hold %lld layer%s", m->dir,
                     key, (long long)n, m->dir, (long long)held, held == 1 ? "" : "s");
}

static int64_t layers_in_weights(const lmc_weights *w) {
    int64_t most = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        for (const char *p = strstr(w->index[i]->name, "layers."); p;
             p = strstr(p + 1, "layers.")) {
            const char *d = p + 7;
            int64_t v = 0;
            int digits = 0;
            while (*d >= '0' && *d <= '9' && digits < 12) v = v * 10 + (*d++ - '0'), digits++;
            if (digits && (*d == '.' || !*d) && v + 1 > most) most = v + 1;
        }
    }
    return most;
}

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
    if (m->arch->text_config && (st = lmc_config_use_text_config(&m->cfg, cfg_path)) != LMC_OK)
        goto fail;
    if ((st = lmc_config_parse(&m->cfg, cfg_path, m->arch->defaults)) != LMC_OK) goto fail;
    if ((st = lmc_weights_open(dir, &m->weights)) != LMC_OK) goto fail;
    /* OpenELM counts its layers under another name and checks them itself */
    if (strcmp(m->arch->model_type, "openelm") != 0 &&
        (st = lmc_model_check_layers(m, "num_hidden_layers", m->cfg.num_hidden_layers)) != LMC_OK)
        goto fail;
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
    if (!info) return;
    memset(info, 0, sizeof *info);
    if (!m) return;
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
    info->image_token_id = m->vision.tokens_per_image ? m->vision.image_token_id : -1;
    info->image_tokens = m->vision.tokens_per_image;
    info->image_size = m->vision.image_size;
}
