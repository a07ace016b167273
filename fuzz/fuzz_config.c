/* libFuzzer target: config.json parsing over arbitrary text. Whatever
 * parses is also turned into rope frequencies, as a model load would. */
#include "models/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lmc_model_config cfg;
    if (lmc_config_load_text((const char *)data, size, "fuzz/config.json", &cfg) != LMC_OK) {
        if (!lmc_last_error()[0] || cfg.json) __builtin_trap();
        return 0;
    }
    const lmc_arch *arch = lmc_arch_find(cfg.model_type);
    if (!arch) arch = lmc_arch_find("llama");
    if (lmc_config_parse(&cfg, "fuzz/config.json", arch->defaults) == LMC_OK) {
        if (cfg.head_dim <= 0 || cfg.num_attention_heads % cfg.num_key_value_heads != 0)
            __builtin_trap();
        lmc_rope rope;
        if (lmc_rope_init(&rope, &cfg.rope, cfg.head_dim, cfg.max_position_embeddings) == LMC_OK) {
            if (rope.rotary_dim < 0 || rope.rotary_dim > rope.head_dim) __builtin_trap();
            lmc_rope_free(&rope);
        }
    } else if (!lmc_last_error()[0]) {
        __builtin_trap();
    }
    lmc_config_free(&cfg);
    return 0;
}
