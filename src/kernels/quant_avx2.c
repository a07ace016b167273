/* AVX2/FMA/F16C kernels for MLX affine quantized weights (layout: see
 * quant.h; dequantization w = scale*q + bias per group as in
 * mlx/backend/cpu/quantized.cpp _qmm). Called only when quant_use_avx2().
 *
 * Unpacking:
 * - 8 bits: vpmovzxbd of 8 bytes.
 * - 4 bits (one-token kernel): vpmovzxbd of 8 bytes, then (b & 15) holds
 *   columns 0,2,..,14 and (b >> 4) columns 1,3,..,15 of each block of 16; the
 *   caller permutes x the same way (quant.c's x_permutation), once per call.
 * - any bits (2..6; used for 2, 3, 5, 6 and for 4 in natural order): for 8
 *   consecutive values, vpshufb brings the two bytes that hold value j
 *   (bit offset bits*j) into lane j, vpsrlvd shifts by (bits*j) & 7, vpand
 *   masks. 16 values span 2*bits <= 12 bytes, so one 16-byte load serves two
 *   vectors; loads that would pass the end of the packed matrix go through a
 *   zero-padded copy. */
#include "kernels/quant_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include "kernels/avx2_inline.h"

/* The integer dot products of quant_rows_avx2.h's decode kernels. */
static inline __m256i qr_q4_dot(__m256i lo, __m256i hi, __m256i h0, __m256i h1, __m256i l0,
                                __m256i l1) {
    const __m256i ones = _mm256_set1_epi16(1), radix = _mm256_set1_epi16(QUANT_QRADIX);
    __m256i sh = _mm256_add_epi16(_mm256_maddubs_epi16(lo, h0), _mm256_maddubs_epi16(hi, h1));
    __m256i sl = _mm256_add_epi16(_mm256_maddubs_epi16(lo, l0), _mm256_maddubs_epi16(hi, l1));
    return _mm256_add_epi32(_mm256_madd_epi16(sh, radix), _mm256_madd_epi16(sl, ones));
}

/* q - 128 = (v ^ 0x80) as s8 (the comment above quant_matvec_q8_avx2) */
static inline __m256i qr_q8_dot(__m256i v, __m256i xh, __m256i xl) {
    const __m256i off80 = _mm256_set1_epi8((char)0x80), ones = _mm256_set1_epi16(1);
    const __m256i radix = _mm256_set1_epi16(QUANT_QRADIX);
    __m256i qs = _mm256_xor_si256(v, off80), aq = _mm256_abs_epi8(qs);
    __m256i sh = _mm256_maddubs_epi16(aq, _mm256_sign_epi8(xh, qs));
    __m256i sl = _mm256_maddubs_epi16(aq, _mm256_sign_epi8(xl, qs));
    return _mm256_add_epi32(_mm256_madd_epi16(sh, radix), _mm256_madd_epi16(sl, ones));
}
#define QR_Q8_OFFSET 1
#define QR_NAME(f) f##_avx2
#include "kernels/quant_rows_avx2.h"

#define REG_BARRIER(v) __asm__("" : "+x"(v))

/* ---- generic-bits unpacker ------------------------------------------------- */

typedef struct gen_unpack {
    __m256i shuf[2], shift[2], mask;
    int bytes16; /* bytes that hold 16 values: 2*bits */
} gen_unpack;

/* vpshufb controls and vpsrlvd counts for value e of 16 (two vectors of 8):
 * lane j of a vector takes bytes lo, lo+1 with lo = (bits*e) >> 3 and shifts
 * right by (bits*e) & 7. The 16-byte source is broadcast to both 128-bit
 * halves, so the in-half indices are the same. */
#define GU_LO(b, e) (((e) * (b)) >> 3)
#define GU_LANE(b, e) GU_LO(b, e), GU_LO(b, e) + 1, 0x80, 0x80
#define GU_SHUF(b, e0)                                                                             \
    {                                                                                              \
        GU_LANE(b, e0), GU_LANE(b, e0 + 1), GU_LANE(b, e0 + 2), GU_LANE(b, e0 + 3),                \
            GU_LANE(b, e0 + 4), GU_LANE(b, e0 + 5), GU_LANE(b, e0 + 6), GU_LANE(b, e0 + 7)         \
    }
