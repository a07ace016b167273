/* CPU kernels: the only place with SIMD. Row-level primitives come from a
 * table chosen once at start (AVX2/FMA/F16C when the CPU has them, generic C
 * otherwise; LMC_NO_SIMD=1 forces generic), and ops built on them. */
#ifndef LMC_KERNELS_H
#define LMC_KERNELS_H

#include "tensor/tensor.h"

typedef struct lmc_kernel_table {
    const char *name;
    /* sum_i a[i] * b[i] */
    float (*dot_f32)(const float *a, const float *b, int64_t n);
    float (*dot_f16)(const uint16_t *w, const float *x, int64_t n);
    float (*dot_bf16)(const uint16_t *w, const float *x, int64_t n);
    /* out[t] = dot(w, x + t*ldx) for t < 4: one weight row against four
     * activation rows, so each weight element is loaded once. */
    void (*dot4_f32)(const float *w, const float *x, int64_t ldx, int64_t n, float out[4]);
    void (*f16_to_f32)(const uint16_t *src, float *dst, int64_t n);
    void (*bf16_to_f32)(const uint16_t *src, float *dst, int64_t n);
    /* y[i] += a * x[i] */
    void (*axpy)(float a, const float *x, float *y, int64_t n);
    /* x[i] = x[i] / (1 + exp(-x[i])) (SiLU), times u[i] when u is not NULL */
    void (*silu_mul)(float *x, const float *u, int64_t n);
} lmc_kernel_table;

const lmc_kernel_table *lmc_kernels(void);
/* The generic and, when compiled in and supported, the AVX2 tables. */
const lmc_kernel_table *lmc_kernels_generic(void);
const lmc_kernel_table *lmc_kernels_avx2(void); /* NULL when unsupported */
/* Replaces the active table (tests compare paths). */
void lmc_kernels_use(const lmc_kernel_table *table);

/* y[t, r] = sum_c x[t, c] * w[r, c] for a dense float weight w [rows, cols]
 * (F32, F16 or BF16, read in place), x [T, cols], y [T, rows]. Threaded. */
lmc_status lmc_matmul_dense(const lmc_tensor *w, const float *x, int64_t T, float *y);
/* Same over rows [r0, r1) of w only, writing y[t * ldy + (r - r0)]. */
void lmc_matmul_dense_rows(const lmc_tensor *w, int64_t r0, int64_t r1, const float *x, int64_t T,
                           float *y, int64_t ldy);
/* One row of a float weight matrix as f32. */
void lmc_dense_row_f32(const lmc_tensor *w, int64_t row, float *out);

/* C [M, N] = alpha * A [M, K] op(B) + beta * C, row-major with leading
 * dimensions; op(B) = B^T for b_trans (B [N, K]), else B [K, N]. OpenBLAS's
 * sgemm when built with it (its threads follow lmc_get_num_threads), the
 * project's threaded dot products otherwise. */
