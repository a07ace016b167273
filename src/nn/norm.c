/* RMSNorm (optionally gemma's 1 + w) and LayerNorm, and activations. */
#include "nn/decoder.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

lmc_status lmc_activation_parse(const char *name, lmc_activation *out) {
    if (!strcmp(name, "silu") || !strcmp(name, "swish"))
        *out = LMC_ACT_SILU;
    else if (!strcmp(name, "gelu_pytorch_tanh") || !strcmp(name, "gelu_new") ||
             !strcmp(name, "gelu_fast"))
        *out = LMC_ACT_GELU_TANH;
    else if (!strcmp(name, "gelu"))
        *out = LMC_ACT_GELU;
    else
        return lmc_error(LMC_ERR_UNSUPPORTED,
                         "hidden_act '%s' is not supported (silu, gelu, gelu_pytorch_tanh)", name);
    return LMC_OK;
}

lmc_status lmc_norm_bind(lmc_norm *n, const lmc_weights *w, const char *prefix, int64_t dim,
                         float eps, float offset, bool layer_norm) {
    memset(n, 0, sizeof *n);
    char name[512];
    snprintf(name, sizeof name, "%s.weight", prefix);
    lmc_status st = lmc_weights_get_shaped(w, name, 1, &dim, &n->weight);
    if (st != LMC_OK) return st;
    lmc_dtype dt = n->weight->dtype;
    if (dt != LMC_DTYPE_F32 && dt != LMC_DTYPE_F16 && dt != LMC_DTYPE_BF16)
        return lmc_error(LMC_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s (need F32/F16/BF16)",
                         w->dir, name, lmc_dtype_name(dt));
    if (layer_norm) {
        snprintf(name, sizeof name, "%s.bias", prefix);
        n->bias = lmc_weights_find(w, name);
        if (n->bias && (st = lmc_weights_get_shaped(w, name, 1, &dim, &n->bias)) != LMC_OK)
            return st;
    }
    n->eps = eps;
    n->offset = offset;
    n->layer_norm = layer_norm;
    return LMC_OK;
}

void lmc_norm_forward(const lmc_norm *n, const float *x, float *y, int64_t rows, int64_t dim) {
    if (!n->layer_norm) {
        lmc_rmsnorm(x, n->weight, n->offset, n->eps, y, rows, dim);
        return;
    }
    /* torch.nn.LayerNorm: (x - mean) / sqrt(var + eps) * w + b, biased var */
    float wb[2][1024];
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * dim;
        float *yr = y + r * dim;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < dim; i++) mean += xr[i];
        mean /= (double)dim;
        for (int64_t i = 0; i < dim; i++) var += (xr[i] - mean) * (xr[i] - mean);
        var /= (double)dim;
        float inv = (float)(1.0 / sqrt(var + n->eps));
        for (int64_t i0 = 0; i0 < dim; i0 += 1024) {
            int64_t m = dim - i0 < 1024 ? dim - i0 : 1024;
            size_t es = lmc_dtype_size(n->weight->dtype);
            lmc_convert_to_f32(n->weight->dtype, (const uint8_t *)n->weight->data + i0 * es, wb[0],
                               m);
            if (n->bias)
                lmc_convert_to_f32(
                    n->bias->dtype,
                    (const uint8_t *)n->bias->data + i0 * lmc_dtype_size(n->bias->dtype), wb[1], m);
            for (int64_t i = 0; i < m; i++)
                yr[i0 + i] = (float)(xr[i0 + i] - mean) * inv * (wb[0][i] + n->offset) +
                             (n->bias ? wb[1][i] : 0.0f);
        }
    }
}
