/* Tensors over memory-mapped safetensors files, dtypes and conversion. */
#ifndef LMC_TENSOR_H
#define LMC_TENSOR_H

#include "base/base.h"

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

/* Scalar conversions (IEEE half and bfloat16, round-to-nearest-even). */
float lmc_f16_to_f32(uint16_t h);
uint16_t lmc_f32_to_f16(float f);
float lmc_bf16_to_f32(uint16_t b);
uint16_t lmc_f32_to_bf16(float f);
/* Converts n elements of a float dtype (F32, F16, BF16) to f32. */
void lmc_convert_to_f32(lmc_dtype dt, const void *src, float *dst, int64_t n);
/* Converts n f32 values to a float dtype (F32, F16, BF16). */
void lmc_convert_from_f32(lmc_dtype dt, const float *src, void *dst, int64_t n);

#endif
