/* SigLIP vision tower (transformers modeling_siglip.py: SiglipVisionEmbeddings,
 * SiglipEncoderLayer, SiglipAttention with eager attention, SiglipMLP):
 *   x = conv_patch(pixels) + position_embedding
 *   x = x + attn(layer_norm1(x)); x = x + fc2(gelu_tanh(fc1(layer_norm2(x))))
 *   out = post_layernorm(x) */
#include "models/siglip.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lmc_status lmc_siglip_init(lmc_siglip *s, const json_t *j, const char *what) {
    memset(s, 0, sizeof *s);
    if (!json_is_object(j)) return lmc_error(LMC_ERR_FORMAT, "%s: no vision_config object", what);
    bool bad = false;
    s->hidden = lmc_json_int(j, "hidden_size", 768, &bad);
    s->intermediate = lmc_json_int(j, "intermediate_size", 3072, &bad);
    s->n_layers = lmc_json_int(j, "num_hidden_layers", 12, &bad);
    s->n_heads = lmc_json_int(j, "num_attention_heads", 12, &bad);
    s->patch = lmc_json_int(j, "patch_size", 16, &bad);
    s->channels = lmc_json_int(j, "num_channels", 3, &bad);
    s->eps = (float)lmc_json_number(j, "layer_norm_eps", 1e-6, &bad);
    int64_t tokens = lmc_json_int(j, "num_image_tokens", 0, &bad);
    const char *act = lmc_json_string(j, "hidden_act", "gelu_pytorch_tanh", &bad);
    if (bad)
        return lmc_error(LMC_ERR_FORMAT, "%s: vision_config has a value of the wrong type", what);
    const int64_t sizes[] = {s->hidden, s->intermediate, s->n_layers, s->n_heads, s->patch};
    const char *names[] = {"hidden_size", "intermediate_size", "num_hidden_layers",
                           "num_attention_heads", "patch_size"};
    for (int i = 0; i < 5; i++)
        if (sizes[i] <= 0 || sizes[i] > (1 << 16))
            return lmc_error(LMC_ERR_FORMAT, "%s: vision_config %s = %lld is out of range", what,
                             names[i], (long long)sizes[i]);
    if (s->channels != 3)
        return lmc_error(LMC_ERR_UNSUPPORTED, "%s: vision_config num_channels = %lld (RGB is 3)",
                         what, (long long)s->channels);
    if (s->hidden % s->n_heads)
        return lmc_error(LMC_ERR_FORMAT,
                         "%s: vision hidden_size %lld is not a multiple of %lld heads", what,
                         (long long)s->hidden, (long long)s->n_heads);
    /* image_size; when absent, from num_image_tokens, else SiglipVisionConfig's 224 */
    int64_t side = (int64_t)llround(sqrt((double)tokens));
    int64_t def = tokens > 0 && side * side == tokens ? side * s->patch : 224;
    s->image_size = lmc_json_int(j, "image_size", def, &bad);
    if (bad || s->image_size < s->patch || s->image_size > (1 << 15))
        return lmc_error(LMC_ERR_FORMAT, "%s: vision_config image_size is out of range", what);
    s->head_dim = s->hidden / s->n_heads;
    s->grid = s->image_size / s->patch;
    s->n_patches = s->grid * s->grid;
    lmc_status st = lmc_activation_parse(act, &s->act);
    if (st != LMC_OK) return lmc_error_prefix(st, "%s: vision_config", what);
    if (s->act == LMC_ACT_GELU) s->act = LMC_ACT_GELU_TANH; /* as transformers' gelu_pytorch_tanh */
    s->layers = calloc((size_t)s->n_layers, sizeof *s->layers);
    if (!s->layers) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    return LMC_OK;
}

void lmc_siglip_free(lmc_siglip *s) {
    free(s->layers);
    memset(s, 0, sizeof *s);
}

