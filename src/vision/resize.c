/* PIL's resize (Pillow src/libImaging/Resample.c, ImagingResample) for
 * 8-bit RGB images, which Hugging Face's PIL-based image processors call
 * (transformers 4, and 5's *ImageProcessorPil), and the same algorithm as
 * PyTorch runs it on uint8 images (aten UpSampleKernel.cpp,
 * _compute_index_ranges_int16_weights and the AVX kernels of
 * UpSampleKernelAVXAntialias.h, through torchvision's resize with
 * antialias, which transformers 5's default image processors call): the
 * only difference is the fixed-point precision of the weights, 22 bits in
 * PIL, in torch the most bits (< 22) that keep the largest weight under
 * 2^15 (int16 weights). The algorithm:
 * - per output pixel xx the source window is centered at
 *   center = (xx + 0.5) * scale, scale = in / out; when shrinking the
 *   filter is stretched by scale (support * scale, arguments / scale), which
 *   is PIL's antialiasing; window bounds are rounded as (int)(c -+ s + 0.5);
 * - weights (double) are normalized to sum 1, then converted to fixed point
 *   with 22 fraction bits, rounded half away from zero;
 * - each pass accumulates in integers from 1 << 21 and clips >> 22 to
 *   0..255: the horizontal pass first (into uint8), then the vertical, each
 *   skipped when that dimension does not change. */
#include "vision/vision.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PIL_PRECISION_BITS (32 - 8 - 2)

