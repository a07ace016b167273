/* The generic C kernels of the MLX affine quantized matmul: unpacking,
 * dequantization, the float and integer matvecs and the dense tile product
 * (quant.c dispatches between these and quant_avx2.c). */
#include "kernels/quant_internal.h"

/* ---- unpacking (generic) --------------------------------------------------------- */

/* q of columns [c0, c0 + n) of a row; c0 and n multiples of 32. mlx packs 3/5
 * bits as 8 values in 3/5 bytes and 6 bits as 4 values in 3 bytes
 * (quantize<T, U> / extract_bits in mlx/backend/cpu/quantized.cpp), which is
 * the little-endian bit stream read here. */
void quant_unpack_range(const uint32_t *row, int bits, int64_t c0, int64_t n, uint8_t *q) {
    const uint8_t mask = (uint8_t)((1u << bits) - 1);
    if (bits == 2 || bits == 4 || bits == 8) {
        int per = 32 / bits;
        const uint32_t *wp = row + c0 / per;
        for (int64_t i = 0; i < n; i += per) {
            uint32_t v = *wp++;
            for (int k = 0; k < per; k++) q[i + k] = (uint8_t)((v >> (bits * k)) & mask);
        }
        return;
    }
    int pack = bits == 6 ? 4 : 8; /* values per pack */
    int bpp = bits == 5 ? 5 : 3;  /* bytes per pack */
    const uint8_t *bp = (const uint8_t *)row + c0 / pack * bpp;
    for (int64_t i = 0; i < n; i += pack, bp += bpp) {
        uint64_t v = 0;
        for (int b = 0; b < bpp; b++) v |= (uint64_t)bp[b] << (8 * b);
        for (int k = 0; k < pack; k++) q[i + k] = (uint8_t)((v >> (bits * k)) & mask);
    }
}

void lmc_qunpack_row(const lmc_qweight *w, int64_t row, uint8_t *q) {
    quant_unpack_range(w->packed + row * quant_row_words(w), w->bits, 0, w->cols, q);
}

/* Dequantizes columns [c0, c0+nc) of `row` into out (product and sum rounded
 * separately, as numpy's `q * s + b` in float32). */
void quant_dequant_range(const lmc_qweight *w, int64_t row, int64_t c0, int64_t nc, float *out) {
    uint8_t q[128];
    const int g = w->group_size;
    const uint32_t *rp = w->packed + row * quant_row_words(w);
    int64_t goff = row * quant_groups(w);
    for (int64_t c = c0; c < c0 + nc; c += g) {
        float s = quant_load_scale(w->scales, w->scale_dtype, goff + c / g);
        float b = quant_load_scale(w->biases, w->scale_dtype, goff + c / g);
        quant_unpack_range(rp, w->bits, c, g, q);
        float *o = out + (c - c0);
        for (int i = 0; i < g; i++) {
            float p = s * (float)q[i];
            o[i] = p + b;
        }
    }
}

/* ---- generic kernels ----------------------------------------------------------- */

static float dot_u8_f32(const uint8_t *q, const float *x, int n) {
    float a[8] = {0};
    for (int i = 0; i < n; i += 8)
        for (int k = 0; k < 8; k++) a[k] += (float)q[i + k] * x[i + k];
    return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}

void quant_matvec_generic(const lmc_qweight *w, int64_t r0, int64_t r1, const float *x,
                          const float *gsum, float *y) {
    uint8_t q[128];
    const int g = w->group_size;
    const int64_t ng = quant_groups(w), words = quant_row_words(w);
    for (int64_t r = r0; r < r1; r++) {
        const uint32_t *rp = w->packed + r * words;
        float acc = 0.0f, bacc = 0.0f;
        for (int64_t j = 0; j < ng; j++) {
            float s = quant_load_scale(w->scales, w->scale_dtype, r * ng + j);
            float b = quant_load_scale(w->biases, w->scale_dtype, r * ng + j);
            quant_unpack_range(rp, w->bits, j * g, g, q);
            acc += s * dot_u8_f32(q, x + j * g, g);
            bacc += b * gsum[j];
        }
        y[r - r0] = acc + bacc;
    }
}

