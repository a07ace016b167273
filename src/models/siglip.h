/* The SigLIP vision tower (transformers' SiglipVisionTransformer without the
 * pooling head, as PaliGemma uses it): patch-embedding convolution, learned
 * position embeddings, pre-norm encoder layers (LayerNorm, full
 * self-attention, GELU-tanh MLP), post-layernorm. Every matmul runs over all
 * patches at once. */
#ifndef LMC_SIGLIP_H
#define LMC_SIGLIP_H

#include "nn/decoder.h"

typedef struct lmc_siglip_layer {
    lmc_norm ln1, ln2;
    lmc_linear q, k, v, o, fc1, fc2;
} lmc_siglip_layer;

typedef struct lmc_siglip {
    int64_t hidden, intermediate, n_layers, n_heads, head_dim;
    int64_t patch, image_size, channels, grid, n_patches; /* grid = image_size / patch */
    float eps;
    lmc_activation act;
    /* the convolution as a matrix [hidden, channels * patch * patch] over
     * the file's tensor: Hugging Face's [out, in, kh, kw] (a patch read
     * channel, row, column) or mlx's [out, kh, kw, in] (row, column, channel) */
    lmc_tensor patch_w;
    bool channels_last;
    const lmc_tensor *patch_b;
    lmc_embedding pos; /* [n_patches, hidden] */
    lmc_siglip_layer *layers;
    lmc_norm post_ln;
} lmc_siglip;

/* Geometry from a vision_config object (SiglipVisionConfig's defaults);
 * `what` names it in errors. */
lmc_status lmc_siglip_init(lmc_siglip *s, const json_t *vision_config, const char *what);
/* Binds the weights under their SiglipVisionTransformer names
 * (embeddings.patch_embedding.weight, encoder.layers.N.self_attn.q_proj,
 * ..., post_layernorm), dense or MLX-quantized. */
lmc_status lmc_siglip_bind(lmc_siglip *s, const lmc_weights *w);
void lmc_siglip_free(lmc_siglip *s);
/* out [n_patches, hidden] = the tower's last_hidden_state for pixels
 * [channels, image_size, image_size]. */
lmc_status lmc_siglip_forward(const lmc_siglip *s, const float *pixels, float *out);

#endif
