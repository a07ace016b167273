#include "models/config.h"

#include <string.h>

lmc_status lmc_config_load(const char *dir, lmc_model_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    char *path = lmc_path_join(dir, "config.json");
    if (!path) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    lmc_status st = lmc_json_load_file(path, &cfg->json);
    if (st == LMC_OK && !json_is_object(cfg->json))
        st = lmc_error(LMC_ERR_FORMAT, "%s: not a JSON object", path);
    if (st == LMC_OK) {
        cfg->model_type = lmc_json_string(cfg->json, "model_type", NULL, NULL);
        if (!cfg->model_type)
            st = lmc_error(LMC_ERR_FORMAT, "%s: no string 'model_type'", path);
    }
    free(path);
    if (st != LMC_OK) lmc_config_free(cfg);
    return st;
}

void lmc_config_free(lmc_model_config *cfg) {
    if (cfg->json) json_decref(cfg->json);
    memset(cfg, 0, sizeof *cfg);
}

static lmc_status parse_rope(lmc_model_config *cfg, const char *what) {
    const json_t *j = cfg->json;
    lmc_rope_config *r = &cfg->rope;
    /* transformers 5 writes rope_parameters (with rope_theta inside);
     * earlier versions rope_theta and rope_scaling at the top level. */
    const json_t *params = json_object_get(j, "rope_parameters");
    if (!json_is_object(params)) params = json_object_get(j, "rope_scaling");
    if (!json_is_object(params)) params = NULL;
    bool bad = false;
    r->params = params;
    r->theta = lmc_json_number(j, "rope_theta", 10000.0, &bad);
    r->theta = lmc_json_number(params, "rope_theta", r->theta, &bad);
    r->partial_rotary_factor = lmc_json_number(j, "partial_rotary_factor", 1.0, &bad);
    r->partial_rotary_factor =
        lmc_json_number(params, "partial_rotary_factor", r->partial_rotary_factor, &bad);
    r->factor = lmc_json_number(params, "factor", 1.0, &bad);
    r->low_freq_factor = lmc_json_number(params, "low_freq_factor", 1.0, &bad);
    r->high_freq_factor = lmc_json_number(params, "high_freq_factor", 4.0, &bad);
    r->original_max_position_embeddings =
        lmc_json_int(params, "original_max_position_embeddings", 0, &bad);
    if (!r->original_max_position_embeddings)
        r->original_max_position_embeddings =
            lmc_json_int(j, "original_max_position_embeddings", 0, &bad);
    if (bad) return lmc_error(LMC_ERR_FORMAT, "%s: rope parameters of the wrong type", what);
    const char *type = lmc_json_string(params, "rope_type", NULL, NULL);
    if (!type) type = lmc_json_string(params, "type", "default", NULL);
    static const struct {
        const char *name;
        lmc_rope_type type;
    } types[] = {{"default", LMC_ROPE_DEFAULT}, {"linear", LMC_ROPE_LINEAR},
                 {"llama3", LMC_ROPE_LLAMA3},   {"dynamic", LMC_ROPE_DYNAMIC},
                 {"longrope", LMC_ROPE_LONGROPE}, {"su", LMC_ROPE_LONGROPE},
                 {"yarn", LMC_ROPE_YARN}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(type, types[i].name)) {
            r->type = types[i].type;
            return LMC_OK;
        }
    return lmc_error(LMC_ERR_UNSUPPORTED,
                     "%s: rope type '%s' is not supported (default, linear, llama3, dynamic, "
                     "longrope, su, yarn)",
                     what, type);
}

static void parse_eos(lmc_model_config *cfg, const json_t *j, int32_t def) {
    const json_t *e = json_object_get(j, "eos_token_id");
    cfg->n_eos = 0;
    if (json_is_integer(e)) {
        cfg->eos_token_ids[cfg->n_eos++] = (int32_t)json_integer_value(e);
    } else if (json_is_array(e)) {
        size_t i;
        json_t *v;
        json_array_foreach(e, i, v) {
            if (json_is_integer(v) && cfg->n_eos < LMC_MAX_EOS)
                cfg->eos_token_ids[cfg->n_eos++] = (int32_t)json_integer_value(v);
        }
    } else if (def >= 0) {
        cfg->eos_token_ids[cfg->n_eos++] = def;
    }
}

