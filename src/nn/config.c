#include "nn/config.h"

#include <stdlib.h>
#include <string.h>

lmc_status lmc_config_load_text(const char *text, size_t len, const char *what,
                                lmc_model_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    lmc_status st = lmc_json_parse(text, len, what, &cfg->json);
    if (st == LMC_OK && !json_is_object(cfg->json))
        st = lmc_error(LMC_ERR_FORMAT, "%s: not a JSON object", what);
    if (st == LMC_OK) {
        cfg->model_type = lmc_json_string(cfg->json, "model_type", NULL, NULL);
        if (!cfg->model_type) st = lmc_error(LMC_ERR_FORMAT, "%s: no string 'model_type'", what);
    }
    if (st != LMC_OK) lmc_config_free(cfg);
    return st;
}

lmc_status lmc_config_load(const char *dir, lmc_model_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    char *path = lmc_path_join(dir, "config.json");
    if (!path) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    char *text = NULL;
    size_t len = 0;
    lmc_status st = lmc_read_file(path, &text, &len);
    if (st == LMC_OK) st = lmc_config_load_text(text, len, path, cfg);
    free(text);
    if (st == LMC_OK) {
        cfg->path = path;
        path = NULL;
        /* generation_config.json is optional; a broken one is ignored as
         * transformers ignores it when it cannot be parsed. */
        char *gen = lmc_path_join(dir, "generation_config.json");
        json_t *g = NULL;
        if (gen && lmc_file_exists(gen) && lmc_json_load_file(gen, &g) == LMC_OK &&
            json_is_object(g))
            cfg->gen_json = g;
        else if (g)
            json_decref(g);
        free(gen);
        lmc_clear_error();
    }
    free(path);
    if (st != LMC_OK) lmc_config_free(cfg);
    return st;
}

lmc_status lmc_config_use_text_config(lmc_model_config *cfg, const char *what) {
    json_t *top = cfg->json;
    json_t *text = json_object_get(top, "text_config");
    if (!json_is_object(text))
        return lmc_error(LMC_ERR_FORMAT,
                         "%s: a vision-language config needs a 'text_config' object", what);
    json_t *copy = json_deep_copy(text);
    if (!copy) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    static const char *const inherited[] = {"quantization", "quantization_config", "eos_token_id",
                                            "bos_token_id", "tie_word_embeddings"};
    for (size_t i = 0; i < sizeof inherited / sizeof inherited[0]; i++) {
        json_t *v = json_object_get(top, inherited[i]);
        if (v && !json_object_get(copy, inherited[i])) json_object_set(copy, inherited[i], v);
    }
    /* the top level's quantization always wins: mlx-vlm writes it there */
    json_t *q = json_object_get(top, "quantization");
    if (q) json_object_set(copy, "quantization", q);
    cfg->vlm_json = top;
    cfg->json = copy;
    return LMC_OK;
}

void lmc_config_free(lmc_model_config *cfg) {
    if (cfg->vlm_json) json_decref(cfg->vlm_json);
    if (cfg->json) json_decref(cfg->json);
    if (cfg->gen_json) json_decref(cfg->gen_json);
    free(cfg->path);
    memset(cfg, 0, sizeof *cfg);
}

/* Typed lookups that remember the first key holding the wrong JSON type, so
 * the error can name it. */
typedef struct field_check {
    const char *key, *want;
} field_check;

static void note_bad(field_check *fc, bool bad, const char *key, const char *want) {
    if (bad && !fc->key) {
        fc->key = key;
        fc->want = want;
    }
}

static int64_t get_int(const json_t *obj, const char *key, int64_t def, field_check *fc) {
    bool bad = false;
    int64_t v = lmc_json_int(obj, key, def, &bad);
    note_bad(fc, bad, key, "an integer");
    return v;
}

static double get_number(const json_t *obj, const char *key, double def, field_check *fc) {
    bool bad = false;
    double v = lmc_json_number(obj, key, def, &bad);
    note_bad(fc, bad, key, "a number");
    return v;
}

static bool get_bool(const json_t *obj, const char *key, bool def, field_check *fc) {
    bool bad = false;
    bool v = lmc_json_bool(obj, key, def, &bad);
    note_bad(fc, bad, key, "a boolean");
    return v;
}