#define GU_SH(b, e) (((e) * (b)) & 7)
#define GU_SHIFT(b, e0)                                                                            \
    {                                                                                              \
        GU_SH(b, e0), GU_SH(b, e0 + 1), GU_SH(b, e0 + 2), GU_SH(b, e0 + 3), GU_SH(b, e0 + 4),      \
            GU_SH(b, e0 + 5), GU_SH(b, e0 + 6), GU_SH(b, e0 + 7)                                   \
    }
#define GU_BITS(b) [b] = {{GU_SHUF(b, 0), GU_SHUF(b, 8)}, {GU_SHIFT(b, 0), GU_SHIFT(b, 8)}}

static const struct {
    _Alignas(32) uint8_t shuf[2][32];
    _Alignas(32) int32_t shift[2][8];
} gen_tables[7] = {GU_BITS(2), GU_BITS(3), GU_BITS(4), GU_BITS(5), GU_BITS(6)};

static void gen_unpack_init(gen_unpack *u, int bits) {
    for (int h = 0; h < 2; h++) {
        u->shuf[h] = _mm256_loadu_si256((const __m256i *)gen_tables[bits].shuf[h]);
        u->shift[h] = _mm256_loadu_si256((const __m256i *)gen_tables[bits].shift[h]);
    }
    u->mask = _mm256_set1_epi32((1 << bits) - 1);
    u->bytes16 = 2 * bits;
}

/* 16 values starting at byte p as two vectors of 8 floats (natural order). */
static inline void gen_unpack16(const gen_unpack *u, const uint8_t *p, const uint8_t *end,
                                __m256 *q0, __m256 *q1) {
    __m256i v;
    if (end - p >= 16) {
        v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
    } else {
        uint8_t tmp[16] = {0};
        memcpy(tmp, p, (size_t)u->bytes16);
        v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)tmp));
    }
    __m256i a = _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi8(v, u->shuf[0]), u->shift[0]),
                                 u->mask);
    __m256i b = _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi8(v, u->shuf[1]), u->shift[1]),
                                 u->mask);
    *q0 = _mm256_cvtepi32_ps(a);
    *q1 = _mm256_cvtepi32_ps(b);
}

static inline __m256 u8x8_to_ps(const uint8_t *p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}

/* ---- one token -------------------------------------------------------------- */

/* sum over groups [j0, j0+n) of s_j * dot(q_j, x_j) for one row, 4 bits,
 * x permuted (quant.c's x_permutation): vpmovzxbd widens 8 bytes (16 values) to
 * 32-bit lanes; the low nibbles are the even columns, the high nibbles (no
 * mask needed after the shift) the odd ones. */
static inline __m256 row_groups_q4(const uint8_t *p, const float *xp, const float *sc, int n,
                                   int g) {
    const __m256i m4 = _mm256_set1_epi32(0x0F);
    __m256 tot = _mm256_setzero_ps();
    for (int j = 0; j < n; j++) {
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
        for (int h = 0; h < g; h += 32) {
            __m256i b0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
            __m256i b1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 8)));
            a0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(b0, m4)), _mm256_loadu_ps(xp),
                                 a0);
            a1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(b0, 4)),
                                 _mm256_loadu_ps(xp + 8), a1);
            a2 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(b1, m4)),
                                 _mm256_loadu_ps(xp + 16), a2);
            a3 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(b1, 4)),
                                 _mm256_loadu_ps(xp + 24), a3);
            p += 16;
            xp += 32;
        }
        __m256 a = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
        tot = _mm256_fmadd_ps(a, _mm256_broadcast_ss(sc + j), tot);
    }
    return tot;
}