lmc_status lmc_config_parse(lmc_model_config *cfg, const char *what,
                            const lmc_config_defaults *d) {
    const json_t *j = cfg->json;
    bool bad = false;
#define INT(field, key, def) cfg->field = lmc_json_int(j, key, def, &bad)
    INT(vocab_size, "vocab_size", 32000);
    INT(hidden_size, "hidden_size", 4096);
    INT(intermediate_size, "intermediate_size", 11008);
    INT(num_hidden_layers, "num_hidden_layers", 32);
    INT(num_attention_heads, "num_attention_heads", 32);
    INT(num_key_value_heads, "num_key_value_heads", cfg->num_attention_heads);
    INT(max_position_embeddings, "max_position_embeddings", d->max_position_embeddings);
    INT(sliding_window, "sliding_window", d->sliding_window);
#undef INT
    if (bad) return lmc_error(LMC_ERR_FORMAT, "%s: a size field is not an integer", what);
    if (cfg->num_attention_heads <= 0)
        return lmc_error(LMC_ERR_FORMAT, "%s: num_attention_heads must be positive", what);
    cfg->head_dim =
        lmc_json_int(j, "head_dim", cfg->hidden_size / cfg->num_attention_heads, &bad);
    cfg->rms_norm_eps = lmc_json_number(j, "rms_norm_eps", d->rms_norm_eps, &bad);
    cfg->tie_word_embeddings = lmc_json_bool(j, "tie_word_embeddings", d->tie_word_embeddings, &bad);
    cfg->attention_bias = lmc_json_bool(j, "attention_bias", false, &bad);
    cfg->mlp_bias = lmc_json_bool(j, "mlp_bias", false, &bad);
    cfg->hidden_act = lmc_json_string(j, "hidden_act", "silu", &bad);
    cfg->bos_token_id = (int32_t)lmc_json_int(j, "bos_token_id", d->bos_token_id, &bad);
    if (bad) return lmc_error(LMC_ERR_FORMAT, "%s: a field has the wrong JSON type", what);
    if (cfg->sliding_window < 0) cfg->sliding_window = 0;
    parse_eos(cfg, j, d->eos_token_id);
    const int64_t sizes[] = {cfg->vocab_size, cfg->hidden_size, cfg->intermediate_size,
                             cfg->num_hidden_layers, cfg->num_key_value_heads, cfg->head_dim};
    const char *names[] = {"vocab_size", "hidden_size", "intermediate_size",
                           "num_hidden_layers", "num_key_value_heads", "head_dim"};
    for (int i = 0; i < 6; i++)
        if (sizes[i] <= 0 || sizes[i] > (1 << 24))
            return lmc_error(LMC_ERR_FORMAT, "%s: %s = %lld is out of range", what, names[i],
                             (long long)sizes[i]);
    if (cfg->num_attention_heads % cfg->num_key_value_heads != 0)
        return lmc_error(LMC_ERR_FORMAT,
                         "%s: num_attention_heads (%lld) is not a multiple of "
                         "num_key_value_heads (%lld)",
                         what, (long long)cfg->num_attention_heads,
                         (long long)cfg->num_key_value_heads);
    return parse_rope(cfg, what);
}

lmc_status lmc_config_quantization(const lmc_model_config *cfg, const char *what,
                                   const json_t **out) {
    *out = NULL;
    const json_t *q = json_object_get(cfg->json, "quantization");
    if (!json_is_object(q)) {
        q = json_object_get(cfg->json, "quantization_config");
        if (!json_is_object(q)) return LMC_OK;
        const char *method = lmc_json_string(q, "quant_method", NULL, NULL);
        if (method)
            return lmc_error(LMC_ERR_UNSUPPORTED,
                             "%s: quantization_config quant_method '%s' is not supported (MLX "
                             "affine quantization is)",
                             what, method);
    }
    const char *mode = lmc_json_string(q, "mode", "affine", NULL);
    if (strcmp(mode, "affine") != 0)
        return lmc_error(LMC_ERR_UNSUPPORTED,
                         "%s: quantization mode '%s' is not supported (affine is)", what, mode);
    *out = q;
    return LMC_OK;
}

lmc_status lmc_rope_config_from(const lmc_model_config *cfg, const json_t *params,
                                double default_theta, const char *what, lmc_rope_config *out) {
    /* parse_rope over a stand-in config holding only these parameters and
     * the top-level keys they may fall back to. */
    lmc_model_config tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.json = json_object();
    if (!tmp.json) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    static const char *const inherited[] = {"partial_rotary_factor",
                                            "original_max_position_embeddings"};
    for (size_t i = 0; i < sizeof inherited / sizeof inherited[0]; i++) {
        json_t *v = json_object_get(cfg->json, inherited[i]);
        if (v) json_object_set(tmp.json, inherited[i], v);
    }
    json_object_set_new(tmp.json, "rope_theta", json_real(default_theta));
    if (json_is_object(params)) json_object_set(tmp.json, "rope_parameters", (json_t *)params);
    lmc_status st = parse_rope(&tmp, what);
    *out = tmp.rope;
    out->params = json_is_object(params) ? params : NULL;
    json_decref(tmp.json);
    return st;
}
