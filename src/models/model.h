/* The internal model object and the architecture interface. */
#ifndef LMC_MODEL_H
#define LMC_MODEL_H

#include "nn/config.h"
#include "nn/decoder.h"

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
    /* The model's lmc_decoder, for architectures built on the shared
     * decoder (session setup reads its sliding windows, stats its bytes per
     * token); NULL for an architecture with a forward of its own. */
    const lmc_decoder *(*decoder)(const lmc_model *m);
};

/* The shared decoder's hooks (models/decoder_model.c), for architectures
 * whose load puts an lmc_decoder in m->impl: end the table entry with
 *   const lmc_arch lmc_arch_x = {"x", &x_defaults, x_load, LMC_DECODER_HOOKS}; */
void lmc_decoder_model_free(lmc_model *m);
lmc_status lmc_decoder_model_forward(lmc_model *m, lmc_kv_cache *kv, const int32_t *tokens,
                                     int64_t T, bool all_positions, float *logits);
const lmc_decoder *lmc_decoder_model_decoder(const lmc_model *m);
#define LMC_DECODER_HOOKS                                                                     \
    .free = lmc_decoder_model_free, .forward = lmc_decoder_model_forward,                     \
    .decoder = lmc_decoder_model_decoder

/* The table mapping model_type to an architecture (models/registry.c). */
const lmc_arch *lmc_arch_find(const char *model_type);
/* "llama, mistral, ..." for error messages. */
const char *lmc_arch_names(void);

/* mlx-lm's sanitize() as convert needs it, one table for all architectures
 * (models/sanitize.c): how per-expert MoE weights of a Hugging Face
 * checkpoint are stacked into the switch_mlp tensors [E, out, in] that
 * mlx-lm writes, e.g. mixtral's
 *   model.layers.N.block_sparse_moe.experts.E.w1.weight
 *     -> model.layers.N.block_sparse_moe.switch_mlp.gate_proj.weight. */
typedef struct lmc_expert_stacking {
    const char *model_type;
    const char *block;     /* module under model.layers.N holding the experts */
    const char *count_key; /* config.json key with the number of experts */
    const char *from[3];   /* per-expert module names: <block>.experts.E.<from> */
    const char *to[3];     /* stacked names: <block>.switch_mlp.<to> */
} lmc_expert_stacking;

/* NULL when the architecture has no per-expert layout to stack. */
const lmc_expert_stacking *lmc_expert_stacking_find(const char *model_type);
/* Whether mlx-lm's sanitize drops the tensor (precomputed rotary inv_freq). */
bool lmc_sanitize_drops(const char *name);
/* tie_word_embeddings of a config.json: its value, else the architecture's
 * default (false for an unknown model_type, so lm_head is kept). When tied,
 * mlx-lm drops lm_head. */
bool lmc_config_tied(const json_t *config);

#endif