static inline __m256 row_groups_q8(const uint8_t *p, const float *x, const float *sc, int n,
                                   int g) {
    __m256 tot = _mm256_setzero_ps();
    for (int j = 0; j < n; j++) {
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
        for (int h = 0; h < g; h += 32) {
            a0 = _mm256_fmadd_ps(u8x8_to_ps(p), _mm256_loadu_ps(x), a0);
            a1 = _mm256_fmadd_ps(u8x8_to_ps(p + 8), _mm256_loadu_ps(x + 8), a1);
            a2 = _mm256_fmadd_ps(u8x8_to_ps(p + 16), _mm256_loadu_ps(x + 16), a2);
            a3 = _mm256_fmadd_ps(u8x8_to_ps(p + 24), _mm256_loadu_ps(x + 24), a3);
            p += 32;
            x += 32;
        }
        __m256 a = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
        tot = _mm256_fmadd_ps(a, _mm256_broadcast_ss(sc + j), tot);
    }
    return tot;
}

static inline __m256 row_groups_gen(const gen_unpack *u, const uint8_t *p, const uint8_t *end,
                                    const float *x, const float *sc, int n, int g) {
    __m256 tot = _mm256_setzero_ps();
    for (int j = 0; j < n; j++) {
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        for (int h = 0; h < g; h += 16) {
            __m256 q0, q1;
            gen_unpack16(u, p, end, &q0, &q1);
            a0 = _mm256_fmadd_ps(q0, _mm256_loadu_ps(x), a0);
            a1 = _mm256_fmadd_ps(q1, _mm256_loadu_ps(x + 8), a1);
            p += u->bytes16;
            x += 16;
        }
        tot = _mm256_fmadd_ps(_mm256_add_ps(a0, a1), _mm256_broadcast_ss(sc + j), tot);
    }
    return tot;
}

void quant_matvec_avx2(const lmc_qweight *w, int64_t r0, int64_t r1, const float *xp,
                       const float *gsum, float *y) {
    const int bits = w->bits, g = w->group_size;
    const int64_t ng = quant_groups(w), row_bytes = quant_row_words(w) * 4;
    const uint8_t *base = (const uint8_t *)w->packed;
    const uint8_t *end = base + w->rows * row_bytes;
    const int64_t gbytes = (int64_t)g * bits / 8;
    gen_unpack u;
    gen_unpack_init(&u, bits == 8 ? 4 : bits); /* unused for 8 bits */
    _Alignas(32) float sc[SEG_GROUPS], bi[SEG_GROUPS];
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *rp = base + r * row_bytes;
        __m256 tot = _mm256_setzero_ps(), btot = _mm256_setzero_ps();
        float btail = 0.0f;
        for (int64_t j0 = 0; j0 < ng; j0 += SEG_GROUPS) {
            int n = (int)(ng - j0 < SEG_GROUPS ? ng - j0 : SEG_GROUPS);
            load_scales(w->scales, w->scale_dtype, r * ng + j0, n, sc);
            load_scales(w->biases, w->scale_dtype, r * ng + j0, n, bi);
            const uint8_t *p = rp + j0 * gbytes;
            const float *xs = xp + j0 * g;
            if (bits == 4)
                tot = _mm256_add_ps(tot, row_groups_q4(p, xs, sc, n, g));
            else if (bits == 8)
                tot = _mm256_add_ps(tot, row_groups_q8(p, xs, sc, n, g));
            else
                tot = _mm256_add_ps(tot, row_groups_gen(&u, p, end, xs, sc, n, g));
            int j = 0;
            for (; j + 8 <= n; j += 8)
                btot =
                    _mm256_fmadd_ps(_mm256_loadu_ps(bi + j), _mm256_loadu_ps(gsum + j0 + j), btot);
            for (; j < n; j++) btail += bi[j] * gsum[j0 + j];
        }
        y[r - r0] = hsum256(tot) + (hsum256(btot) + btail);
    }
}

