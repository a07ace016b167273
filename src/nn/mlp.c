/* Feed-forward blocks: SwiGLU / GeGLU (gated) and plain two-layer MLPs. */
#include "nn/decoder.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void act_range(lmc_activation act, float *x, const float *u, int64_t b, int64_t e) {
    switch (act) {
    case LMC_ACT_SILU: {
        /* the exact path keeps libm's expf; the fast one takes the table's
         * (AVX2: a polynomial, within 2 ulp) */
        const lmc_kernel_table *k = lmc_get_exact() ? lmc_kernels_generic() : lmc_kernels();
        k->silu_mul(x + b, u ? u + b : NULL, e - b);
        return;
    }
    case LMC_ACT_GELU_TANH: /* transformers GELUTanh / PytorchGELUTanh */
        for (int64_t i = b; i < e; i++) {
            float v = x[i];
            x[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        }
        break;
    case LMC_ACT_GELU:
        for (int64_t i = b; i < e; i++)
            x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.7071067811865476f));
        break;
    }
    if (u)
        for (int64_t i = b; i < e; i++) x[i] *= u[i];
}

typedef struct act_job {
    lmc_activation act;
    float *x;
    const float *u;
} act_job;

#define ACT_CHUNK 2048

static void act_body(void *ctx, int64_t b, int64_t e, int worker) {
    (void)worker;
    const act_job *j = ctx;
    act_range(j->act, j->x, j->u, b * ACT_CHUNK, e * ACT_CHUNK);
}

/* x = act(x) (times u when u is not NULL), elementwise: the same values
 * however the work is split, so a prefill batch's (millions of exps) goes to
 * the thread pool; a decode step's stays on this thread (a join per layer
 * costs more than it saves, most of all when a core is busy). */
static void act_apply(lmc_activation act, float *x, const float *u, int64_t n) {
    int64_t chunks = n / ACT_CHUNK;
    if (chunks < 32) {
        act_range(act, x, u, 0, n);
        return;
    }
    act_job j = {act, x, u};
    lmc_parallel_for(chunks, 1, act_body, &j);
    act_range(act, x, u, chunks * ACT_CHUNK, n);
}

void lmc_activation_apply(lmc_activation act, float *x, int64_t n) {
    act_apply(act, x, NULL, n);
}

lmc_status lmc_mlp_forward(const lmc_mlp *m, const float *x, int64_t T, float *y) {
    int64_t I = m->down.in;
    bool owned, owned2;
    float *g = lmc_tmp_get(LMC_SCRATCH_MLP, (size_t)(T * I * 2) * sizeof(float), &owned);
    if (!g)
        return lmc_error(LMC_ERR_NOMEM, "out of memory in the MLP for %lld tokens", (long long)T);
    float *u = g + T * I;
    if (!m->gated) {
        lmc_linear_forward(&m->up, x, T, g);
        lmc_activation_apply(m->act, g, T * I);
    } else if (m->fused_gate_up) {
        /* gate_up_proj output per token: [gate (I) | up (I)] */
        float *gu = u; /* reuse: T * 2I would not fit in u; compute into a fresh buffer */
        float *both =
            lmc_tmp_get(LMC_SCRATCH_MLP_FUSED, (size_t)(T * 2 * I) * sizeof(float), &owned2);
        if (!both) {
            lmc_tmp_put(g, owned);
            return lmc_error(LMC_ERR_NOMEM, "out of memory in the MLP for %lld tokens",
                             (long long)T);
        }
        lmc_linear_forward(&m->gate, x, T, both);
        for (int64_t t = 0; t < T; t++) {
            memcpy(g + t * I, both + t * 2 * I, (size_t)I * sizeof(float));
            memcpy(gu + t * I, both + t * 2 * I + I, (size_t)I * sizeof(float));
        }
        lmc_tmp_put(both, owned2);
        act_apply(m->act, g, u, T * I);
    } else {
        const lmc_linear *ls[2] = {&m->gate, &m->up};
        float *ys[2] = {g, u};
        lmc_linear_forward_multi(ls, 2, x, T, ys);
        act_apply(m->act, g, u, T * I);
    }
    lmc_linear_forward(&m->down, g, T, y);
    lmc_tmp_put(g, owned);
    return LMC_OK;
}
