/* A pre-norm transformer decoder assembled from nn blocks. Each model file
 * (src/models) binds its weights by name into this struct and sets the
 * options its architecture needs; the forward pass is shared. */
#ifndef LMC_DECODER_H
#define LMC_DECODER_H

#include "nn/nn.h"

typedef enum lmc_activation {
    LMC_ACT_SILU = 0,
    LMC_ACT_GELU_TANH, /* gelu_pytorch_tanh, gelu_new */
    LMC_ACT_GELU,      /* exact erf GELU */
} lmc_activation;

/* Parses transformers' hidden_act names. */
lmc_status lmc_activation_parse(const char *name, lmc_activation *out);
/* x[i] = act(x[i]) for i < n */
void lmc_activation_apply(lmc_activation act, float *x, int64_t n);

typedef struct lmc_norm {
    const lmc_tensor *weight; /* NULL = absent (the step is skipped) */
    const lmc_tensor *bias;   /* LayerNorm only */
    float offset;             /* gemma's (1 + w) */
    float eps;
    bool layer_norm; /* LayerNorm instead of RMSNorm */
} lmc_norm;

lmc_status lmc_norm_bind(lmc_norm *n, const lmc_weights *w, const char *prefix, int64_t dim,
                         float eps, float offset, bool layer_norm);
void lmc_norm_forward(const lmc_norm *n, const float *x, float *y, int64_t rows, int64_t dim);

typedef struct lmc_mlp {
    lmc_linear gate, up, down;
    bool fused_gate_up; /* gate_up_proj: [gate; up] stacked on the output axis */
    bool gated;         /* false: down(act(up(x))) (starcoder2's c_fc / c_proj) */
    lmc_activation act;
} lmc_mlp;

/* Sparse mixture of experts: a router and per-expert SwiGLU MLPs. The
 * experts' weights are views (into a stacked [E, out, in] tensor, or the
 * per-expert tensors of HF files). */
typedef enum lmc_moe_routing {
    LMC_MOE_SOFTMAX_TOPK = 0, /* softmax over experts, top-k (Mixtral, Qwen MoE) */
    LMC_MOE_SPARSEMIXER,      /* PhiMoE sparsemixer, inference path (top-2) */
} lmc_moe_routing;

typedef struct lmc_moe {
    lmc_linear router;
    lmc_moe_routing routing;
    float jitter_eps; /* sparsemixer: router_jitter_noise */
    int64_t n_experts, top_k;
    bool norm_topk;               /* renormalize the chosen experts' weights (Mixtral) */
    lmc_linear *gate, *up, *down; /* [n_experts] */
    lmc_tensor *views;            /* storage of stacked-layout views (owned) */
    lmc_activation act;
    /* optional shared expert (qwen2_moe) */
    lmc_mlp *shared;
    lmc_linear shared_gate;
} lmc_moe;

void lmc_moe_free(lmc_moe *m);
/* Binds prefix.router and the experts: stacked = {dir, gate, up, down}
 * names (mlx-lm: "switch_mlp", "gate_proj", "up_proj", "down_proj"), or
 * per_expert printf patterns with %d (HF: "experts.%d.w1", "experts.%d.w3",
 * "experts.%d.w2" for gate, up, down). */
lmc_status lmc_moe_bind(lmc_moe *m, const lmc_weights *w, const char *prefix, const char *router,
                        int64_t n_experts, int64_t top_k, int64_t hidden, int64_t inter,
                        const char *const stacked[4], const char *const per_expert[3]);

