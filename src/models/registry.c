/* model_type -> architecture. Add a line here for each src/models file. */
#include "models/model.h"

#include <string.h>

extern const lmc_arch lmc_arch_llama, lmc_arch_mistral, lmc_arch_qwen2, lmc_arch_gemma,
    lmc_arch_phi3, lmc_arch_mixtral;
extern const lmc_arch lmc_arch_phimoe, lmc_arch_qwen2_moe, lmc_arch_qwen3_moe, lmc_arch_openelm;
extern const lmc_arch lmc_arch_qwen3, lmc_arch_gemma2, lmc_arch_gemma3_text, lmc_arch_starcoder2;
extern const lmc_arch lmc_arch_paligemma;

static const lmc_arch *const archs[] = {
    &lmc_arch_llama,       &lmc_arch_mistral,    &lmc_arch_qwen2,    &lmc_arch_gemma,
    &lmc_arch_phi3,        &lmc_arch_mixtral,    &lmc_arch_phimoe,   &lmc_arch_qwen2_moe,
    &lmc_arch_qwen3_moe,   &lmc_arch_openelm,    &lmc_arch_qwen3,    &lmc_arch_gemma2,
    &lmc_arch_gemma3_text, &lmc_arch_starcoder2, &lmc_arch_paligemma};

const lmc_arch *lmc_arch_find(const char *model_type) {
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (!strcmp(archs[i]->model_type, model_type)) return archs[i];
    return NULL;
}

const char *lmc_arch_names(void) {
    static char names[512];
    if (!names[0]) {
        size_t off = 0;
        for (size_t i = 0; i < sizeof archs / sizeof archs[0] && off < sizeof names; i++) {
            size_t n = strlen(archs[i]->model_type);
            if (off + n + 3 >= sizeof names) break;
            if (i) {
                memcpy(names + off, ", ", 2);
                off += 2;
            }
            memcpy(names + off, archs[i]->model_type, n);
            off += n;
        }
        names[off] = '\0';
    }
    return names;
}