static const char *get_string(const json_t *obj, const char *key, const char *def,
                              field_check *fc) {
    bool bad = false;
    const char *v = lmc_json_string(obj, key, def, &bad);
    note_bad(fc, bad, key, "a string");
    return v;
}

static lmc_status wrong_type(const char *what, const field_check *fc) {
    return lmc_error(LMC_ERR_FORMAT, "%s: '%s' must be %s", what, fc->key, fc->want);
}

static lmc_status parse_rope(lmc_model_config *cfg, const char *what) {
    const json_t *j = cfg->json;
    lmc_rope_config *r = &cfg->rope;
    /* transformers 5 writes rope_parameters (with rope_theta inside);
     * earlier versions rope_theta and rope_scaling at the top level. */
    const json_t *params = json_object_get(j, "rope_parameters");
    if (!json_is_object(params)) params = json_object_get(j, "rope_scaling");
    if (!json_is_object(params)) params = NULL;
    field_check fc = {0};
    r->params = params;
    r->theta = get_number(j, "rope_theta", 10000.0, &fc);
    r->theta = get_number(params, "rope_theta", r->theta, &fc);
    r->partial_rotary_factor = get_number(j, "partial_rotary_factor", 1.0, &fc);
    r->partial_rotary_factor =
        get_number(params, "partial_rotary_factor", r->partial_rotary_factor, &fc);
    r->factor = get_number(params, "factor", 1.0, &fc);
    r->low_freq_factor = get_number(params, "low_freq_factor", 1.0, &fc);
    r->high_freq_factor = get_number(params, "high_freq_factor", 4.0, &fc);
    r->original_max_position_embeddings =
        get_int(params, "original_max_position_embeddings", 0, &fc);
    if (!r->original_max_position_embeddings)
        r->original_max_position_embeddings =
            get_int(j, "original_max_position_embeddings", 0, &fc);
    const char *type = get_string(params, "rope_type", NULL, &fc);
    if (!type) type = get_string(params, "type", "default", &fc);
    if (fc.key) return wrong_type(what, &fc);
    /* Values the rope code divides by or sizes buffers with. */
    if (!(r->theta > 0) || !(r->factor > 0))
        return lmc_error(LMC_ERR_FORMAT,
                         "%s: rope_theta (%g) and rope factor (%g) must be positive", what,
                         r->theta, r->factor);
    if (!(r->partial_rotary_factor > 0 && r->partial_rotary_factor <= 1))
        return lmc_error(LMC_ERR_FORMAT, "%s: partial_rotary_factor = %g is not in (0, 1]", what,
                         r->partial_rotary_factor);
    if (r->original_max_position_embeddings < 0)
        return lmc_error(LMC_ERR_FORMAT, "%s: original_max_position_embeddings = %lld is negative",
                         what, (long long)r->original_max_position_embeddings);
    /* transformers' standardize_rope_params: for longrope a top-level
     * original_max_position_embeddings (Phi-3) takes priority. */
    if ((!strcmp(type, "longrope") || !strcmp(type, "su")) &&
        json_is_integer(json_object_get(j, "original_max_position_embeddings")))
        r->original_max_position_embeddings =
            lmc_json_int(j, "original_max_position_embeddings", 0, NULL);
    static const struct {
        const char *name;
        lmc_rope_type type;
    } types[] = {{"default", LMC_ROPE_DEFAULT},   {"linear", LMC_ROPE_LINEAR},
                 {"llama3", LMC_ROPE_LLAMA3},     {"dynamic", LMC_ROPE_DYNAMIC},
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

static void add_eos(lmc_model_config *cfg, int32_t id) {
    for (int i = 0; i < cfg->n_eos; i++)
        if (cfg->eos_token_ids[i] == id) return;
    if (cfg->n_eos < LMC_MAX_EOS) cfg->eos_token_ids[cfg->n_eos++] = id;
}

/* eos_token_id: an int or a list; returns whether the key held any. */
static bool read_eos(lmc_model_config *cfg, const json_t *j) {
    const json_t *e = json_object_get(j, "eos_token_id");
    if (json_is_integer(e)) {
        json_int_t id = json_integer_value(e);
        if (id >= 0 && id <= INT32_MAX) add_eos(cfg, (int32_t)id);
        return true;
    }
    if (!json_is_array(e)) return false;
    size_t i;
    json_t *v;
    json_array_foreach(e, i, v) {
        if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= INT32_MAX)
            add_eos(cfg, (int32_t)json_integer_value(v));
    }
    return json_array_size(e) > 0;
}

/* The stop ids: config.json's, plus generation_config.json's (instruct
 * models list their end-of-turn tokens there), as mlx-lm and transformers'
 * generate use them. */
static void parse_eos(lmc_model_config *cfg, const json_t *j, int32_t def) {
    cfg->n_eos = 0;
    bool any = read_eos(cfg, j);
    if (cfg->gen_json) any = read_eos(cfg, cfg->gen_json) || any;
    if (!any && def >= 0) add_eos(cfg, def);
}

lmc_status lmc_config_parse(lmc_model_config *cfg, const char *what, const lmc_config_defaults *d) {
    const json_t *j = cfg->json;
    field_check fc = {0};
#define INT(field, key, def) cfg->field = get_int(j, key, def, &fc)
    INT(vocab_size, "vocab_size", 32000);
    INT(hidden_size, "hidden_size", 4096);
    INT(intermediate_size, "intermediate_size", 11008);
    INT(num_hidden_layers, "num_hidden_layers", 32);
    INT(num_attention_heads, "num_attention_heads", 32);
    INT(num_key_value_heads, "num_key_value_heads", cfg->num_attention_heads);
    INT(max_position_embeddings, "max_position_embeddings", d->max_position_embeddings);
    INT(sliding_window, "sliding_window", d->sliding_window);
#undef INT
    if (fc.key) return wrong_type(what, &fc);
    if (cfg->num_attention_heads <= 0 || cfg->num_attention_heads > (1 << 24))
        return lmc_error(LMC_ERR_FORMAT, "%s: num_attention_heads = %lld is out of range", what,
                         (long long)cfg->num_attention_heads);
    cfg->head_dim = get_int(j, "head_dim", cfg->hidden_size / cfg->num_attention_heads, &fc);
    cfg->rms_norm_eps = get_number(j, "rms_norm_eps", d->rms_norm_eps, &fc);
    cfg->tie_word_embeddings = get_bool(j, "tie_word_embeddings", d->tie_word_embeddings, &fc);
    cfg->attention_bias = get_bool(j, "attention_bias", false, &fc);
    cfg->mlp_bias = get_bool(j, "mlp_bias", false, &fc);
    cfg->hidden_act = get_string(j, "hidden_act", "silu", &fc);
    int64_t bos = get_int(j, "bos_token_id", d->bos_token_id, &fc);
    if (fc.key) return wrong_type(what, &fc);
    cfg->bos_token_id = bos >= 0 && bos <= INT32_MAX ? (int32_t)bos : -1;
    if (cfg->sliding_window < 0) cfg->sliding_window = 0;
    parse_eos(cfg, j, d->eos_token_id);
    const int64_t sizes[] = {cfg->vocab_size,          cfg->hidden_size,
                             cfg->intermediate_size,   cfg->num_hidden_layers,
                             cfg->num_key_value_heads, cfg->head_dim};
    const char *names[] = {"vocab_size",        "hidden_size",         "intermediate_size",
                           "num_hidden_layers", "num_key_value_heads", "head_dim"};
    for (int i = 0; i < 6; i++)
        if (sizes[i] <= 0 || sizes[i] > (1 << 24))
            return lmc_error(LMC_ERR_FORMAT, "%s: %s = %lld is out of range", what, names[i],
                             (long long)sizes[i]);
    /* The public API reports it (and sizes sessions by it) as int32. */
    if (cfg->max_position_embeddings <= 0 || cfg->max_position_embeddings > INT32_MAX)
        return lmc_error(LMC_ERR_FORMAT, "%s: max_position_embeddings = %lld is out of range", what,
                         (long long)cfg->max_position_embeddings);
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