/* ---- one token, integer activations (lmc_get_exact() == 0) -------------------
 * x comes quantized per block of 32 columns as two int8 digits (quant_qx):
 * sum_c q_c x_c ~ d_k * sum_c q_c (128 h_c + l_c) with exact int32 block
 * sums, vpmaddubsw (u8 * s8 -> pair sums in int16) per digit, vpmaddwd by
 * 128 and by 1 to int32.
 * - 4 bits: 32 packed bytes hold two blocks; (v & 15) and (v >> 4) & 15 are
 *   their even and odd columns, which h and l hold in that order; pair sums
 *   <= 2*15*128, both halves added as int16 (<= 7680); int32 lanes 0-3 are
 *   block 2p, 4-7 block 2p+1, times the group's scale times d (pair_scales).
 * - 8 bits: q - 128 = (v ^ 0x80) as s8; |q - 128| <= 128 as u8 times the
 *   digit signed by q - 128 (|digit| <= 127, so the negation is exact): pair
 *   sums <= 2*128*127 = 32512 never saturate (u8 q * s8 x would: 2*255*127).
 *   sum q v = sum (q - 128) v + 128 sum v; the last term per group is
 *   x->corr (times the scale, added with the biases). */

/* Bytes ahead of the packed stream to prefetch (the rows follow each other). */
#ifndef Q8_PREFETCH
#define Q8_PREFETCH 4096
#endif

static inline __m256 q4_pair(const uint8_t *p, const int8_t *xh, const int8_t *xl) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i v = _mm256_loadu_si256((const __m256i *)p);
    __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    __m256i s32 = qr_q4_dot(lo, hi, _mm256_loadu_si256((const __m256i *)xh),
                            _mm256_loadu_si256((const __m256i *)(xh + 32)),
                            _mm256_loadu_si256((const __m256i *)xl),
                            _mm256_loadu_si256((const __m256i *)(xl + 32)));
    return _mm256_cvtepi32_ps(s32);
}

static inline __m256i q8_block(const uint8_t *p, const int8_t *xh, const int8_t *xl) {
    return qr_q8_dot(_mm256_loadu_si256((const __m256i *)p),
                     _mm256_loadu_si256((const __m256i *)xh),
                     _mm256_loadu_si256((const __m256i *)xl));
}

