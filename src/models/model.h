/* The internal model object and the architecture interface. */
#ifndef LMC_MODEL_H
#define LMC_MODEL_H

#include "nn/config.h"
#include "nn/decoder.h"

typedef struct lmc_arch lmc_arch;

/* What a vision-language model's inputs need (zero for LLMs). */
typedef struct lmc_vision_info {
    int32_t image_token_id;   /* the placeholder token of image positions */
    int32_t tokens_per_image; /* image positions per image */
    int32_t image_size;       /* pixels per side the vision tower takes */
} lmc_vision_info;

struct lmc_model {
    char *dir;
    lmc_model_config cfg;
    lmc_weights weights;
    const lmc_arch *arch;
    void *impl; /* the architecture's weights struct */
    lmc_vision_info vision;
};

/* Images as pixel values: [n, 3, height, width] floats (borrowed). */
typedef struct lmc_pixels {
    const float *data;
    int64_t n, height, width;
} lmc_pixels;

struct lmc_session {
    lmc_model *model;
    lmc_kv_cache kv;
    int64_t max_tokens;
    int32_t max_kv; /* 0, or the rotating size every layer was given */
};

/* Attention sinks a max_kv_size cache keeps (mlx-lm's keep=4). */
#define LMC_KV_SINKS 4
/* Empties the session and lays its cache out for max_kv (0 = the model's
 * own layout); LMC_ERR_UNSUPPORTED for models with sliding-window layers or
 * longrope. */
lmc_status lmc_session_set_max_kv(lmc_session *s, int32_t max_kv);

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
    /* VLMs (NULL for LLMs): a forward whose image-token positions take the
     * images' features, in order, with the whole batch as a bidirectional
     * prefix. */
    lmc_status (*forward_images)(lmc_model *m, lmc_kv_cache *kv, const int32_t *tokens, int64_t T,
                                 const lmc_pixels *images, bool all_positions, float *logits);
    /* config.json nests the language model's settings in text_config */
    bool text_config;
};

/* lmc_session_forward with images (lmc_arch.forward_images): tokens[0..n)
 * in one batch. LMC_ERR_INVALID_ARG when the model is not a VLM or the
 * image tokens and images do not match. */
lmc_status lmc_session_forward_images(lmc_session *s, const int32_t *tokens, int32_t n,
                                      const lmc_pixels *images, bool all_positions, float *logits);

/* The shared decoder's hooks (models/decoder_model.c), for architectures
 * whose load puts an lmc_decoder in m->impl: end the table entry with
 *   const lmc_arch lmc_arch_x = {"x", &x_defaults, x_load, LMC_DECODER_HOOKS}; */
void lmc_decoder_model_free(lmc_model *m);
lmc_status lmc_decoder_model_forward(lmc_model *m, lmc_kv_cache *kv, const int32_t *tokens,
                                     int64_t T, bool all_positions, float *logits);
const lmc_decoder *lmc_decoder_model_decoder(const lmc_model *m);
#define LMC_DECODER_HOOKS                                                                          \
    .free = lmc_decoder_model_free, .forward = lmc_decoder_model_forward,                          \
    .decoder = lmc_decoder_model_decoder

/* LMC_ERR_FORMAT when config.json's layer count (named key) is more than
 * the weights hold (1 + the largest N of the tensors "...layers.N..."):
 * checked before any per-layer allocation. */
lmc_status lmc_model_check_layers(const lmc_model *m, const char *key, int64_t n);

/* Gemma's decoder over cfg and weights w (Llama key names): (1 + w)
 * norms, embeddings x sqrt(hidden), GELU-tanh (models/gemma.c); also
 * PaliGemma's language model. */
lmc_status lmc_gemma_bind(lmc_decoder *d, const lmc_model_config *cfg, const lmc_weights *w);

/* The table mapping model_type to an architecture (models/registry.c). */
const lmc_arch *lmc_arch_find(const char *model_type);
/* "llama, mistral, ..." for error messages. */
const char *lmc_arch_names(void);

/* The MoE expert names of each architecture, one table for loading and
 * convert (models/sanitize.c). Hugging Face checkpoints keep one tensor per
 * expert, <block>.experts.E.<from>; mlx-lm's sanitize() stacks them into
 * the switch_mlp tensors [E, out, in] <block>.switch_mlp.<to>, e.g.
 * mixtral's
 *   model.layers.N.block_sparse_moe.experts.E.w1.weight
 *     -> model.layers.N.block_sparse_moe.switch_mlp.gate_proj.weight.
 * from/to are in the order gate, up, down. */
typedef struct lmc_expert_stacking {
    const char *model_type;
    const char *block;       /* module under model.layers.N holding the experts */
    const char *from[3];     /* per-expert module names: <block>.experts.E.<from> */
    const char *to[3];       /* stacked names: <block>.switch_mlp.<to> */
    int64_t default_experts; /* the count when config.json has none */
} lmc_expert_stacking;

/* NULL when the architecture has no MoE experts. */
const lmc_expert_stacking *lmc_expert_stacking_find(const char *model_type);
/* The number of experts of a config.json: num_experts (hub configs of the
 * Qwen MoEs) or num_local_experts (Mixtral, PhiMoE, and transformers 5's
 * Qwen MoE files), else the architecture's default. */
int64_t lmc_expert_count(const lmc_expert_stacking *s, const json_t *config);
/* The names lmc_moe_bind takes, from the table. */
typedef struct lmc_expert_names {
    const char *stacked[4];    /* {"switch_mlp", gate, up, down} */
    const char *per_expert[3]; /* "experts.%d.<from>" for gate, up, down */
    char buf[3][64];
} lmc_expert_names;
void lmc_expert_names_of(const lmc_expert_stacking *s, lmc_expert_names *out);
/* Whether mlx-lm's sanitize drops the tensor (precomputed rotary inv_freq). */
bool lmc_sanitize_drops(const char *name);
/* tie_word_embeddings of a config.json: its value, else the architecture's
 * default (false for an unknown model_type, so lm_head is kept). When tied,
 * mlx-lm drops lm_head. */
bool lmc_config_tied(const json_t *config);

#endif
