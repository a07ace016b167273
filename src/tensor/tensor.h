/* Tensors over memory-mapped safetensors files, dtypes and conversion. */
#ifndef LMC_TENSOR_H
#define LMC_TENSOR_H

#include "base/base.h"

#include <math.h>
#include <string.h>

#define LMC_MAX_DIMS 8

typedef enum lmc_dtype {
    LMC_DTYPE_F32 = 0,
    LMC_DTYPE_F16,
    LMC_DTYPE_BF16,
    LMC_DTYPE_U32,
    LMC_DTYPE_I32,
    LMC_DTYPE_I64,
    LMC_DTYPE_U8,
    LMC_DTYPE_I8,
    LMC_DTYPE_BOOL,
    LMC_DTYPE_COUNT
} lmc_dtype;

/* Bytes per element. */
size_t lmc_dtype_size(lmc_dtype dt);
/* safetensors spelling: "F32", "BF16", ... */
const char *lmc_dtype_name(lmc_dtype dt);
/* Parses the safetensors spelling; false when unknown. */
bool lmc_dtype_parse(const char *name, lmc_dtype *out);

/* A view of a tensor: data is borrowed (a file mapping or an owner's buffer),
 * row-major and contiguous. */
typedef struct lmc_tensor {
    const char *name; /* borrowed */
    lmc_dtype dtype;
    int ndim;
    int64_t shape[LMC_MAX_DIMS];
    const void *data;
    uint64_t nbytes;
} lmc_tensor;

int64_t lmc_tensor_numel(const lmc_tensor *t);
/* Formats a shape as "[2, 3]" into buf. */
const char *lmc_shape_str(const int64_t *shape, int ndim, char *buf, size_t size);

/* Scalar conversions, the one home of them (IEEE half and bfloat16, round
 * to nearest even), bit-exact with mlx's float16/bfloat16 casts
 * (mlx/types/fp16.h, bf16.h) so that convert writes what mlx writes: a NaN
 * becomes sign | 0x7D00 in f16 and 0x7FC0 in bf16. Inline: the quantized
 * kernels read their scales through them. */
static inline uint32_t lmc_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float lmc_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* half -> float (exact) */
static inline float lmc_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0x1f) return lmc_bits_f32(sign | 0x7f800000 | (mant << 13));
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24 is exact in float */
        float v = (float)mant * 5.9604644775390625e-08f;
        return sign ? -v : v;
    }
    return lmc_bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}
/* float -> half as Maratyszcza/FP16's fp16_ieee_from_fp32_value, which mlx
 * uses; the float additions do the rounding, so this must be compiled
 * without excess precision (true for SSE/NEON). */
static inline uint16_t lmc_f32_to_f16(float x) {
    uint32_t u = lmc_f32_bits(x);
    uint16_t sign16 = (uint16_t)((u & 0x80000000u) >> 16);
    if (isnan(x)) return (uint16_t)(sign16 | 0x7D00);
    uint32_t expo = u & 0x7f800000u;
    if (expo < 0x38800000u) expo = 0x38800000u;
    expo += 15u << 23;
    float magic = lmc_bits_f32(expo);
    magic += (fabsf(x) * lmc_bits_f32(0x77800000u)) * lmc_bits_f32(0x08800000u);
    uint32_t mb = lmc_f32_bits(magic);
    uint32_t e16 = (mb >> 13) & 0x7c00u;
    uint32_t m16 = mb & 0x0fffu;
    return (uint16_t)(sign16 | (e16 + m16));
}
static inline float lmc_bf16_to_f32(uint16_t b) {
    return lmc_bits_f32((uint32_t)b << 16);
}
static inline uint16_t lmc_f32_to_bf16(float x) {
    if (isnan(x)) return 0x7FC0;
    uint32_t u = lmc_f32_bits(x);
    u += ((u >> 16) & 1u) + 0x7FFFu;
    return (uint16_t)(u >> 16);
}
/* Converts n elements of a float dtype (F32, F16, BF16) to f32. */
void lmc_convert_to_f32(lmc_dtype dt, const void *src, float *dst, int64_t n);
/* Converts n f32 values to a float dtype (F32, F16, BF16). */
void lmc_convert_from_f32(lmc_dtype dt, const float *src, void *dst, int64_t n);

#endif