void quant_matvec_q8_avx2(const lmc_qweight *w, int64_t r0, int64_t r1, const quant_qx *x,
                          float *y) {
    const int bits = w->bits, g = w->group_size;
    const int64_t ng = quant_groups(w), row_bytes = quant_row_words(w) * 4;
    const uint8_t *base = (const uint8_t *)w->packed;
    const int bpg = g / 32;
    _Alignas(32) float sc[SEG_GROUPS], bi[SEG_GROUPS], sd[2 * SEG_GROUPS];
    const size_t ss = quant_scale_size(w->scale_dtype);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *rp = base + r * row_bytes;
        if (r + Q8_PREFETCH_ROWS < w->rows) {
            /* the scales and biases of a row a few ahead: two more streams */
            size_t off = (size_t)((r + Q8_PREFETCH_ROWS) * ng) * ss;
            for (size_t b = 0; b < (size_t)ng * ss; b += 64) {
                _mm_prefetch((const char *)w->scales + off + b, _MM_HINT_T0);
                _mm_prefetch((const char *)w->biases + off + b, _MM_HINT_T0);
            }
        }
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), btot = _mm256_setzero_ps();
        float tail = 0.0f;
        for (int64_t j0 = 0; j0 < ng; j0 += SEG_GROUPS) {
            int n = (int)(ng - j0 < SEG_GROUPS ? ng - j0 : SEG_GROUPS);
            load_scales(w->scales, w->scale_dtype, r * ng + j0, n, sc);
            load_scales(w->biases, w->scale_dtype, r * ng + j0, n, bi);
            const int64_t k0 = j0 * bpg, nbs = (int64_t)n * bpg; /* blocks of the segment */
            if (bits == 4) {
                const uint8_t *p = rp + k0 * 16;
                const int8_t *xh = x->h + k0 * 32, *xl = x->l + k0 * 32;
                const int64_t np = nbs / 2;
                pair_scales(sc, n, g, x, j0, sd);
                int64_t pp = 0;
                for (; pp + 2 <= np; pp += 2) {
                    _mm_prefetch((const char *)(p + pp * 32 + Q8_PREFETCH), _MM_HINT_T0);
                    a0 = _mm256_fmadd_ps(q4_pair(p + pp * 32, xh + pp * 64, xl + pp * 64),
                                         pair_scale(sd, pp, g), a0);
                    a1 = _mm256_fmadd_ps(
                        q4_pair(p + pp * 32 + 32, xh + pp * 64 + 64, xl + pp * 64 + 64),
                        pair_scale(sd, pp + 1, g), a1);
                }
                if (pp < np)
                    a0 = _mm256_fmadd_ps(q4_pair(p + pp * 32, xh + pp * 64, xl + pp * 64),
                                         pair_scale(sd, pp, g), a0);
                if (nbs & 1) {
                    /* an unpaired last block (g = 32, odd group count): even
                     * columns then odd ones in xq */
                    const int64_t k = k0 + nbs - 1;
                    const __m128i m4 = _mm_set1_epi8(0x0F);
                    __m128i v = _mm_loadu_si128((const __m128i *)(rp + k * 16));
                    const int8_t *xb = x->h + k * 32, *xc = x->l + k * 32;
                    __m128i lo = _mm_and_si128(v, m4), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
                    __m128i sh = _mm_add_epi16(
                        _mm_maddubs_epi16(lo, _mm_loadu_si128((const __m128i *)xb)),
                        _mm_maddubs_epi16(hi, _mm_loadu_si128((const __m128i *)(xb + 16))));
                    __m128i sl = _mm_add_epi16(
                        _mm_maddubs_epi16(lo, _mm_loadu_si128((const __m128i *)xc)),
                        _mm_maddubs_epi16(hi, _mm_loadu_si128((const __m128i *)(xc + 16))));
                    __m128i s32 = _mm_add_epi32(_mm_madd_epi16(sh, _mm_set1_epi16(QUANT_QRADIX)),
                                                _mm_madd_epi16(sl, _mm_set1_epi16(1)));
                    s32 = _mm_add_epi32(s32, _mm_shuffle_epi32(s32, 0x4E));
                    s32 = _mm_add_epi32(s32, _mm_shuffle_epi32(s32, 0xB1));
                    tail += x->d[k] * (float)_mm_cvtsi128_si32(s32) * sc[n - 1];
                }
            } else {
                const uint8_t *p = rp + k0 * 32;
                const int8_t *xh = x->h + k0 * 32, *xl = x->l + k0 * 32;
                const float *d = x->d + k0;
                for (int j = 0; j < n; j++) {
                    __m256 ga = _mm256_setzero_ps();
                    for (int b = 0; b < bpg; b++, p += 32, xh += 32, xl += 32, d++) {
                        if (!(b & 1)) _mm_prefetch((const char *)(p + Q8_PREFETCH), _MM_HINT_T0);
                        ga = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q8_block(p, xh, xl)),
                                             _mm256_broadcast_ss(d), ga);
                    }
                    if (j & 1)
                        a1 = _mm256_fmadd_ps(ga, _mm256_broadcast_ss(sc + j), a1);
                    else
                        a0 = _mm256_fmadd_ps(ga, _mm256_broadcast_ss(sc + j), a0);
                }
            }
            /* biases times the quantized group sums (+ the 8-bit offset term) */
            const float *gs = x->gsum + j0, *cr = x->corr + j0;
            int j = 0;
            if (bits == 8) {
                for (; j + 8 <= n; j += 8)
                    btot = _mm256_fmadd_ps(
                        _mm256_loadu_ps(bi + j), _mm256_loadu_ps(gs + j),
                        _mm256_fmadd_ps(_mm256_loadu_ps(sc + j), _mm256_loadu_ps(cr + j), btot));
                for (; j < n; j++) tail += bi[j] * gs[j] + sc[j] * cr[j];
            } else {
                for (; j + 8 <= n; j += 8)
                    btot = _mm256_fmadd_ps(_mm256_loadu_ps(bi + j), _mm256_loadu_ps(gs + j), btot);
                for (; j < n; j++) tail += bi[j] * gs[j];
            }
        }
        y[r - r0] = hsum256(_mm256_add_ps(a0, a1)) + (hsum256(btot) + tail);
    }
}

