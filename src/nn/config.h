/* config.json as a typed struct, with transformers' defaults for absent keys.
 * Both spellings are read: classic (rope_theta, rope_scaling) and
 * transformers 5's rope_parameters. */
#ifndef LMC_CONFIG_H
#define LMC_CONFIG_H

#include "base/json.h"

#define LMC_MAX_EOS 8

typedef enum lmc_rope_type {
    LMC_ROPE_DEFAULT = 0,
    LMC_ROPE_LINEAR,
    LMC_ROPE_LLAMA3,
    LMC_ROPE_DYNAMIC,
    LMC_ROPE_LONGROPE,
    LMC_ROPE_YARN,
} lmc_rope_type;

typedef struct lmc_rope_config {
    lmc_rope_type type;
    double theta;
    double factor;
    double low_freq_factor, high_freq_factor;
    int64_t original_max_position_embeddings; /* 0 when absent */
    double partial_rotary_factor;             /* 1.0 = rotate the whole head */
    const json_t *params;                     /* the raw object (borrowed), or NULL */
} lmc_rope_config;

typedef struct lmc_model_config {
    json_t *json;     /* the whole config.json (owned); a VLM's: its text_config (see vlm_json) */
    json_t *vlm_json; /* a VLM's whole config.json (owned), else NULL */
    json_t *gen_json; /* generation_config.json when present (owned), else NULL */
    char *path;       /* config.json's path, for messages (owned; NULL from text) */
    const char *model_type;
    int64_t vocab_size;
    int64_t hidden_size;
    int64_t intermediate_size;
    int64_t num_hidden_layers;
    int64_t num_attention_heads;
    int64_t num_key_value_heads;
    int64_t head_dim;
    int64_t max_position_embeddings;
    double rms_norm_eps;
    bool tie_word_embeddings;
    bool attention_bias;
    bool mlp_bias;
    int64_t sliding_window; /* 0 = none */
    const char *hidden_act;
    lmc_rope_config rope;
    int32_t bos_token_id; /* -1 = none */
    int32_t eos_token_ids[LMC_MAX_EOS];
    int n_eos;
} lmc_model_config;

/* Per-architecture defaults applied where config.json has no value. */
typedef struct lmc_config_defaults {
    double rms_norm_eps;
    int64_t max_position_embeddings;
    bool tie_word_embeddings;
    int64_t sliding_window;
    int32_t bos_token_id, eos_token_id;
} lmc_config_defaults;

/* Reads dir/config.json (and generation_config.json's eos ids). Errors name
 * the file and key. */
lmc_status lmc_config_load(const char *dir, lmc_model_config *cfg);
/* For a vision-language model: cfg->json becomes a copy of its
 * text_config (with the top level's quantization, eos/bos ids and
 * tie_word_embeddings where text_config has none), the whole file moves to
 * cfg->vlm_json; model_type stays the top level's. LMC_ERR_FORMAT when
 * text_config is missing or not an object. */
lmc_status lmc_config_use_text_config(lmc_model_config *cfg, const char *what);
/* Fills the typed fields from cfg->json using the defaults; checks sizes. */
lmc_status lmc_config_parse(lmc_model_config *cfg, const char *what,
                            const lmc_config_defaults *defaults);
void lmc_config_free(lmc_model_config *cfg);
/* Rope settings from one parameters object (e.g. gemma3's
 * rope_parameters["sliding_attention"]), read as lmc_config_parse reads
 * rope_parameters; rope_theta defaults to default_theta. out->params
 * borrows params (owned by cfg->json). */
lmc_status lmc_rope_config_from(const lmc_model_config *cfg, const json_t *params,
                                double default_theta, const char *what, lmc_rope_config *out);
/* config.json's MLX quantization object ("quantization", or an MLX-style
 * "quantization_config"), borrowed; NULL when dense. Other schemes (GPTQ,
 * AWQ, a non-affine mode) are refused with a clear error. */
lmc_status lmc_config_quantization(const lmc_model_config *cfg, const char *what,
                                   const json_t **out);
/* lmc_config_load's parsing step over config.json text in memory (`what`
 * names it in errors): JSON, an object, a string model_type. On failure cfg
 * is left empty. Used by lmc_config_load and the fuzzer. */
lmc_status lmc_config_load_text(const char *text, size_t len, const char *what,
                                lmc_model_config *cfg);

#endif
