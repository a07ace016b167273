/* Key-name knowledge convert needs per architecture, in one table: which
 * MoE checkpoints store experts one by one (mlx-lm models/<arch>.py
 * sanitize() stacks them), plus the generic rules (rotary buffers, tied
 * heads). Binding at load time lives in each model file. */
#include "models/model.h"

#include <stdio.h>
#include <string.h>

static const lmc_expert_stacking stacking[] = {
    /* mlx_lm/models/mixtral.py and phimoe.py: w1 -> gate_proj, w2 -> down_proj, w3 -> up_proj */
    {"mixtral", "block_sparse_moe", {"w1", "w3", "w2"}, {"gate_proj", "up_proj", "down_proj"}, 8},
    {"phimoe", "block_sparse_moe", {"w1", "w3", "w2"}, {"gate_proj", "up_proj", "down_proj"}, 16},
    /* mlx_lm/models/qwen2_moe.py, qwen3_moe.py: names kept */
    {"qwen2_moe",
     "mlp",
     {"gate_proj", "up_proj", "down_proj"},
     {"gate_proj", "up_proj", "down_proj"},
     60},
    {"qwen3_moe",
     "mlp",
     {"gate_proj", "up_proj", "down_proj"},
     {"gate_proj", "up_proj", "down_proj"},
     128},
};

const lmc_expert_stacking *lmc_expert_stacking_find(const char *model_type) {
    if (!model_type) return NULL;
    for (size_t i = 0; i < sizeof stacking / sizeof stacking[0]; i++)
        if (!strcmp(stacking[i].model_type, model_type)) return &stacking[i];
    return NULL;
}

int64_t lmc_expert_count(const lmc_expert_stacking *s, const json_t *config) {
    int64_t n = lmc_json_int(config, "num_local_experts", s->default_experts, NULL);
    return lmc_json_int(config, "num_experts", n, NULL);
}

void lmc_expert_names_of(const lmc_expert_stacking *s, lmc_expert_names *out) {
    out->stacked[0] = "switch_mlp";
    for (int i = 0; i < 3; i++) {
        out->stacked[i + 1] = s->to[i];
        snprintf(out->buf[i], sizeof out->buf[i], "experts.%%d.%s", s->from[i]);
        out->per_expert[i] = out->buf[i];
    }
}

bool lmc_sanitize_drops(const char *name) {
    return strstr(name, "rotary_emb.inv_freq") != NULL;
}

bool lmc_config_tied(const json_t *config) {
    const json_t *v = json_object_get(config, "tie_word_embeddings");
    if (json_is_boolean(v)) return json_is_true(v);
    const json_t *text = json_object_get(config, "text_config");
    v = json_object_get(text, "tie_word_embeddings");
    if (json_is_boolean(v)) return json_is_true(v);
    const lmc_arch *arch = lmc_arch_find(lmc_json_string(config, "model_type", "", NULL));
    return arch && arch->defaults && arch->defaults->tie_word_embeddings;
}