/* ---- several tokens: dequantize a tile, then dense -------------------------------- */

void quant_dequant_tile_avx2(const lmc_qweight *w, int64_t r0, int nr, int64_t c0, int64_t nc,
                             float *buf) {
    const int bits = w->bits, g = w->group_size;
    const int64_t ng = quant_groups(w), row_bytes = quant_row_words(w) * 4;
    const uint8_t *base = (const uint8_t *)w->packed;
    const uint8_t *end = base + w->rows * row_bytes;
    gen_unpack u;
    gen_unpack_init(&u, bits == 8 ? 4 : bits); /* unused for 8 bits */
    _Alignas(32) float sc[SEG_GROUPS], bi[SEG_GROUPS];
    for (int i = 0; i < nr; i++) {
        const int64_t r = r0 + i;
        const uint8_t *rp = base + r * row_bytes;
        float *out = buf + (int64_t)i * nc;
        for (int64_t cs = c0; cs < c0 + nc; cs += (int64_t)SEG_GROUPS * g) {
            int64_t cn =
                c0 + nc - cs < (int64_t)SEG_GROUPS * g ? c0 + nc - cs : (int64_t)SEG_GROUPS * g;
            int n = (int)(cn / g);
            load_scales(w->scales, w->scale_dtype, r * ng + cs / g, n, sc);
            load_scales(w->biases, w->scale_dtype, r * ng + cs / g, n, bi);
            for (int j = 0; j < n; j++) {
                const int64_t c = cs + (int64_t)j * g;
                const __m256 s = _mm256_broadcast_ss(sc + j), b = _mm256_broadcast_ss(bi + j);
                float *o = out + (c - c0);
                /* product and sum rounded separately (no FMA), as numpy/mlx in f32 */
                if (bits == 8) {
                    const uint8_t *p = rp + c;
                    _mm_prefetch((const char *)((uintptr_t)p + QUANT_CHUNK_COLS), _MM_HINT_T0);
                    _mm_prefetch((const char *)((uintptr_t)p + QUANT_CHUNK_COLS + 64), _MM_HINT_T0);
                    for (int k = 0; k < g; k += 8)
                        _mm256_storeu_ps(o + k,
                                         _mm256_add_ps(_mm256_mul_ps(u8x8_to_ps(p + k), s), b));
                } else {
                    const uint8_t *p = rp + c * bits / 8;
                    /* the next chunk of this row: the tile walks 4 short streams */
                    _mm_prefetch((const char *)((uintptr_t)p + QUANT_CHUNK_COLS * bits / 8),
                                 _MM_HINT_T0);
                    for (int k = 0; k < g; k += 16, p += u.bytes16) {
                        __m256 q0, q1;
                        gen_unpack16(&u, p, end, &q0, &q1);
                        _mm256_storeu_ps(o + k, _mm256_add_ps(_mm256_mul_ps(q0, s), b));
                        _mm256_storeu_ps(o + k + 8, _mm256_add_ps(_mm256_mul_ps(q1, s), b));
                    }
                }
            }
        }
    }
}