static lmc_status bind_patch(lmc_siglip *s, const lmc_weights *w) {
    const char *name = "embeddings.patch_embedding.weight";
    const lmc_tensor *t;
    lmc_status st = lmc_weights_get(w, name, &t);
    if (st != LMC_OK) return st;
    int64_t D = s->hidden, C = s->channels, P = s->patch;
    bool hf = t->ndim == 4 && t->shape[0] == D && t->shape[1] == C && t->shape[2] == P &&
              t->shape[3] == P;
    bool mlx = t->ndim == 4 && t->shape[0] == D && t->shape[1] == P && t->shape[2] == P &&
               t->shape[3] == C;
    if (!hf && !mlx) {
        char got[128];
        return lmc_error(LMC_ERR_SHAPE,
                         "%s: tensor '%s' has shape %s, expected [%lld, %lld, %lld, %lld] (Hugging "
                         "Face) or [%lld, %lld, %lld, %lld] (mlx)",
                         w->dir, name, lmc_shape_str(t->shape, t->ndim, got, sizeof got),
                         (long long)D, (long long)C, (long long)P, (long long)P, (long long)D,
                         (long long)P, (long long)P, (long long)C);
    }
    if (t->dtype != LMC_DTYPE_F32 && t->dtype != LMC_DTYPE_F16 && t->dtype != LMC_DTYPE_BF16)
        return lmc_error(LMC_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s (need F32/F16/BF16)",
                         w->dir, name, lmc_dtype_name(t->dtype));
    s->channels_last = mlx && !hf;
    s->patch_w = *t;
    s->patch_w.ndim = 2;
    s->patch_w.shape[1] = C * P * P;
    int64_t nb = D;
    return lmc_weights_get_shaped(w, "embeddings.patch_embedding.bias", 1, &nb, &s->patch_b);
}

lmc_status lmc_siglip_bind(lmc_siglip *s, const lmc_weights *w) {
    lmc_status st = bind_patch(s, w);
    if (st != LMC_OK) return st;
    const char *pos = "embeddings.position_embedding.weight";
    const lmc_tensor *pt = lmc_weights_find(w, pos);
    if (pt && pt->ndim == 2 && pt->shape[0] != s->n_patches && pt->dtype != LMC_DTYPE_U32)
        return lmc_error(LMC_ERR_SHAPE,
                         "%s: '%s' has %lld positions but the config's image_size %lld / "
                         "patch_size %lld gives %lld patches",
                         w->dir, pos, (long long)pt->shape[0], (long long)s->image_size,
                         (long long)s->patch, (long long)s->n_patches);
    if ((st = lmc_embedding_bind(&s->pos, w, pos, s->n_patches, s->hidden)) != LMC_OK) return st;
    int64_t D = s->hidden, I = s->intermediate;
    for (int64_t i = 0; i < s->n_layers; i++) {
        lmc_siglip_layer *y = &s->layers[i];
        char p[256];
#define BIND(lin, sub, in, out)                                                                    \
    snprintf(p, sizeof p, "encoder.layers.%lld.%s", (long long)i, sub);                            \
    if ((st = lmc_linear_bind(&y->lin, w, p, in, out, true)) != LMC_OK) return st
        BIND(q, "self_attn.q_proj", D, D);
        BIND(k, "self_attn.k_proj", D, D);
        BIND(v, "self_attn.v_proj", D, D);
        BIND(o, "self_attn.out_proj", D, D);
        BIND(fc1, "mlp.fc1", D, I);
        BIND(fc2, "mlp.fc2", I, D);
#undef BIND
        snprintf(p, sizeof p, "encoder.layers.%lld.layer_norm1", (long long)i);
        if ((st = lmc_norm_bind(&y->ln1, w, p, D, s->eps, 0, true)) != LMC_OK) return st;
        snprintf(p, sizeof p, "encoder.layers.%lld.layer_norm2", (long long)i);
        if ((st = lmc_norm_bind(&y->ln2, w, p, D, s->eps, 0, true)) != LMC_OK) return st;
    }
    return lmc_norm_bind(&s->post_ln, w, "post_layernorm", D, s->eps, 0, true);
}

