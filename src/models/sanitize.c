/* Key-name knowledge convert needs per architecture, in one table: which
 * MoE checkpoints store experts one by one (mlx-lm models/<arch>.py
 * sanitize() stacks them), plus the generic rules (rotary buffers, tied
 * heads). Binding at load time lives in each model file. */
#include "models/model.h"

#include <string.h>

static const lmc_expert_stacking stacking[] = {
    /* mlx_lm/models/mixtral.py: w1 -> gate_proj, w2 -> down_proj, w3 -> up_proj */
    {"mixtral",
     "block_sparse_moe",
     "num_local_experts",
     {"w1", "w3", "w2"},
     {"gate_proj", "up_proj", "down_proj"}},
    /* mlx_lm/models/qwen2_moe.py, qwen3_moe.py: names kept */
    {"qwen2_moe",
     "mlp",
     "num_experts",
     {"gate_proj", "up_proj", "down_proj"},
     {"gate_proj", "up_proj", "down_proj"}},
    {"qwen3_moe",
     "mlp",
     "num_experts",
     {"gate_proj", "up_proj", "down_proj"},
     {"gate_proj", "up_proj", "down_proj"}},
};

const lmc_expert_stacking *lmc_expert_stacking_find(const char *model_type) {
    if (!model_type) return NULL;
    for (size_t i = 0; i < sizeof stacking / sizeof stacking[0]; i++)
        if (!strcmp(stacking[i].model_type, model_type)) return &stacking[i];
    return NULL;
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