void lmc_sgemm(bool b_trans, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
               int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
/* y [T, rows] = x [T, cols] w^T as one GEMM over all T rows (w dense F32,
 * F16 or BF16 [rows, cols], read in place; f16/bf16 converted a block of
 * rows at a time). Without OpenBLAS (or memory for the block) it is
 * lmc_matmul_dense_rows. */
void lmc_matmul_gemm(const lmc_tensor *w, const float *x, int64_t T, float *y);
/* Whether lmc_sgemm runs on OpenBLAS. */
bool lmc_have_blas(void);

/* CPU has AVX2, FMA and F16C and the OS saves YMM state (cpuid + xgetbv;
 * cached; kernels/cpu.c). */
bool lmc_cpu_has_avx2_fma_f16c(void);
/* ... and AVX-512 F/BW/VL/DQ + VNNI + BF16 with ZMM state, unless
 * LMC_NO_AVX512 is set (read once). */
bool lmc_cpu_has_avx512(void);
/* ... and AVX-VNNI (vpdpbusd on ymm), unless LMC_NO_AVXVNNI is set (read
 * once). The decode kernels take it where the GEMM level is AVX2. */
bool lmc_cpu_has_avxvnni(void);
/* Tests: allows AVX-VNNI (where the CPU has it) or not; returns
 * lmc_cpu_has_avxvnni() after. Not to be called while a kernel runs. */
bool lmc_cpu_avxvnni_allow(bool allow);

/* HF RMSNorm: x * rsqrt(mean(x^2) + eps) * (w + weight_offset), per row of
 * n; w (F32/F16/BF16) may be NULL for a plain normalization. */
void lmc_rmsnorm(const float *x, const lmc_tensor *w, float weight_offset, float eps, float *y,
                 int64_t rows, int64_t n);
/* In-place numerically stable softmax of n values. */
void lmc_softmax(float *x, int64_t n);

/* Attention's inner loops (attn.c; AVX2 and AVX-512 versions chosen with
 * the CPU, as lmc_kernels, LMC_NO_SIMD=1 forcing generic C and
 * LMC_NO_AVX512=1 AVX2). Rows of keys and values are hd floats apart. */
typedef struct lmc_attn_kernels {
    const char *name;
    /* s[g * lds + i] = dot(q + g * hd, keys + i * hd) for g < group, i < m */
    void (*scores)(const float *q, int64_t group, int64_t hd, const float *keys, int64_t m,
                   float *s, int64_t lds);
    /* x[i] = exp(x[i] - max(x)) for i < n (n >= 1); returns their sum */
    float (*exp_sum)(float *x, int64_t n);
    /* o[g * hd + d] += sum_i p[g * lds + i] * vals[i * hd + d] for g < group */
    void (*values)(const float *p, int64_t lds, int64_t group, const float *vals, int64_t m,
                   int64_t hd, float *o);
    /* the same over f16 keys and values (converted in registers) */
    void (*scores_f16)(const float *q, int64_t group, int64_t hd, const uint16_t *keys, int64_t m,
                       float *s, int64_t lds);
    void (*values_f16)(const float *p, int64_t lds, int64_t group, const uint16_t *vals, int64_t m,
                       int64_t hd, float *o);
} lmc_attn_kernels;

/* How far ahead, in bytes, the AVX2 and AVX-512 attention loops ask for
 * the rows of keys and values they will read next (software prefetch): left
 * to the hardware prefetcher, decode attention over a 2048-token cache read
 * it at 40 of the machine's ~60 GB/s (bench_attention, 2 threads). */
#ifndef LMC_ATTN_PREFETCH
#define LMC_ATTN_PREFETCH 8192
#endif

/* Asks for the 64-byte lines of p[from, from + n) that lie below `end` (a
 * hint: nothing is read). */
static inline void lmc_prefetch_lines(const void *p, int64_t from, int64_t n, int64_t end) {
    for (int64_t l = from; l < from + n && l < end; l += 64)
        __builtin_prefetch((const char *)p + l, 0, 3);
}

/* Rows of values per block in the SIMD values loops, of m rows of
 * row_bytes read by `tiles` output tiles: as many as fill 16 KB (L1 holds
 * them while every tile passes over them), at least 16; all m when one tile
 * covers the output (it reads each row once anyway, and blocks there were
 * 7% slower: AVX-512, head_dim 64, group 4). */
static inline int64_t lmc_attn_value_rows(int64_t m, int64_t row_bytes, int64_t tiles) {
    if (tiles <= 1) return m;
    int64_t r = 16384 / row_bytes;
    return r < 16 ? 16 : r;
}

const lmc_attn_kernels *lmc_attn_kernels_get(void);
const lmc_attn_kernels *lmc_attn_kernels_generic(void);
const lmc_attn_kernels *lmc_attn_kernels_avx2(void);   /* NULL when unsupported */
const lmc_attn_kernels *lmc_attn_kernels_avx512(void); /* NULL when unsupported */
/* Replaces the active table (tests compare paths); NULL restores the
 * CPU's choice. */
void lmc_attn_kernels_use(const lmc_attn_kernels *table);

#endif
