/* Linear layers and embeddings over what the file holds: dense f32/f16/bf16
 * weights, or MLX affine-quantized ones (packed U32 weight + scales +
 * biases), both read in place. */
#include "nn/nn.h"

#include <stdio.h>
#include <string.h>

static bool is_float(lmc_dtype dt) {
    return dt == LMC_DTYPE_F32 || dt == LMC_DTYPE_F16 || dt == LMC_DTYPE_BF16;
}

lmc_status lmc_quant_params(const lmc_weights *w, const char *module, const lmc_tensor *weight,
                            const lmc_tensor *scales, int64_t in, int *bits, int *group_size) {
    int64_t packed = weight->shape[weight->ndim - 1];
    int64_t groups = scales->shape[scales->ndim - 1];
    char ws[128], ss[128];
    if (packed <= 0 || groups <= 0 || (packed * 32) % in != 0 || in % groups != 0)
        return lmc_error(LMC_ERR_SHAPE,
                         "%s: quantized module '%s': packed weight %s and scales %s do not fit "
                         "%lld inputs for any bits and group size",
                         w->dir, module, lmc_shape_str(weight->shape, weight->ndim, ws, sizeof ws),
                         lmc_shape_str(scales->shape, scales->ndim, ss, sizeof ss), (long long)in);
    int file_bits = (int)(packed * 32 / in), file_group = (int)(in / groups);
    const json_t *q = w->quantization;
    if (!q)
        return lmc_error(LMC_ERR_FORMAT,
                         "%s: '%s' is stored quantized (%s.scales) but config.json has no "
                         "\"quantization\"",
                         w->dir, module, module);
    char file_module[512];
    const json_t *entry =
        json_object_get(q, lmc_weights_file_name(w, module, file_module, sizeof file_module));
    if (json_is_false(entry))
        return lmc_error(LMC_ERR_FORMAT,
                         "%s: config.json's quantization marks '%s' as not quantized, but the "
                         "file has %s.scales",
                         w->dir, module, module);
    const json_t *src = json_is_object(entry) ? entry : q;
    int cfg_bits = (int)lmc_json_int(src, "bits", file_bits, NULL);
    int cfg_group = (int)lmc_json_int(src, "group_size", file_group, NULL);
    if (cfg_bits != file_bits || cfg_group != file_group)
        return lmc_error(LMC_ERR_FORMAT,
                         "%s: '%s': config.json says bits %d, group_size %d but the tensors "
                         "(weight %s, scales %s, %lld inputs) hold bits %d, group_size %d",
                         w->dir, module, cfg_bits, cfg_group,
                         lmc_shape_str(weight->shape, weight->ndim, ws, sizeof ws),
                         lmc_shape_str(scales->shape, scales->ndim, ss, sizeof ss), (long long)in,
                         file_bits, file_group);
    *bits = file_bits;
    *group_size = file_group;
    return LMC_OK;
}

/* Binds module (prefix) as quantized when prefix.scales exists; *done is
 * false when the module is dense. */
static lmc_status bind_quantized(const lmc_weights *w, const char *prefix, int64_t in, int64_t out,
                                 const lmc_tensor **weight, lmc_qweight *qw, bool *done) {
    char name[512];
    *done = false;
    snprintf(name, sizeof name, "%s.scales", prefix);
    const lmc_tensor *scales = lmc_weights_find(w, name);
    snprintf(name, sizeof name, "%s.weight", prefix);
    const lmc_tensor *wt = lmc_weights_find(w, name);
    if (!wt) return lmc_weights_get(w, name, weight); /* the missing-tensor error */
    if (!scales) {
        if (wt->dtype == LMC_DTYPE_U32)
            return lmc_error(LMC_ERR_NOT_FOUND,
                             "%s: '%s' is a packed U32 weight but '%s.scales' is missing", w->dir,
                             name, prefix);
        return LMC_OK; /* dense */
    }
    snprintf(name, sizeof name, "%s.biases", prefix);
    const lmc_tensor *biases = lmc_weights_find(w, name);
    if (!biases)
        return lmc_error(LMC_ERR_NOT_FOUND, "%s: quantized module '%s' has scales but no '%s'",
                         w->dir, prefix, name);
    if (wt->dtype != LMC_DTYPE_U32)
        return lmc_error(LMC_ERR_FORMAT, "%s: '%s.weight' has scales but dtype %s (need U32)",
                         w->dir, prefix, lmc_dtype_name(wt->dtype));
    int bits, group;
    lmc_status st = lmc_quant_params(w, prefix, wt, scales, in, &bits, &group);
    if (st != LMC_OK) return st;
    st = lmc_qweight_from_tensors(wt, scales, biases, bits, group, prefix, qw);
    if (st != LMC_OK) return lmc_error_prefix(st, "%s", w->dir);
    if (qw->rows != out || qw->cols != in) {
        char got[128], want[128];
        int64_t logical[2] = {qw->rows, qw->cols}, expect[2] = {out, in};
        return lmc_error(LMC_ERR_SHAPE, "%s: quantized '%s.weight' dequantizes to %s, expected %s",
                         w->dir, prefix, lmc_shape_str(logical, 2, got, sizeof got),
                         lmc_shape_str(expect, 2, want, sizeof want));
    }
    *weight = wt;
    *done = true;
    return LMC_OK;
}

