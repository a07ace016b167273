/* PaliGemmaForConditionalGeneration (transformers modeling_paligemma.py,
 * mlx-vlm models/paligemma): a SigLIP vision tower, a linear projector to
 * the language model's width, and Gemma fed with merged embeddings:
 *   features = projector(siglip(pixels)) / sqrt(text hidden_size)
 *   embeds   = embed_tokens(ids) * sqrt(hidden) at text positions,
 *              features * sqrt(hidden) at the image-token positions (Gemma's
 *              embedding normalizer applies to the merged embeddings)
 * with prefix attention: the prefill (image tokens, BOS, prompt, "\n") is
 * one bidirectional block, tokens after it attend causally.
 * Key layouts, resolved once here: transformers 4 and mlx-vlm write
 * language_model.model.*, vision_tower.vision_model.*,
 * multi_modal_projector.*; transformers 5.17 saves language_model.model.*
 * and vision_tower.* (no vision_model level), and holds model.* prefixes
 * in memory; all of these are read. The convolution is [out, in, kh, kw] (HF) or [out, kh, kw, in]
 * (mlx-vlm); any module may be dense or MLX-quantized. */
#include "models/model.h"
#include "models/siglip.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct paligemma {
    lmc_decoder lm;
    lmc_siglip vision;
    lmc_linear projector;
    lmc_weights lm_w, vision_w, proj_w; /* renamed views of the model's weights */
    int64_t image_token;
    float feature_scale; /* 1 / sqrt(text hidden_size), as f32 */
} paligemma;

static const lmc_weight_rename lm_names[] = {{"language_model.model.", "model."},
                                             {"model.language_model.", "model."},
                                             {"language_model.lm_head.", "lm_head."},
                                             {"lm_head.", "lm_head."}};
static const lmc_weight_rename vision_names[] = {{"vision_tower.vision_model.", ""},
                                                 {"model.vision_tower.vision_model.", ""},
                                                 {"vision_tower.", ""},
                                                 {"model.vision_tower.", ""}};
static const lmc_weight_rename proj_names[] = {{"multi_modal_projector.", ""},
                                               {"model.multi_modal_projector.", ""}};

static void paligemma_free(lmc_model *m) {
    paligemma *p = m->impl;
    if (!p) return;
    lmc_decoder_free(&p->lm);
    lmc_siglip_free(&p->vision);
    lmc_weights_close(&p->lm_w);
    lmc_weights_close(&p->vision_w);
    lmc_weights_close(&p->proj_w);
    free(p);
    m->impl = NULL;
}

static lmc_status paligemma_load(lmc_model *m) {
    paligemma *p = calloc(1, sizeof *p);
    if (!p) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    m->impl = p;
    const json_t *top = m->cfg.vlm_json;
    lmc_status st;
    if ((st = lmc_weights_view(&m->weights, lm_names, 4, &p->lm_w)) != LMC_OK) return st;
    if ((st = lmc_weights_view(&m->weights, vision_names, 4, &p->vision_w)) != LMC_OK) return st;
    if ((st = lmc_weights_view(&m->weights, proj_names, 2, &p->proj_w)) != LMC_OK) return st;
    if ((st = lmc_gemma_bind(&p->lm, &m->cfg, &p->lm_w)) != LMC_OK) return st;
    if ((st = lmc_siglip_init(&p->vision, json_object_get(top, "vision_config"), "config.json")) !=
        LMC_OK)
        return st;
    if ((st = lmc_siglip_bind(&p->vision, &p->vision_w)) != LMC_OK) return st;
    int64_t H = m->cfg.hidden_size;
    bool bad = false;
    int64_t proj_dim =
        lmc_json_int(json_object_get(top, "vision_config"), "projection_dim", H, &bad);
    proj_dim = lmc_json_int(top, "projection_dim", proj_dim, &bad);
    if (!bad && proj_dim != H)
        return lmc_error(LMC_ERR_FORMAT,
                         "config.json: projection_dim %lld differs from the text hidden_size %lld",
                         (long long)proj_dim, (long long)H);
    if ((st = lmc_linear_bind(&p->projector, &p->proj_w, "linear", p->vision.hidden, H, true)) !=
        LMC_OK)
        return st;
    /* image_token_index (transformers 4, mlx-vlm) or image_token_id (5) */
    int64_t tok = lmc_json_int(top, "image_token_index", -1, &bad);
    tok = lmc_json_int(top, "image_token_id", tok, &bad);
    if (bad || tok < 0 || tok >= m->cfg.vocab_size)
        return lmc_error(LMC_ERR_FORMAT,
                         "config.json: image_token_index %lld is missing or outside the vocabulary "
                         "of %lld",
                         (long long)tok, (long long)m->cfg.vocab_size);
    p->image_token = tok;
    p->feature_scale = (float)(1.0 / sqrt((double)H));
    m->vision.image_token_id = (int32_t)tok;
    m->vision.tokens_per_image = (int32_t)p->vision.n_patches;
    m->vision.image_size = (int32_t)p->vision.image_size;
    return LMC_OK;
}

