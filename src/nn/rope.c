/* Rotary position embedding, HF layout: the head's first half and second
 * half form the (x1, x2) pairs (transformers' rotate_half). Frequencies
 * follow transformers' modeling_rope_utils.py. */
#include "nn/nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* Reads rope_parameters[key] (a list of rotary_dim / 2 numbers) into out. */
static lmc_status read_factors(const lmc_rope_config *c, const char *key, int64_t half,
                               float *out) {
    const json_t *a = c->params ? json_object_get(c->params, key) : NULL;
    if (!json_is_array(a) || (int64_t)json_array_size(a) != half)
        return lmc_error(LMC_ERR_FORMAT,
                         "rope_scaling longrope: '%s' must be a list of %lld numbers "
                         "(rotary_dim / 2), got %s of %lld",
                         key, (long long)half, json_is_array(a) ? "a list" : "no list",
                         json_is_array(a) ? (long long)json_array_size(a) : 0LL);
    for (int64_t i = 0; i < half; i++) {
        const json_t *v = json_array_get(a, (size_t)i);
        if (!json_is_number(v))
            return lmc_error(LMC_ERR_FORMAT, "rope_scaling longrope: '%s'[%lld] is not a number",
                             key, (long long)i);
        out[i] = (float)json_number_value(v);
    }
    return LMC_OK;
}

/* transformers _compute_longrope_parameters (modeling_rope_utils.py, v5):
 *   inv_freq[i] = 1 / (ext[i] * base^(2i / dim)), ext = short_factor, or
 *     long_factor when seq_len > original_max_position_embeddings
 *   factor = rope_parameters["factor"], else max_position_embeddings / original
 *   attention_factor = rope_parameters["attention_factor"], else 1 when
 *     factor <= 1, else sqrt(1 + ln(factor) / ln(original))
 * Nothing is read from the weights (mlx-lm keeps its frequencies in a
 * private SuScaledRoPE._freqs that is never saved). */
static lmc_status longrope_init(lmc_rope *r, const lmc_rope_config *c, int64_t max_pos) {
    int64_t half = r->rotary_dim / 2;
    int64_t orig = c->original_max_position_embeddings;
    if (orig <= 0) orig = max_pos;
    if (orig <= 0)
        return lmc_error(LMC_ERR_FORMAT, "rope_scaling longrope needs "
                                         "original_max_position_embeddings or "
                                         "max_position_embeddings");
    r->long_inv_freq = malloc((size_t)(half ? half : 1) * sizeof(float));
    float *sf = malloc((size_t)(half ? half : 1) * sizeof(float));
    lmc_status st = LMC_OK;
    if (!r->long_inv_freq || !sf) st = lmc_error(LMC_ERR_NOMEM, "out of memory");
    if (st == LMC_OK) st = read_factors(c, "short_factor", half, sf);
    if (st == LMC_OK) st = read_factors(c, "long_factor", half, r->long_inv_freq);
    if (st == LMC_OK) {
        for (int64_t i = 0; i < half; i++) {
            /* float32 as torch: ext * base ** (arange(0, dim, 2) / dim), then 1 / that */
            float expo = (float)(2 * i) / (float)r->rotary_dim;
            float p = (float)pow(c->theta, (double)expo);
            r->inv_freq[i] = 1.0f / (sf[i] * p);
            r->long_inv_freq[i] = 1.0f / (r->long_inv_freq[i] * p);
        }
        const json_t *jf = c->params ? json_object_get(c->params, "factor") : NULL;
        const json_t *ja = c->params ? json_object_get(c->params, "attention_factor") : NULL;
        double factor = json_is_number(jf) ? json_number_value(jf) : (double)max_pos / (double)orig;
        double af = factor <= 1.0 ? 1.0 : sqrt(1.0 + log(factor) / log((double)orig));
        if (json_is_number(ja)) af = json_number_value(ja);
        r->attention_scaling = r->long_scaling = (float)af;
        r->original_max = orig;
    }
    free(sf);
    return st;
}

bool lmc_rope_uses_long(const lmc_rope *r, int64_t seq_len) {
    return r->long_inv_freq && seq_len > r->original_max;
}

lmc_status lmc_rope_init(lmc_rope *r, const lmc_rope_config *cfg, int64_t head_dim,
                         int64_t max_position_embeddings) {
    memset(r, 0, sizeof *r);
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
    case LMC_ROPE_DEFAULT:
        break;
    case LMC_ROPE_DYNAMIC:
        break; /* equals default up to max_position_embeddings */
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
    case LMC_ROPE_LONGROPE: {
        lmc_status st = longrope_init(r, cfg, max_position_embeddings);
        if (st != LMC_OK) {
            lmc_rope_free(r);
            return st;
        }
        break;
    }
    default: {
        static const char *const names[] = {"default", "linear",   "llama3",
                                            "dynamic", "longrope", "yarn"};
        lmc_rope_free(r);
        return lmc_error(
            LMC_ERR_UNSUPPORTED,
            "rope type '%s' is not supported yet (default, linear, llama3, dynamic, longrope)",
            (unsigned)cfg->type < 6 ? names[cfg->type] : "?");
    }
    }
    return LMC_OK;
}

void lmc_rope_free(lmc_rope *r) {
    free(r->inv_freq);
    free(r->long_inv_freq);
    r->inv_freq = NULL;
    r->long_inv_freq = NULL;
}

void lmc_rope_apply(const lmc_rope *r, float *x, int64_t T, int64_t n_heads,
                    const int32_t *positions) {
    int64_t half = r->rotary_dim / 2;
    float cs[512], sn[512];
    const float *inv_freq = r->inv_freq;
    float scaling = r->attention_scaling;
    if (r->long_inv_freq) {
        int64_t seq_len = 0;
        for (int64_t t = 0; t < T; t++)
            if (positions[t] + 1 > seq_len) seq_len = positions[t] + 1;
        if (lmc_rope_uses_long(r, seq_len)) {
            inv_freq = r->long_inv_freq;
            scaling = r->long_scaling;
        }
    }
    for (int64_t t = 0; t < T; t++) {
        float pos = (float)positions[t];
        for (int64_t i0 = 0; i0 < half; i0 += 512) {
            int64_t n = half - i0 < 512 ? half - i0 : 512;
            for (int64_t i = 0; i < n; i++) {
                float ang = pos * inv_freq[i0 + i]; /* float32, as transformers */
                cs[i] = cosf(ang) * scaling;
                sn[i] = sinf(ang) * scaling;
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