lmc_status lmc_linear_bind(lmc_linear *l, const lmc_weights *w, const char *prefix, int64_t in,
                           int64_t out, bool has_bias) {
    memset(l, 0, sizeof *l);
    char name[512];
    lmc_status st = bind_quantized(w, prefix, in, out, &l->weight, &l->qw, &l->quantized);
    if (st != LMC_OK) return st;
    int64_t shape[2] = {out, in};
    if (!l->quantized) {
        snprintf(name, sizeof name, "%s.weight", prefix);
        if ((st = lmc_weights_get_shaped(w, name, 2, shape, &l->weight)) != LMC_OK) return st;
        if (!is_float(l->weight->dtype))
            return lmc_error(LMC_ERR_UNSUPPORTED,
                             "%s: tensor '%s' has dtype %s (need F32, F16 or BF16)", w->dir, name,
                             lmc_dtype_name(l->weight->dtype));
    }
    if (has_bias) {
        snprintf(name, sizeof name, "%s.bias", prefix);
        if ((st = lmc_weights_get_shaped(w, name, 1, &shape[0], &l->bias)) != LMC_OK) return st;
        if (!is_float(l->bias->dtype))
            return lmc_error(LMC_ERR_UNSUPPORTED,
                             "%s: tensor '%s' has dtype %s (need F32, F16 or BF16)", w->dir, name,
                             lmc_dtype_name(l->bias->dtype));
    }
    l->in = in;
    l->out = out;
    return LMC_OK;
}

static void add_bias(const lmc_tensor *bias, float *y, int64_t T, int64_t out) {
    float b[1024];
    size_t es = lmc_dtype_size(bias->dtype);
    for (int64_t o0 = 0; o0 < out; o0 += 1024) {
        int64_t n = out - o0 < 1024 ? out - o0 : 1024;
        lmc_convert_to_f32(bias->dtype, (const uint8_t *)bias->data + (size_t)o0 * es, b, n);
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < n; i++) y[t * out + o0 + i] += b[i];
    }
}

void lmc_linear_forward(const lmc_linear *l, const float *x, int64_t T, float *y) {
    if (l->quantized)
        lmc_qmatmul_rows(&l->qw, 0, l->out, x, T, y, l->out);
    else
        lmc_matmul_dense_rows(l->weight, 0, l->out, x, T, y, l->out);
    if (l->bias) add_bias(l->bias, y, T, l->out);
}

void lmc_linear_forward_gemm(const lmc_linear *l, const float *x, int64_t T, float *y) {
    if (l->quantized)
        lmc_qmatmul_rows(&l->qw, 0, l->out, x, T, y, l->out);
    else
        lmc_matmul_gemm(l->weight, x, T, y);
    if (l->bias) add_bias(l->bias, y, T, l->out);
}

void lmc_linear_forward_multi(const lmc_linear *const *ls, int n, const float *x, int64_t T,
                              float *const *ys) {
    bool quantized = n >= 1 && n <= 4;
    for (int i = 0; quantized && i < n; i++) quantized = ls[i]->quantized;
    if (!quantized) {
        for (int i = 0; i < n; i++) lmc_linear_forward(ls[i], x, T, ys[i]);
        return;
    }
    const lmc_qweight *ws[4];
    for (int i = 0; i < n; i++) ws[i] = &ls[i]->qw;
    lmc_qmatmul_multi(ws, n, x, T, ys);
    for (int i = 0; i < n; i++)
        if (ls[i]->bias) add_bias(ls[i]->bias, ys[i], T, ls[i]->out);
}

lmc_status lmc_embedding_bind(lmc_embedding *e, const lmc_weights *w, const char *name,
                              int64_t vocab, int64_t dim) {
    memset(e, 0, sizeof *e);
    char prefix[512];
    size_t n = strlen(name);
    if (n > 7 && !strcmp(name + n - 7, ".weight") && n - 7 < sizeof prefix) {
        memcpy(prefix, name, n - 7);
        prefix[n - 7] = '\0';
        lmc_status st = bind_quantized(w, prefix, dim, vocab, &e->weight, &e->qw, &e->quantized);
        if (st != LMC_OK) return st;
    }
    if (!e->quantized) {
        int64_t shape[2] = {vocab, dim};
        lmc_status st = lmc_weights_get_shaped(w, name, 2, shape, &e->weight);
        if (st != LMC_OK) return st;
        if (!is_float(e->weight->dtype))
            return lmc_error(LMC_ERR_UNSUPPORTED,
                             "%s: tensor '%s' has dtype %s (need F32, F16 or BF16)", w->dir, name,
                             lmc_dtype_name(e->weight->dtype));
    }
    e->vocab = vocab;
    e->dim = dim;
    return LMC_OK;
}

void lmc_embedding_lookup(const lmc_embedding *e, const int32_t *ids, int64_t n, float *out) {
    for (int64_t i = 0; i < n; i++) {
        if (e->quantized)
            lmc_qdequant_row(&e->qw, ids[i], out + i * e->dim);
        else
            lmc_dense_row_f32(e->weight, ids[i], out + i * e->dim);
    }
}

void lmc_embedding_as_linear(const lmc_embedding *e, const float *x, int64_t T, float *y) {
    if (e->quantized)
        lmc_qmatmul_rows(&e->qw, 0, e->vocab, x, T, y, e->vocab);
    else
        lmc_matmul_dense_rows(e->weight, 0, e->vocab, x, T, y, e->vocab);
}
