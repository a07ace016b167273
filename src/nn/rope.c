/* Rotary position embedding, HF layout: the head's first half and second
 * half form the (x1, x2) pairs (transformers' rotate_half). Frequencies
 * follow transformers' modeling_rope_utils.py. */
#include "nn/nn.h"

#include <math.h>
#include <stdlib.h>

/* transformers _compute_llama3_parameters: long wavelengths are divided by
 * factor, short ones kept, the band between interpolated smoothly. */
static void llama3_scale(float *inv_freq, int64_t n, const lmc_rope_config *c) {
    double old_ctx = (double)c->original_max_position_embeddings;
    double low_wavelen = old_ctx / c->low_freq_factor;
    double high_wavelen = old_ctx / c->high_freq_factor;
    for (int64_t i = 0; i < n; i++) {
        double f = inv_freq[i];
        double wavelen = 2.0 * M_PI / f;
        double scaled = wavelen > low_wavelen ? f / c->factor : f;
        if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
            double smooth = (old_ctx / wavelen - c->low_freq_factor) /
                            (c->high_freq_factor - c->low_freq_factor);
            scaled = (1.0 - smooth) * scaled / c->factor + smooth * scaled;
        }
        inv_freq[i] = (float)scaled;
    }
}

lmc_status lmc_rope_init(lmc_rope *r, const lmc_rope_config *cfg, int64_t head_dim,
                         int64_t max_position_embeddings) {
    r->head_dim = head_dim;
    r->rotary_dim = (int64_t)((double)head_dim * cfg->partial_rotary_factor);
    r->rotary_dim -= r->rotary_dim % 2;
    r->attention_scaling = 1.0f;
    int64_t half = r->rotary_dim / 2;
    r->inv_freq = malloc((size_t)(half ? half : 1) * sizeof(float));
    if (!r->inv_freq) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    /* transformers: 1 / base ** (arange(0, dim, 2) / dim), in float32 */
    for (int64_t i = 0; i < half; i++) {
        float expo = (float)(2 * i) / (float)r->rotary_dim;
        r->inv_freq[i] = (float)(1.0 / pow(cfg->theta, (double)expo));
    }
    switch (cfg->type) {
    case LMC_ROPE_DEFAULT: break;
    case LMC_ROPE_DYNAMIC: break; /* equals default up to max_position_embeddings */
    case LMC_ROPE_LINEAR:
        for (int64_t i = 0; i < half; i++) r->inv_freq[i] = (float)(r->inv_freq[i] / cfg->factor);
        break;
    case LMC_ROPE_LLAMA3:
        if (cfg->original_max_position_embeddings <= 0 ||
            cfg->high_freq_factor == cfg->low_freq_factor) {
            lmc_rope_free(r);
            return lmc_error(LMC_ERR_FORMAT,
                             "rope_scaling llama3 needs original_max_position_embeddings and "
                             "distinct low/high_freq_factor");
        }
        llama3_scale(r->inv_freq, half, cfg);
        break;
    default: {
        static const char *const names[] = {"default", "linear",   "llama3",
                                            "dynamic", "longrope", "yarn"};
        lmc_rope_free(r);
        return lmc_error(LMC_ERR_UNSUPPORTED,
                         "rope type '%s' is not supported yet (default, linear, llama3, dynamic)",
                         (unsigned)cfg->type < 6 ? names[cfg->type] : "?");
    }
    }
    (void)max_position_embeddings;
    return LMC_OK;
}

void lmc_rope_free(lmc_rope *r) {
    free(r->inv_freq);
    r->inv_freq = NULL;
}

void lmc_rope_apply(const lmc_rope *r, float *x, int64_t T, int64_t n_heads,
                    const int32_t *positions) {
    int64_t half = r->rotary_dim / 2;
    float cs[512], sn[512];
    for (int64_t t = 0; t < T; t++) {
        float pos = (float)positions[t];
        for (int64_t i0 = 0; i0 < half; i0 += 512) {
            int64_t n = half - i0 < 512 ? half - i0 : 512;
            for (int64_t i = 0; i < n; i++) {
                float ang = pos * r->inv_freq[i0 + i]; /* float32, as transformers */
                cs[i] = cosf(ang) * r->attention_scaling;
                sn[i] = sinf(ang) * r->attention_scaling;
            }
            for (int64_t h = 0; h < n_heads; h++) {
                float *v = x + (t * n_heads + h) * r->head_dim;
                for (int64_t i = 0; i < n; i++) {
                    float x1 = v[i0 + i], x2 = v[i0 + i + half];
                    v[i0 + i] = x1 * cs[i] - x2 * sn[i];
                    v[i0 + i + half] = x2 * cs[i] + x1 * sn[i];
                }
            }
        }
    }
}