typedef struct lmc_decoder_layer {
    lmc_norm attn_norm, mlp_norm;
    lmc_norm post_attn_norm, post_mlp_norm; /* gemma2/3 sandwich norms (optional) */
    lmc_linear q, k, v, o;
    lmc_linear qkv; /* fused [q; k; v] projection when fused_qkv */
    bool fused_qkv;
    lmc_norm q_norm, k_norm; /* per-head norms over head_dim (optional) */
    lmc_mlp mlp;
    lmc_moe *moe;           /* replaces mlp when set */
    int64_t sliding_window; /* 0 = global attention */
    const lmc_rope *rope;
    /* per-layer head counts (OpenELM); 0 = the decoder's. The decoder's
     * n_heads / n_kv_heads must then be the maxima over layers. */
    int64_t n_heads, n_kv_heads;
} lmc_decoder_layer;

typedef struct lmc_decoder {
    const lmc_model_config *cfg;
    lmc_embedding embed;
    float embed_scale; /* 1, or sqrt(hidden) for gemma */
    lmc_decoder_layer *layers;
    int64_t n_layers;
    lmc_norm final_norm;
    lmc_linear lm_head;
    bool tied;
    lmc_rope rope, rope_local; /* rope_local: gemma3's sliding layers */
    lmc_attention_params attn; /* shared head geometry and scale */
    float final_softcap;       /* 0 = none */
    int64_t hidden, n_heads, n_kv_heads, head_dim, intermediate, vocab;
} lmc_decoder;

/* Allocates layers and fills the geometry from cfg. */
lmc_status lmc_decoder_init(lmc_decoder *d, const lmc_model_config *cfg);
void lmc_decoder_free(lmc_decoder *d);

/* Binds the HF Llama key layout ("model.layers.N.self_attn.q_proj", ...),
 * norms with offset, attention/MLP biases per cfg, and the head (tied when
 * cfg says so and no lm_head.weight exists). */
lmc_status lmc_decoder_bind_llama_layout(lmc_decoder *d, const lmc_weights *w, float norm_offset,
                                         lmc_activation act, bool qkv_bias, bool o_bias);
/* Applies config.json's layer_types ("sliding_attention" layers get the
 * window) when present, else the window to every layer when all_sliding. */
void lmc_decoder_set_sliding(lmc_decoder *d, int64_t window, bool all_sliding);
/* Binds the embedding, final norm and the head only. */
lmc_status lmc_decoder_bind_ends(lmc_decoder *d, const lmc_weights *w, float norm_offset);

/* Bytes of weights one decode step reads: every layer's projections, the
 * router and top_k of n_experts experts of an MoE layer, the head; one
 * embedding row. */
uint64_t lmc_decoder_bytes_per_token(const lmc_decoder *d);

lmc_status lmc_decoder_forward(lmc_decoder *d, lmc_kv_cache *kv, const int32_t *tokens, int64_t T,
                               bool all_positions, float *logits);
/* What a multimodal input changes in the decoder's forward. */
typedef struct lmc_decoder_inputs {
    /* [T, hidden]: the input embeddings, used as they are (embed_scale is
     * not applied) instead of looking the tokens up; NULL = look up */
    const float *embeds;
    /* > 0: attention is bidirectional among positions < prefix (PaliGemma's
     * prefix-LM over image and prompt), causal after */
    int64_t prefix;
} lmc_decoder_inputs;
/* lmc_decoder_forward with inputs (NULL = none). A prefix needs layers that
 * keep every position (LMC_ERR_UNSUPPORTED otherwise). */
lmc_status lmc_decoder_forward_inputs(lmc_decoder *d, lmc_kv_cache *kv, const int32_t *tokens,
                                      int64_t T, const lmc_decoder_inputs *in, bool all_positions,
                                      float *logits);

/* MoE forward over x [T, hidden] into y [T, hidden]. */
/* y [T, hidden] = the MoE block of x. calls (may be NULL): the caller's
 * [n_experts] counters, incremented by the tokens each expert ran on.
 * Writes nothing in m: several threads may run one model at once. */
lmc_status lmc_moe_forward(const lmc_moe *m, const float *x, int64_t T, int64_t hidden, float *y,
                           int64_t *calls);
lmc_status lmc_mlp_forward(const lmc_mlp *m, const float *x, int64_t T, float *y);

#endif
