/* The MLX affine quantizer, reproducing mx.quantize bit for bit.
 *
 * LMC_QUANT_MLX_CPU follows `quantize<T, U>` in mlx/backend/cpu/quantized.cpp
 * (run by fast::Quantize::eval_cpu; the graph fallback `affine_quantize` in
 * mlx/ops.cpp computes the same): float32 arithmetic on the values of the
 * T-typed input, std::min/std::max, std::rint, q computed from the unrounded
 * float scale and bias, which are rounded to T only when stored.
 * LMC_QUANT_MLX_GPU follows the Metal kernel `affine_quantize` in
 * mlx/backend/metal/kernels/quantized.h (same as
 * mlx/backend/cuda/quantized/affine_quantize.cu): the min/max reduction starts
 * from w_min = Limits<T>::max and w_max = 0, and it rounds with Metal `round`
 * (halfway cases away from zero). */
#include "kernels/quant_internal.h"

#include <float.h>

/* std::max / std::min on floats: (a < b) ? b : a and (b < a) ? b : a. */
static inline float std_max(float a, float b) {
    return a < b ? b : a;
}
static inline float std_min(float a, float b) {
    return b < a ? b : a;
}

/* The value of static_cast<T>(x) for T = dtype, as float. */
static inline float round_to(lmc_dtype dt, float x) {
    if (dt == LMC_DTYPE_F16) return lmc_f16_to_f32(lmc_f32_to_f16(x));
    if (dt == LMC_DTYPE_BF16) return lmc_bf16_to_f32(lmc_f32_to_bf16(x));
    return x;
}

static inline void store_to(lmc_dtype dt, void *p, int64_t i, float x) {
    if (dt == LMC_DTYPE_F16)
        ((uint16_t *)p)[i] = lmc_f32_to_f16(x);
    else if (dt == LMC_DTYPE_BF16)
        ((uint16_t *)p)[i] = lmc_f32_to_bf16(x);
    else
        ((float *)p)[i] = x;
}

/* Limits<T>::max of the Metal kernel, as float. */
static float dtype_max(lmc_dtype dt) {
    if (dt == LMC_DTYPE_F16) return 65504.0f;
    if (dt == LMC_DTYPE_BF16) return lmc_bf16_to_f32(0x7F7F);
    return FLT_MAX;
}

typedef struct quant_job {
    const float *w;
    int64_t cols;
    int bits, group_size;
    lmc_dtype dt;
    lmc_quant_variant variant;
    uint32_t *packed;
    void *scales, *biases;
} quant_job;

static void quantize_rows(void *ctx, int64_t r0, int64_t r1, int worker) {
    const quant_job *j = ctx;
    (void)worker;
    const int bits = j->bits, g = j->group_size;
    const bool gpu = j->variant == LMC_QUANT_MLX_GPU;
    const float n_bins = (float)((1 << bits) - 1);
    const float eps = (float)1e-7; /* `float eps = 1e-7;` */
    const int64_t ng = j->cols / g, words = j->cols * bits / 32;
    float v[128];
    for (int64_t r = r0; r < r1; r++) {
        uint32_t *out = j->packed + r * words;
        memset(out, 0, (size_t)words * sizeof(uint32_t));
        for (int64_t k = 0; k < ng; k++) {
            const float *src = j->w + r * j->cols + k * g;
            float w_min = gpu ? dtype_max(j->dt) : INFINITY;
            float w_max = gpu ? 0.0f : -INFINITY;
            for (int i = 0; i < g; i++) {
                v[i] = round_to(j->dt, src[i]);
                w_max = std_max(w_max, v[i]);
                w_min = std_min(w_min, v[i]);
            }
            bool mask = fabsf(w_min) > fabsf(w_max);
            float scale = std_max((w_max - w_min) / n_bins, eps);
            scale = mask ? scale : -scale;
            float edge = mask ? w_min : w_max;
            float q0 = gpu ? roundf(edge / scale) : rintf(edge / scale);
            float bias = 0.0f;
            if (q0 != 0.0f) {
                scale = edge / q0;
                bias = edge;
            }
            for (int i = 0; i < g; i++) {
                float q;
                if (gpu) {
                    /* uint8_t val = min(round((w - bias) / scale), n_bins); */
                    q = fminf(roundf((v[i] - bias) / scale), n_bins);
                } else {
                    q = rintf((v[i] - bias) / scale);
                    q = std_min(std_max(q, 0.0f), n_bins);
                }
                /* never negative for finite input; NaN input gives q = 0 */
                uint32_t qi = q > 0.0f ? (uint32_t)q : 0u;
                int64_t bit = (k * g + i) * bits;
                int64_t wi = bit >> 5;
                int sh = (int)(bit & 31);
                out[wi] |= qi << sh;
                if (sh + bits > 32) out[wi + 1] |= qi >> (32 - sh);
            }
            store_to(j->dt, j->scales, r * ng + k, scale);
            store_to(j->dt, j->biases, r * ng + k, bias);
        }
    }
}

lmc_status lmc_quantize_affine_ex(const float *w, int64_t rows, int64_t cols, int bits,
                                  int group_size, lmc_dtype scale_dtype, lmc_quant_variant variant,
                                  uint32_t *packed, void *scales, void *biases) {
    if (!w || !packed || !scales || !biases)
        return lmc_error(LMC_ERR_INVALID_ARG, "quantize: NULL argument");
    if (variant != LMC_QUANT_MLX_CPU && variant != LMC_QUANT_MLX_GPU)
        return lmc_error(LMC_ERR_INVALID_ARG, "quantize: unknown variant %d", (int)variant);
    /* Reuse the layout checks; the pointers only need to be non-NULL. */
    lmc_qweight q = {.packed = packed,
                     .scales = scales,
                     .biases = biases,
                     .scale_dtype = scale_dtype,
                     .bits = bits,
                     .group_size = group_size,
                     .rows = rows,
                     .cols = cols};
    lmc_status st = lmc_qweight_check(&q, "quantize");
    if (st != LMC_OK) return st;
    quant_job j = {.w = w,
                   .cols = cols,
                   .bits = bits,
                   .group_size = group_size,
                   .dt = scale_dtype,
                   .variant = variant,
                   .packed = packed,
                   .scales = scales,
                   .biases = biases};
    int64_t grain = 65536 / cols;
    lmc_parallel_for(rows, grain < 1 ? 1 : grain, quantize_rows, &j);
    return LMC_OK;
}

lmc_status lmc_quantize_affine(const float *w, int64_t rows, int64_t cols, int bits, int group_size,
                               lmc_dtype scale_dtype, uint32_t *packed, void *scales,
                               void *biases) {
    return lmc_quantize_affine_ex(w, rows, cols, bits, group_size, scale_dtype, LMC_QUANT_MLX_CPU,
                                  packed, scales, biases);
}