static lmc_status paligemma_forward(lmc_model *m, lmc_kv_cache *kv, const int32_t *tokens,
                                    int64_t T, bool all_positions, float *logits) {
    paligemma *p = m->impl;
    return lmc_decoder_forward(&p->lm, kv, tokens, T, all_positions, logits);
}

static lmc_status paligemma_forward_images(lmc_model *m, lmc_kv_cache *kv, const int32_t *tokens,
                                           int64_t T, const lmc_pixels *px, bool all_positions,
                                           float *logits) {
    paligemma *p = m->impl;
    const lmc_siglip *s = &p->vision;
    int64_t H = p->lm.hidden, N = s->n_patches, Dv = s->hidden;
    int64_t n_img = 0;
    for (int64_t t = 0; t < T; t++) n_img += tokens[t] == p->image_token;
    if (px->height != s->image_size || px->width != s->image_size)
        return lmc_error(LMC_ERR_INVALID_ARG,
                         "the vision tower takes %lld x %lld images, not %lld x %lld",
                         (long long)s->image_size, (long long)s->image_size, (long long)px->height,
                         (long long)px->width);
    if (n_img != px->n * N)
        return lmc_error(LMC_ERR_INVALID_ARG,
                         "%lld image tokens for %lld images of %lld tokens each", (long long)n_img,
                         (long long)px->n, (long long)N);
    float *embeds = lmc_alloc_aligned((size_t)(T * H) * sizeof(float));
    float *vis = lmc_alloc_aligned((size_t)(N * Dv) * sizeof(float));
    float *feat = lmc_alloc_aligned((size_t)(px->n * N * H) * sizeof(float));
    lmc_status st = LMC_OK;
    if (!embeds || !vis || !feat)
        st = lmc_error(LMC_ERR_NOMEM, "out of memory for %lld images", (long long)px->n);
    size_t image_floats = (size_t)(3 * px->height * px->width);
    for (int64_t i = 0; i < px->n && st == LMC_OK; i++) {
        st = lmc_siglip_forward(s, px->data + (size_t)i * image_floats, vis);
        if (st == LMC_OK) lmc_linear_forward_gemm(&p->projector, vis, N, feat + i * N * H);
    }
    if (st == LMC_OK) {
        float norm = p->lm.embed_scale;
        int64_t next = 0;
        for (int64_t t = 0; t < T; t++) {
            float *e = embeds + t * H;
            if (tokens[t] == p->image_token) {
                const float *f = feat + (next++) * H;
                for (int64_t i = 0; i < H; i++) e[i] = (f[i] * p->feature_scale) * norm;
            } else {
                lmc_embedding_lookup(&p->lm.embed, &tokens[t], 1, e);
                for (int64_t i = 0; i < H; i++) e[i] *= norm;
            }
        }
        lmc_decoder_inputs in = {.embeds = embeds, .prefix = kv->length + T};
        st = lmc_decoder_forward_inputs(&p->lm, kv, tokens, T, &in, all_positions, logits);
    }
    lmc_free_aligned(embeds);
    lmc_free_aligned(vis);
    lmc_free_aligned(feat);
    return st;
}

static const lmc_decoder *paligemma_decoder(const lmc_model *m) {
    const paligemma *p = m->impl;
    return &p->lm;
}

static const lmc_config_defaults paligemma_defaults = {.rms_norm_eps = 1e-6,
                                                       .max_position_embeddings = 8192,
                                                       .tie_word_embeddings = true,
                                                       .sliding_window = 0,
                                                       .bos_token_id = 2,
                                                       .eos_token_id = 1};

const lmc_arch lmc_arch_paligemma = {.model_type = "paligemma",
                                     .defaults = &paligemma_defaults,
                                     .load = paligemma_load,
                                     .free = paligemma_free,
                                     .forward = paligemma_forward,
                                     .decoder = paligemma_decoder,
                                     .forward_images = paligemma_forward_images,
                                     .text_config = true};
