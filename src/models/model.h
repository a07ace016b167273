/* The internal model object and the architecture interface. */
#ifndef LMC_MODEL_H
#define LMC_MODEL_H

#include "models/config.h"
#include "nn/nn.h"

typedef struct lmc_arch lmc_arch;

struct lmc_model {
    char *dir;
    lmc_model_config cfg;
    lmc_weights weights;
    const lmc_arch *arch;
    void *impl; /* the architecture's weights struct */
};

struct lmc_session {
    lmc_model *model;
    lmc_kv_cache kv;
    int64_t max_tokens;
};

/* One forward pass: tokens[0..T) at positions kv->length.., appended to the
 * cache. logits (may be NULL): all_positions ? [T, V] : [V] for the last. */
typedef lmc_status (*lmc_forward_fn)(lmc_model *m, lmc_kv_cache *kv, const int32_t *tokens,
                                     int64_t T, bool all_positions, float *logits);

struct lmc_arch {
    const char *model_type;
    const lmc_config_defaults *defaults;
    /* Binds weights into m->impl (cfg and weights are loaded). */
    lmc_status (*load)(lmc_model *m);
    void (*free)(lmc_model *m);
    lmc_forward_fn forward;
};

/* free and forward for architectures whose impl is an lmc_decoder. */
void lmc_decoder_model_free(lmc_model *m);
lmc_status lmc_decoder_model_forward(lmc_model *m, lmc_kv_cache *kv, const int32_t *tokens,
                                     int64_t T, bool all_positions, float *logits);

/* The table mapping model_type to an architecture (models/registry.c). */
const lmc_arch *lmc_arch_find(const char *model_type);
/* "llama, mistral, ..." for error messages. */
const char *lmc_arch_names(void);

#endif