void quant_dense_tile_avx2(const float *buf, int nr, int64_t nc, const float *x, int64_t ldx,
                           int64_t T, float *y, int64_t ldy) {
    if (nr < QUANT_TILE_ROWS) {
        /* rows past nr are not decoded: dot them one by one */
        for (int64_t t = 0; t < T; t++)
            for (int i = 0; i < nr; i++) {
                __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
                const float *wr = buf + i * nc, *xt = x + t * ldx;
                for (int64_t c = 0; c < nc; c += 16) {
                    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(wr + c), _mm256_loadu_ps(xt + c), a0);
                    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(wr + c + 8), _mm256_loadu_ps(xt + c + 8),
                                         a1);
                }
                y[t * ldy + i] += hsum256(_mm256_add_ps(a0, a1));
            }
        return;
    }
    const float *w0 = buf, *w1 = buf + nc, *w2 = buf + 2 * nc, *w3 = buf + 3 * nc;
    int64_t t = 0;
    for (; t + 2 <= T; t += 2) {
        const float *xa = x + t * ldx, *xb = xa + ldx;
        __m256 a00 = _mm256_setzero_ps(), a01 = _mm256_setzero_ps();
        __m256 a10 = _mm256_setzero_ps(), a11 = _mm256_setzero_ps();
        __m256 a20 = _mm256_setzero_ps(), a21 = _mm256_setzero_ps();
        __m256 a30 = _mm256_setzero_ps(), a31 = _mm256_setzero_ps();
        for (int64_t c = 0; c < nc; c += 8) {
            __m256 x0 = _mm256_loadu_ps(xa + c), x1 = _mm256_loadu_ps(xb + c);
            __m256 v0 = _mm256_loadu_ps(w0 + c), v1 = _mm256_loadu_ps(w1 + c);
            __m256 v2 = _mm256_loadu_ps(w2 + c), v3 = _mm256_loadu_ps(w3 + c);
            /* keep each weight vector in a register: otherwise the compiler
             * folds it into both FMAs as a memory operand (two loads) */
            REG_BARRIER(v0);
            REG_BARRIER(v1);
            REG_BARRIER(v2);
            REG_BARRIER(v3);
            a00 = _mm256_fmadd_ps(v0, x0, a00);
            a01 = _mm256_fmadd_ps(v0, x1, a01);
            a10 = _mm256_fmadd_ps(v1, x0, a10);
            a11 = _mm256_fmadd_ps(v1, x1, a11);
            a20 = _mm256_fmadd_ps(v2, x0, a20);
            a21 = _mm256_fmadd_ps(v2, x1, a21);
            a30 = _mm256_fmadd_ps(v3, x0, a30);
            a31 = _mm256_fmadd_ps(v3, x1, a31);
        }
        float *ya = y + t * ldy, *yb = ya + ldy;
        ya[0] += hsum256(a00), ya[1] += hsum256(a10), ya[2] += hsum256(a20), ya[3] += hsum256(a30);
        yb[0] += hsum256(a01), yb[1] += hsum256(a11), yb[2] += hsum256(a21), yb[3] += hsum256(a31);
    }
    for (; t < T; t++) {
        const float *xa = x + t * ldx;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
        for (int64_t c = 0; c < nc; c += 8) {
            __m256 x0 = _mm256_loadu_ps(xa + c);
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + c), x0, a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + c), x0, a1);
            a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + c), x0, a2);
            a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + c), x0, a3);
        }
        float *ya = y + t * ldy;
        ya[0] += hsum256(a0), ya[1] += hsum256(a1), ya[2] += hsum256(a2), ya[3] += hsum256(a3);
    }
}

/* ---- activation quantization (quant_qblocks_generic's values) ---- */

/* v (16 int16) -> its digits h, l (v = 128 h + l): h = sign(v) * ((|v| +
 * 63) >> 7), as the generic code. */
static inline void split_digits(__m256i v, __m256i *h, __m256i *l) {
    const __m256i q =
        _mm256_srli_epi16(_mm256_add_epi16(_mm256_abs_epi16(v), _mm256_set1_epi16(63)), 7);
    *h = _mm256_sign_epi16(q, v);
    *l = _mm256_sub_epi16(v, _mm256_slli_epi16(*h, 7));
}

/* 32 int16 (a: columns 0-15, b: 16-31) -> 32 int8 in column order, or
 * (split) the 16 even columns then the 16 odd ones. */
static inline __m256i pack_digits(__m256i a, __m256i b, bool split) {
    __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi16(a, b), 0xD8);
    if (!split) return p;
    const __m256i eo = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2,
                                        4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    return _mm256_permute4x64_epi64(_mm256_shuffle_epi8(p, eo), 0xD8);
}

