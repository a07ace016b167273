/* Dtypes: sizes, names, and f16/bf16 <-> f32 conversion. */
#include "tensor/tensor.h"

#include <stdio.h>
#include <math.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtype_info[LMC_DTYPE_COUNT] = {
    [LMC_DTYPE_F32] = {"F32", 4}, [LMC_DTYPE_F16] = {"F16", 2}, [LMC_DTYPE_BF16] = {"BF16", 2},
    [LMC_DTYPE_U32] = {"U32", 4}, [LMC_DTYPE_I32] = {"I32", 4}, [LMC_DTYPE_I64] = {"I64", 8},
    [LMC_DTYPE_U8] = {"U8", 1},   [LMC_DTYPE_I8] = {"I8", 1},   [LMC_DTYPE_BOOL] = {"BOOL", 1},
};

size_t lmc_dtype_size(lmc_dtype dt) {
    return dt < LMC_DTYPE_COUNT ? dtype_info[dt].size : 0;
}

const char *lmc_dtype_name(lmc_dtype dt) {
    return dt < LMC_DTYPE_COUNT ? dtype_info[dt].name : "?";
}

bool lmc_dtype_parse(const char *name, lmc_dtype *out) {
    for (int i = 0; i < LMC_DTYPE_COUNT; i++)
        if (!strcmp(name, dtype_info[i].name)) {
            *out = (lmc_dtype)i;
            return true;
        }
    return false;
}

int64_t lmc_tensor_numel(const lmc_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

const char *lmc_shape_str(const int64_t *shape, int ndim, char *buf, size_t size) {
    size_t off = 0;
    off += (size_t)snprintf(buf + off, size - off, "[");
    for (int i = 0; i < ndim && off < size; i++)
        off +=
            (size_t)snprintf(buf + off, size - off, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (off < size) snprintf(buf + off, size - off, "]");
    return buf;
}

void lmc_convert_to_f32(lmc_dtype dt, const void *src, float *dst, int64_t n) {
    switch (dt) {
    case LMC_DTYPE_F32:
        memcpy(dst, src, (size_t)n * 4);
        break;
    case LMC_DTYPE_F16: {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++) dst[i] = lmc_f16_to_f32(s[i]);
        break;
    }
    case LMC_DTYPE_BF16: {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++) dst[i] = lmc_bf16_to_f32(s[i]);
        break;
    }
    default: /* callers check the dtype first; NaN, never plausible zeros */
        for (int64_t i = 0; i < n; i++) dst[i] = NAN;
        break;
    }
}

void lmc_convert_from_f32(lmc_dtype dt, const float *src, void *dst, int64_t n) {
    switch (dt) {
    case LMC_DTYPE_F32:
        memcpy(dst, src, (size_t)n * 4);
        break;
    case LMC_DTYPE_F16: {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = lmc_f32_to_f16(src[i]);
        break;
    }
    case LMC_DTYPE_BF16: {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = lmc_f32_to_bf16(src[i]);
        break;
    }
    default:
        break;
    }
}
