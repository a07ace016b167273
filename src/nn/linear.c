#include "nn/nn.h"

#include <stdio.h>
#include <string.h>

lmc_status lmc_linear_bind(lmc_linear *l, const lmc_weights *w, const char *prefix, int64_t in,
                           int64_t out, bool has_bias) {
    memset(l, 0, sizeof *l);
    char name[512];
    snprintf(name, sizeof name, "%s.weight", prefix);
    int64_t shape[2] = {out, in};
    lmc_status st = lmc_weights_get_shaped(w, name, 2, shape, &l->weight);
    if (st != LMC_OK) return st;
    if (l->weight->dtype != LMC_DTYPE_F32 && l->weight->dtype != LMC_DTYPE_F16 &&
        l->weight->dtype != LMC_DTYPE_BF16)
        return lmc_error(LMC_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s (need F32/F16/BF16)",
                         w->dir, name, lmc_dtype_name(l->weight->dtype));
    if (has_bias) {
        snprintf(name, sizeof name, "%s.bias", prefix);
        st = lmc_weights_get_shaped(w, name, 1, &shape[0], &l->bias);
        if (st != LMC_OK) return st;
        if (l->bias->dtype != LMC_DTYPE_F32 && l->bias->dtype != LMC_DTYPE_F16 &&
            l->bias->dtype != LMC_DTYPE_BF16)
            return lmc_error(LMC_ERR_UNSUPPORTED,
                             "%s: tensor '%s' has dtype %s (need F32/F16/BF16)", w->dir, name,
                             lmc_dtype_name(l->bias->dtype));
    }
    l->in = in;
    l->out = out;
    return LMC_OK;
}

void lmc_linear_forward(const lmc_linear *l, const float *x, int64_t T, float *y) {
    lmc_matmul_dense_rows(l->weight, 0, l->out, x, T, y, l->out);
    if (l->bias) {
        float b[1024];
        for (int64_t o0 = 0; o0 < l->out; o0 += 1024) {
            int64_t n = l->out - o0 < 1024 ? l->out - o0 : 1024;
            lmc_convert_to_f32(l->bias->dtype,
                               (const uint8_t *)l->bias->data + o0 * lmc_dtype_size(l->bias->dtype),
                               b, n);
            for (int64_t t = 0; t < T; t++)
                for (int64_t i = 0; i < n; i++) y[t * l->out + o0 + i] += b[i];
        }
    }
}

lmc_status lmc_embedding_bind(lmc_embedding *e, const lmc_weights *w, const char *name,
                              int64_t vocab, int64_t dim) {
    memset(e, 0, sizeof *e);
    int64_t shape[2] = {vocab, dim};
    lmc_status st = lmc_weights_get_shaped(w, name, 2, shape, &e->weight);
    if (st != LMC_OK) return st;
    if (e->weight->dtype != LMC_DTYPE_F32 && e->weight->dtype != LMC_DTYPE_F16 &&
        e->weight->dtype != LMC_DTYPE_BF16)
        return lmc_error(LMC_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s (need F32/F16/BF16)",
                         w->dir, name, lmc_dtype_name(e->weight->dtype));
    e->vocab = vocab;
    e->dim = dim;
    return LMC_OK;
}

void lmc_embedding_lookup(const lmc_embedding *e, const int32_t *ids, int64_t n, float *out) {
    for (int64_t i = 0; i < n; i++) lmc_dense_row_f32(e->weight, ids[i], out + i * e->dim);
}

void lmc_embedding_as_linear(const lmc_embedding *e, const float *x, int64_t T, float *y) {
    lmc_matmul_dense_rows(e->weight, 0, e->vocab, x, T, y, e->vocab);
}
