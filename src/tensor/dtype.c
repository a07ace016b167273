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

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float lmc_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0) {
        if (man == 0) return bits_f32(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (man << 13));
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t lmc_f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t exp = (x >> 23) & 0xff;
    uint32_t man = x & 0x7fffff;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++; /* may carry into exponent: fine */
    return (uint16_t)half;
}

float lmc_bf16_to_f32(uint16_t b) {
    return bits_f32((uint32_t)b << 16);
}

uint16_t lmc_f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    uint32_t lsb = (x >> 16) & 1;
    x += 0x7fff + lsb;
    return (uint16_t)(x >> 16);
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