/* Integer path, generic: per block, an int32 dot of q and the quantized x;
 * natural column order. */
void quant_matvec_q8_generic(const lmc_qweight *w, int64_t r0, int64_t r1, const quant_qx *x,
                             float *y) {
    uint8_t q[128];
    const int g = w->group_size;
    const int64_t ng = quant_groups(w), words = quant_row_words(w);
    for (int64_t r = r0; r < r1; r++) {
        const uint32_t *rp = w->packed + r * words;
        float acc = 0.0f, bacc = 0.0f;
        for (int64_t j = 0; j < ng; j++) {
            float s = quant_load_scale(w->scales, w->scale_dtype, r * ng + j);
            float b = quant_load_scale(w->biases, w->scale_dtype, r * ng + j);
            quant_unpack_range(rp, w->bits, j * g, g, q);
            const int8_t *xh = x->h + j * g, *xl = x->l + j * g;
            const float *d = x->d + j * (g / QUANT_QBLOCK);
            float ga = 0.0f;
            for (int k = 0; k < g / QUANT_QBLOCK; k++) {
                int32_t is = 0;
                for (int i = k * QUANT_QBLOCK; i < (k + 1) * QUANT_QBLOCK; i++)
                    is += (int32_t)q[i] * (QUANT_QRADIX * xh[i] + xl[i]);
                ga += d[k] * (float)is;
            }
            acc += s * ga;
            bacc += b * x->gsum[j];
        }
        y[r - r0] = acc + bacc;
    }
}

void quant_dense_tile_generic(const float *buf, int nr, int64_t nc, const float *x, int64_t ldx,
                              int64_t T, float *y, int64_t ldy) {
    for (int64_t t = 0; t < T; t++) {
        const float *xt = x + t * ldx;
        for (int i = 0; i < nr; i++) {
            const float *wr = buf + i * nc;
            float a[8] = {0};
            for (int64_t c = 0; c < nc; c += 8)
                for (int k = 0; k < 8; k++) a[k] += wr[c + k] * xt[c + k];
            y[t * ldy + i] += ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
        }
    }
}

/* ---- activation quantization (generic) ----------------------------------------- */

bool quant_qblocks_generic(const float *x, int64_t k0, int64_t n, int64_t nb, int span, int8_t *h,
                           int8_t *l, float *d, int32_t *sums) {
    for (int64_t j = 0; j < n; j++) {
        const float *xb = x + j * QUANT_QBLOCK, *xp;
        const int m = quant_qblock_span(x, j, n, &xp);
        const float amax = quant_absmax(xp, m);
        if (amax < 0.0f) return false;
        float id = amax > 0.0f ? (float)QUANT_QMAX / amax : 0.0f;
        d[j] = amax / (float)QUANT_QMAX;
        int8_t hb[QUANT_QBLOCK], lb[QUANT_QBLOCK];
        int32_t sum = 0;
        for (int i = 0; i < QUANT_QBLOCK; i++) {
            /* round to nearest even through the float adder (|x*id| <= ~16320) */
            float r = (xb[i] * id + 12582912.0f) - 12582912.0f;
            int v = (int)r;
            v = v > QUANT_QMAX ? QUANT_QMAX : v < -QUANT_QMAX ? -QUANT_QMAX : v;
            /* v = 128 h + l, h = sign(v) floor((|v| + 63) / 128): |h| <= 127,
             * |l| <= 64 */
            int hv = v >= 0 ? (v + 63) >> 7 : -((63 - v) >> 7);
            hb[i] = (int8_t)hv;
            lb[i] = (int8_t)(v - QUANT_QRADIX * hv);
            sum += v;
        }
        sums[j] = sum;
        int64_t even, odd;
        quant_qblock_place(k0 + j, nb, span, &even, &odd);
        if (odd < 0) {
            memcpy(h + even, hb, QUANT_QBLOCK);
            memcpy(l + even, lb, QUANT_QBLOCK);
        } else {
            for (int i = 0; i < 16; i++) {
                h[even + i] = hb[2 * i], h[odd + i] = hb[2 * i + 1];
                l[even + i] = lb[2 * i], l[odd + i] = lb[2 * i + 1];
            }
        }
    }
    return true;
}