static double bicubic_filter(double x) {
    const double a = -0.5; /* PIL's bicubic (Keys, a = -0.5) */
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

static double bilinear_filter(double x) {
    if (x < 0.0) x = -x;
    if (x < 1.0) return 1.0 - x;
    return 0.0;
}

typedef struct coeffs {
    int32_t ksize;
    int precision;   /* fraction bits of the fixed-point weights */
    int32_t *bounds; /* [out, 2]: first source index, count */
    int32_t *k;      /* [out, ksize] fixed-point weights */
} coeffs;

static void coeffs_free(coeffs *c) {
    free(c->bounds);
    free(c->k);
}

/* precompute_coeffs + normalize_coeffs_8bpc of Resample.c */
static lmc_status precompute(int32_t in_size, int32_t out_size, double (*filter)(double),
                             double filter_support, bool torch_weights, coeffs *c) {
    memset(c, 0, sizeof *c);
    double scale = (double)in_size / out_size;
    double filterscale = scale < 1.0 ? 1.0 : scale;
    double support = filter_support * filterscale;
    int64_t ksize = (int64_t)ceil(support) * 2 + 1;
    if (ksize > (1 << 24) / 2)
        return lmc_error(LMC_ERR_LIMIT, "resize: %d -> %d pixels needs too wide a filter", in_size,
                         out_size);
    c->ksize = (int32_t)ksize;
    double *pre = malloc((size_t)out_size * (size_t)ksize * sizeof *pre);
    c->bounds = malloc((size_t)out_size * 2 * sizeof *c->bounds);
    c->k = malloc((size_t)out_size * (size_t)ksize * sizeof *c->k);
    if (!pre || !c->bounds || !c->k) {
        free(pre);
        coeffs_free(c);
        return lmc_error(LMC_ERR_NOMEM, "resize: out of memory for the filter weights");
    }
    double ss = 1.0 / filterscale;
    for (int32_t xx = 0; xx < out_size; xx++) {
        double center = (xx + 0.5) * scale;
        double ww = 0.0;
        int32_t xmin = (int32_t)(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int32_t xmax = (int32_t)(center + support + 0.5);
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        double *k = pre + (size_t)xx * (size_t)ksize;
        int32_t x = 0;
        for (; x < xmax; x++) {
            double w = filter((x + xmin - center + 0.5) * ss);
            k[x] = w;
            ww += w;
        }
        for (x = 0; x < xmax; x++)
            if (ww != 0.0) k[x] /= ww;
        for (; x < ksize; x++) k[x] = 0;
        c->bounds[xx * 2] = xmin;
        c->bounds[xx * 2 + 1] = xmax;
    }
    c->precision = PIL_PRECISION_BITS;
    if (torch_weights) {
        double wt_max = 0;
        for (int64_t i = 0; i < (int64_t)out_size * ksize; i++)
            wt_max = pre[i] > wt_max ? pre[i] : wt_max;
        int p = 0;
        for (p = 0; p < 22; ++p)
            if ((int)(0.5 + wt_max * (1 << (p + 1))) >= (1 << 15)) break;
        c->precision = p;
    }
    for (int64_t i = 0; i < (int64_t)out_size * ksize; i++)
        c->k[i] = pre[i] < 0 ? (int32_t)(-0.5 + pre[i] * (1 << c->precision))
                             : (int32_t)(0.5 + pre[i] * (1 << c->precision));
    free(pre);
    return LMC_OK;
}

static inline uint8_t clip8(int64_t v, int precision) {
    if (v >= ((int64_t)1 << precision << 8)) return 255;
    if (v <= 0) return 0;
    return (uint8_t)(v >> precision);
}

/* out [rows, out_w, 3] from in [rows, in_w, 3] */
static void horizontal(const uint8_t *in, int32_t in_w, int32_t rows, const coeffs *c,
                       int32_t out_w, uint8_t *out) {
    for (int32_t y = 0; y < rows; y++) {
        const uint8_t *src = in + (size_t)y * (size_t)in_w * 3;
        uint8_t *dst = out + (size_t)y * (size_t)out_w * 3;
        for (int32_t xx = 0; xx < out_w; xx++) {
            int32_t xmin = c->bounds[xx * 2], xmax = c->bounds[xx * 2 + 1];
            const int32_t *k = c->k + (size_t)xx * (size_t)c->ksize;
            int64_t s0 = (int64_t)1 << c->precision >> 1, s1 = s0, s2 = s0;
            for (int32_t x = 0; x < xmax; x++) {
                const uint8_t *p = src + (size_t)(x + xmin) * 3;
                s0 += p[0] * (int64_t)k[x];
                s1 += p[1] * (int64_t)k[x];
                s2 += p[2] * (int64_t)k[x];
            }
            dst[xx * 3] = clip8(s0, c->precision);
            dst[xx * 3 + 1] = clip8(s1, c->precision);
            dst[xx * 3 + 2] = clip8(s2, c->precision);
        }
    }
}

/* out [out_h, w, 3] from in [in_h, w, 3] */
static void vertical(const uint8_t *in, int32_t w, const coeffs *c, int32_t out_h, uint8_t *out) {
    size_t row = (size_t)w * 3;
    for (int32_t yy = 0; yy < out_h; yy++) {
        int32_t ymin = c->bounds[yy * 2], ymax = c->bounds[yy * 2 + 1];
        const int32_t *k = c->k + (size_t)yy * (size_t)c->ksize;
        uint8_t *dst = out + (size_t)yy * row;
        for (size_t i = 0; i < row; i++) {
            int64_t s = (int64_t)1 << c->precision >> 1;
            for (int32_t y = 0; y < ymax; y++)
                s += in[(size_t)(y + ymin) * row + i] * (int64_t)k[y];
            dst[i] = clip8(s, c->precision);
        }
    }
}

lmc_status lmc_image_resize(const lmc_image *in, int32_t width, int32_t height, int resample,
                            lmc_resize_backend backend, lmc_image *out) {
    if (!out) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_image_resize: out is NULL");
    memset(out, 0, sizeof *out);
    if (!in || !in->rgb || in->width <= 0 || in->height <= 0)
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_image_resize: no image");
    if (width <= 0 || height <= 0)
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_image_resize: target size %d x %d", width,
                         height);
    if ((uint64_t)width * (uint64_t)height > LMC_IMAGE_MAX_PIXELS)
        return lmc_error(LMC_ERR_LIMIT, "resize: %d x %d is over the limit of %u pixels", width,
                         height, (unsigned)LMC_IMAGE_MAX_PIXELS);
    double (*filter)(double);
    double support;
    if (resample == LMC_RESAMPLE_BICUBIC) {
        filter = bicubic_filter;
        support = 2.0;
    } else if (resample == LMC_RESAMPLE_BILINEAR) {
        filter = bilinear_filter;
        support = 1.0;
    } else {
        return lmc_error(LMC_ERR_UNSUPPORTED,
                         "resize: resample filter %d is not supported (2 = bilinear, 3 = bicubic)",
                         resample);
    }
    bool need_h = width != in->width, need_v = height != in->height;
    coeffs ch = {0}, cv = {0};
    lmc_status st = LMC_OK;
    bool tw = backend == LMC_RESIZE_TORCH;
    if (need_h) st = precompute(in->width, width, filter, support, tw, &ch);
    if (st == LMC_OK && need_v) st = precompute(in->height, height, filter, support, tw, &cv);
    uint8_t *tmp = NULL;
    if (st == LMC_OK) {
        out->rgb = malloc((size_t)width * (size_t)height * 3);
        if (need_h && need_v) tmp = malloc((size_t)width * (size_t)in->height * 3);
        if (!out->rgb || (need_h && need_v && !tmp))
            st = lmc_error(LMC_ERR_NOMEM, "resize: out of memory for %d x %d", width, height);
    }
    if (st == LMC_OK) {
        /* PIL runs the horizontal pass over the source rows the vertical
         * pass reads; over all rows the result is the same. */
        if (need_h && need_v) {
            horizontal(in->rgb, in->width, in->height, &ch, width, tmp);
            vertical(tmp, width, &cv, height, out->rgb);
        } else if (need_h) {
            horizontal(in->rgb, in->width, in->height, &ch, width, out->rgb);
        } else if (need_v) {
            vertical(in->rgb, width, &cv, height, out->rgb);
        } else {
            memcpy(out->rgb, in->rgb, (size_t)width * (size_t)height * 3);
        }
        out->width = width;
        out->height = height;
    }
    free(tmp);
    coeffs_free(&ch);
    coeffs_free(&cv);
    if (st != LMC_OK) lmc_image_free(out);
    return st;
}