/* cols [n_patches, C*P*P]: each patch's pixels in the weight's order */
static void im2col(const lmc_siglip *s, const float *px, float *cols) {
    int64_t P = s->patch, C = s->channels, S = s->image_size, K = C * P * P;
    for (int64_t gy = 0; gy < s->grid; gy++)
        for (int64_t gx = 0; gx < s->grid; gx++) {
            float *o = cols + (gy * s->grid + gx) * K;
            for (int64_t c = 0; c < C; c++)
                for (int64_t y = 0; y < P; y++)
                    for (int64_t x = 0; x < P; x++) {
                        float v = px[(c * S + gy * P + y) * S + gx * P + x];
                        if (s->channels_last)
                            o[(y * P + x) * C + c] = v;
                        else
                            o[(c * P + y) * P + x] = v;
                    }
        }
}

static void add_rows(float *x, const float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] += y[i];
}

lmc_status lmc_siglip_forward(const lmc_siglip *s, const float *pixels, float *out) {
    int64_t N = s->n_patches, D = s->hidden, I = s->intermediate;
    int64_t K = s->channels * s->patch * s->patch;
    size_t floats = (size_t)(N * (6 * D + (I > K ? I : K)));
    float *buf = lmc_alloc_aligned(floats * sizeof(float));
    int32_t *ids = malloc((size_t)N * sizeof *ids);
    if (!buf || !ids) {
        lmc_free_aligned(buf);
        free(ids);
        return lmc_error(LMC_ERR_NOMEM, "out of memory for the vision tower (%lld patches)",
                         (long long)N);
    }
    float *x = buf, *xn = x + N * D, *q = xn + N * D, *k = q + N * D, *v = k + N * D;
    float *att = v + N * D, *big = att + N * D; /* big: im2col columns, then the MLP's [N, I] */
    im2col(s, pixels, big);
    lmc_matmul_gemm(&s->patch_w, big, N, x);
    float b[1024];
    for (int64_t d0 = 0; d0 < D; d0 += 1024) { /* conv bias */
        int64_t m = D - d0 < 1024 ? D - d0 : 1024;
        lmc_convert_to_f32(
            s->patch_b->dtype,
            (const uint8_t *)s->patch_b->data + d0 * lmc_dtype_size(s->patch_b->dtype), b, m);
        for (int64_t t = 0; t < N; t++)
            for (int64_t i = 0; i < m; i++) x[t * D + d0 + i] += b[i];
    }
    for (int64_t t = 0; t < N; t++) ids[t] = (int32_t)t;
    lmc_embedding_lookup(&s->pos, ids, N, xn);
    add_rows(x, xn, N * D);
    lmc_status st = LMC_OK;
    float scale = (float)(1.0 / sqrt((double)s->head_dim));
    for (int64_t l = 0; l < s->n_layers && st == LMC_OK; l++) {
        const lmc_siglip_layer *y = &s->layers[l];
        lmc_norm_forward(&y->ln1, x, xn, N, D);
        lmc_linear_forward_gemm(&y->q, xn, N, q);
        lmc_linear_forward_gemm(&y->k, xn, N, k);
        lmc_linear_forward_gemm(&y->v, xn, N, v);
        st = lmc_attention_full(q, k, v, N, s->n_heads, s->head_dim, scale, att);
        if (st != LMC_OK) break;
        lmc_linear_forward_gemm(&y->o, att, N, xn);
        add_rows(x, xn, N * D);
        lmc_norm_forward(&y->ln2, x, xn, N, D);
        lmc_linear_forward_gemm(&y->fc1, xn, N, big);
        lmc_activation_apply(s->act, big, N * I);
        lmc_linear_forward_gemm(&y->fc2, big, N, xn);
        add_rows(x, xn, N * D);
    }
    if (st == LMC_OK) lmc_norm_forward(&s->post_ln, x, out, N, D);
    lmc_free_aligned(buf);
    free(ids);
    return st;
}