bool quant_qblocks_avx2(const float *x, int64_t k0, int64_t n, int64_t nb, int span, int8_t *h,
                        int8_t *l, float *d, int32_t *sums) {
    const __m256i vmax = _mm256_set1_epi32(QUANT_QMAX), vmin = _mm256_set1_epi32(-QUANT_QMAX);
    for (int64_t j = 0; j < n; j++) {
        const float *xb = x + j * QUANT_QBLOCK, *xp;
        const int m = quant_qblock_span(x, j, n, &xp);
        const float amax = lmc_absmax_avx2(xp, m);
        if (amax < 0.0f) return false;
        const float id = amax > 0.0f ? (float)QUANT_QMAX / amax : 0.0f;
        d[j] = amax / (float)QUANT_QMAX;
        /* round to nearest even (the MXCSR default), as the generic code's
         * float adder does for |x * id| < 2^22 */
        const __m256 vid = _mm256_set1_ps(id);
        __m256i q[4], s = _mm256_setzero_si256();
        for (int i = 0; i < 4; i++) {
            q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + 8 * i), vid));
            q[i] = _mm256_max_epi32(_mm256_min_epi32(q[i], vmax), vmin);
            s = _mm256_add_epi32(s, q[i]);
        }
        sums[j] = lmc_hsum_epi32_avx2(s);
        /* int16 in column order: packs interleaves the 128-bit lanes */
        __m256i w0 = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[0], q[1]), 0xD8);
        __m256i w1 = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[2], q[3]), 0xD8);
        __m256i h0, l0, h1, l1;
        split_digits(w0, &h0, &l0);
        split_digits(w1, &h1, &l1);
        int64_t even, odd;
        quant_qblock_place(k0 + j, nb, span, &even, &odd);
        const __m256i hb = pack_digits(h0, h1, odd >= 0), lb = pack_digits(l0, l1, odd >= 0);
        if (odd < 0) {
            _mm256_storeu_si256((__m256i *)(h + even), hb);
            _mm256_storeu_si256((__m256i *)(l + even), lb);
        } else {
            _mm_storeu_si128((__m128i *)(h + even), _mm256_castsi256_si128(hb));
            _mm_storeu_si128((__m128i *)(h + odd), _mm256_extracti128_si256(hb, 1));
            _mm_storeu_si128((__m128i *)(l + even), _mm256_castsi256_si128(lb));
            _mm_storeu_si128((__m128i *)(l + odd), _mm256_extracti128_si256(lb, 1));
        }
    }
    return true;
}

#else /* no AVX2 at compile time: never called (quant_use_avx2 is false) */

void quant_matvec_q4_rows_avx2(const lmc_qweight *w, int64_t r0, int64_t r1, const quant_qx *x,
                               float *y) {
    (void)w, (void)r0, (void)r1, (void)x, (void)y;
}

void quant_matvec_q8_rows_avx2(const lmc_qweight *w, int64_t r0, int64_t r1, const quant_qx *x,
                               float *y) {
    (void)w, (void)r0, (void)r1, (void)x, (void)y;
}
void quant_matvec_q8_avx2(const lmc_qweight *w, int64_t r0, int64_t r1, const quant_qx *x,
                          float *y) {
    (void)w, (void)r0, (void)r1, (void)x, (void)y;
}

bool quant_qblocks_avx2(const float *x, int64_t k0, int64_t n, int64_t nb, int span, int8_t *h,
                        int8_t *l, float *d, int32_t *sums) {
    return quant_qblocks_generic(x, k0, n, nb, span, h, l, d, sums);
}

void quant_matvec_avx2(const lmc_qweight *w, int64_t r0, int64_t r1, const float *xp,
                       const float *gsum, float *y) {
    (void)w, (void)r0, (void)r1, (void)xp, (void)gsum, (void)y;
}
void quant_dequant_tile_avx2(const lmc_qweight *w, int64_t r0, int nr, int64_t c0, int64_t nc,
                             float *buf) {
    (void)w, (void)r0, (void)nr, (void)c0, (void)nc, (void)buf;
}
void quant_dense_tile_avx2(const float *buf, int nr, int64_t nc, const float *x, int64_t ldx,
                           int64_t T, float *y, int64_t ldy) {
    (void)buf, (void)nr, (void)nc, (void)x, (void)ldx, (void)T, (void)y, (void)ldy;
}

#endif
