#include "nn/nn.h"

#include <stdio.h>
#include <string.h>

lmc_status lmc_quantized_bind(const lmc_weights *w, const char *prefix, int64_t rows, int64_t in,
                              lmc_qweight *q) {
    char wn[512], sn[512], bn[512];
    snprintf(wn, sizeof wn, "%s.weight", prefix);
    snprintf(sn, sizeof sn, "%s.scales", prefix);
    snprintf(bn, sizeof bn, "%s.biases", prefix);
    const lmc_tensor *tw, *ts, *tb;
    lmc_status st;
    if ((st = lmc_weights_get(w, wn, &tw)) != LMC_OK || (st = lmc_weights_get(w, sn, &ts)) != LMC_OK ||
        (st = lmc_weights_get(w, bn, &tb)) != LMC_OK)
        return st;
    if (tw->ndim < 2 || ts->ndim < 2)
        return lmc_error(LMC_ERR_SHAPE, "%s: quantized '%s' needs 2 or more dimensions", w->dir, wn);
    int64_t words = tw->shape[tw->ndim - 1], ngroups = ts->shape[ts->ndim - 1];
    if (in <= 0 || ngroups <= 0 || (words * 32) % in != 0 || in % ngroups != 0)
        return lmc_error(LMC_ERR_SHAPE,
                         "%s: quantized '%s': packed width %lld and %lld groups do not fit %lld inputs",
                         w->dir, wn, (long long)words, (long long)ngroups, (long long)in);
    int bits = (int)(words * 32 / in), group = (int)(in / ngroups);
    if ((st = lmc_qweight_from_tensors(tw, ts, tb, bits, group, wn, q)) != LMC_OK)
        return lmc_error_prefix(st, "%s", w->dir);
    if (q->rows != rows || q->cols != in)
        return lmc_error(LMC_ERR_SHAPE, "%s: quantized '%s' is [%lld, %lld], expected [%lld, %lld]",
                         w->dir, wn, (long long)q->rows, (long long)q->cols, (long long)rows,
                         (long long)in);
    return LMC_OK;
}

lmc_status lmc_linear_bind(lmc_linear *l, const lmc_weights *w, const char *prefix, int64_t in,
                           int64_t out, bool has_bias) {
    memset(l, 0, sizeof *l);
    char name[512];
    int64_t shape[2] = {out, in};
    lmc_status st;
    snprintf(name, sizeof name, "%s.scales", prefix);
    if (lmc_weights_find(w, name)) {
        if ((st = lmc_quantized_bind(w, prefix, out, in, &l->q)) != LMC_OK) return st;
        snprintf(name, sizeof name, "%s.weight", prefix);
        l->weight = lmc_weights_find(w, name);
        l->quantized = true;
    } else {
        snprintf(name, sizeof name, "%s.weight", prefix);
        if ((st = lmc_weights_get_shaped(w, name, 2, shape, &l->weight)) != LMC_OK) return st;
    }
    if (!l->quantized && l->weight->dtype != LMC_DTYPE_F32 && l->weight->dtype != LMC_DTYPE_F16 &&
        l->weight->dtype != LMC_DTYPE_BF16)
        return lmc_error(LMC_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s (need F32/F16/BF16)",
                         w->dir, name, lmc_dtype_name(l->weight->dtype));
    if (has_bias) {
        snprintf(name, sizeof name, "%s.bias", prefix);
        st = lmc_weights_get_shaped(w, name, 1, &shape[0], &l->bias);
        if (st != LMC_OK) return st;
    }
    l->in = in;
    l->out = out;
    return LMC_OK;
}

void lmc_linear_forward(const lmc_linear *l, const float *x, int64_t T, float *y) {
    if (l->quantized)
        lmc_qmatmul_rows(&l->q, 0, l->out, x, T, y, l->out);
    else
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
    lmc_status st;
    size_t n = strlen(name);
    char prefix[512], sname[520];
    if (n > 7 && n - 7 < sizeof prefix && strcmp(name + n - 7, ".weight") == 0) {
        memcpy(prefix, name, n - 7);
        prefix[n - 7] = 0;
        snprintf(sname, sizeof sname, "%s.scales", prefix);
        if (lmc_weights_find(w, sname)) {
            if ((st = lmc_quantized_bind(w, prefix, vocab, dim, &e->q)) != LMC_OK) return st;
            e->weight = lmc_weights_find(w, name);
            e->quantized = true;
            e->vocab = vocab;
            e->dim = dim;
            return LMC_OK;
        }
    }
    st = lmc_weights_get_shaped(w, name, 2, shape, &e->weight);
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
    for (int64_t i = 0; i < n; i++) {
        if (e->quantized)
            lmc_qdequant_row(&e->q, ids[i], out + i * e->dim);
        else
            lmc_dense_row_f32(e->weight, ids[i], out + i * e->dim);
    }
}

void lmc_embedding_as_linear(const lmc_embedding *e, const float *x, int64_t T, float *y) {
    if (e->quantized)
        lmc_qmatmul_rows(&e->q, 0, e->vocab, x, T, y, e->vocab);
    else
        lmc_matmul_dense_rows(e->weight, 0, e->vocab, x, T, y, e->vocab);
}
