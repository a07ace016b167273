/* Sparse MoE (transformers MixtralSparseMoeBlock, Qwen2MoeSparseMoeBlock):
 * softmax router in float32, top-k experts per token, optional
 * renormalization; tokens are grouped by expert so each chosen expert runs
 * once per batch over its tokens, and experts nobody chose are not read. */
#include "nn/decoder.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

void lmc_moe_free(lmc_moe *m) {
    free(m->gate);
    free(m->up);
    free(m->down);
    free(m->views);
    if (m->shared) free(m->shared);
    memset(m, 0, sizeof *m);
}

/* One expert pick of transformers' sparsemixer (modeling_phimoe.py), the
 * inference path: among scores s not excluded, the best i; experts e with
 * (s_i - s_e) / max(|s_e|, s_i) > 2 * jitter_eps are masked out; the weight
 * is softmax(unmasked scores)[i]. The second pick excludes the first. */
static int32_t sparsemixer_pick(const float *s, int64_t E, float eps, int32_t exclude,
                                float *weight) {
    int32_t best = -1;
    for (int64_t e = 0; e < E; e++)
        if (e != exclude && (best < 0 || s[e] > s[best])) best = (int32_t)e;
    float top = s[best], sum = 0.0f;
    for (int64_t e = 0; e < E; e++) {
        if (e == exclude) continue;
        float factor = fabsf(s[e]) > top ? fabsf(s[e]) : top;
        if ((top - s[e]) / factor > 2.0f * eps) continue; /* masked (NaN compares false) */
        sum += expf(s[e] - top);
    }
    *weight = 1.0f / sum; /* exp(top - top) / sum */
    return best;
}

static void sparsemixer(const float *s, int64_t E, float eps, int32_t idx[2], float w[2]) {
    idx[0] = sparsemixer_pick(s, E, eps, -1, &w[0]);
    idx[1] = sparsemixer_pick(s, E, eps, idx[0], &w[1]);
}

typedef struct route {
    int32_t token;
    float weight;
} route;

lmc_status lmc_moe_forward(const lmc_moe *m, const float *x, int64_t T, int64_t hidden, float *y,
                           int64_t *calls) {
    int64_t E = m->n_experts, K = m->top_k;
    int64_t I = m->down[0].in;
    if (K > 64 || K > E)
        return lmc_error(LMC_ERR_UNSUPPORTED, "MoE: top_k %lld with %lld experts", (long long)K,
                         (long long)E);
    float *probs = malloc((size_t)(T * E) * sizeof(float));
    route *routes = malloc((size_t)(T * K) * sizeof(route));
    int32_t *expert_of = malloc((size_t)(T * K) * sizeof(int32_t));
    int64_t *count = calloc((size_t)E + 1, sizeof(int64_t));
    float *xe = lmc_alloc_aligned((size_t)(T * hidden) * sizeof(float));
    float *ge = lmc_alloc_aligned((size_t)(T * I * 2) * sizeof(float));
    float *ye = lmc_alloc_aligned((size_t)(T * hidden) * sizeof(float));
    float *wbuf = malloc((size_t)T * sizeof(float));
    int32_t *tbuf = malloc((size_t)T * sizeof(int32_t));
    lmc_status st = LMC_OK;
    if (!probs || !routes || !expert_of || !count || !xe || !ge || !ye || !wbuf || !tbuf) {
        st = lmc_error(LMC_ERR_NOMEM, "out of memory in the MoE layer");
        goto done;
    }
    if (m->routing == LMC_MOE_SPARSEMIXER && K != 2) {
        st = lmc_error(LMC_ERR_UNSUPPORTED, "MoE: sparsemixer routing is top-2, got top_k %lld",
                       (long long)K);
        goto done;
    }
    lmc_linear_forward(&m->router, x, T, probs);
    for (int64_t t = 0; t < T; t++) {
        float *p = probs + t * E;
        float chosen[64];
        int32_t idx[64];
        if (m->routing == LMC_MOE_SPARSEMIXER)
            sparsemixer(p, E, m->jitter_eps, idx, chosen);
        else
            lmc_softmax(p, E);
        for (int64_t k = 0; k < K && m->routing != LMC_MOE_SPARSEMIXER; k++) {
            int32_t best = -1;
            for (int64_t e = 0; e < E; e++) {
                bool used = false;
                for (int64_t j = 0; j < k && !used; j++) used = idx[j] == e;
                if (!used && (best < 0 || p[e] > p[best])) best = (int32_t)e;
            }
            idx[k] = best;
            chosen[k] = p[best];
        }
        float sum = 0;
        for (int64_t k = 0; k < K; k++) sum += chosen[k];
        for (int64_t k = 0; k < K; k++) {
            routes[t * K + k].token = (int32_t)t;
            routes[t * K + k].weight = m->norm_topk ? chosen[k] / sum : chosen[k];
            expert_of[t * K + k] = idx[k];
            count[idx[k]]++;
        }
    }
    memset(y, 0, (size_t)(T * hidden) * sizeof(float));
    for (int64_t e = 0; e < E; e++) {
        if (!count[e]) continue;
        /* a token picks an expert at most once, so n <= T */
        int64_t n = 0;
        float *w = wbuf;
        int32_t *tok = tbuf;
        for (int64_t r = 0; r < T * K; r++) {
            if (expert_of[r] != e) continue;
            tok[n] = routes[r].token;
            w[n] = routes[r].weight;
            memcpy(xe + n * hidden, x + (int64_t)routes[r].token * hidden,
                   (size_t)hidden * sizeof(float));
            n++;
        }
        if (calls) calls[e] += n;
        float *g = ge, *u = ge + n * I;
        lmc_linear_forward(&m->gate[e], xe, n, g);
        lmc_linear_forward(&m->up[e], xe, n, u);
        for (int64_t i = 0; i < n * I; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
        lmc_linear_forward(&m->down[e], g, n, ye);
        for (int64_t r = 0; r < n; r++)
            for (int64_t i = 0; i < hidden; i++)
                y[tok[r] * hidden + i] += w[r] * ye[r * hidden + i];
    }
    if (m->shared) {
        /* qwen2_moe: y += sigmoid(shared_expert_gate(x)) * shared_expert(x) */
        float *sg = probs; /* T * E >= T */
        if ((st = lmc_mlp_forward(m->shared, x, T, ye)) != LMC_OK) goto done;
        lmc_linear_forward(&m->shared_gate, x, T, sg);
        for (int64_t t = 0; t < T; t++) {
            float s = 1.0f / (1.0f + expf(-sg[t]));
            for (int64_t i = 0; i < hidden; i++) y[t * hidden + i] += s * ye[t * hidden + i];
        }
    }
done:
    free(probs);
    free(routes);
    free(expert_of);
    free(count);
    free(wbuf);
    free(tbuf);
    lmc_free_aligned(xe);
    lmc_free_aligned(ge);
    lmc_free_aligned(ye);
    return st;
}

/* A view of expert e of a stacked [E, out, in] dense tensor. */
static void expert_view(lmc_tensor *view, const lmc_tensor *stacked, int64_t e) {
    *view = *stacked;
    view->ndim = 2;
    view->shape[0] = stacked->shape[1];
    view->shape[1] = stacked->shape[2];
    view->nbytes = stacked->nbytes / (uint64_t)stacked->shape[0];
    view->data = (const uint8_t *)stacked->data + (size_t)e * view->nbytes;
}

/* Stacked experts as mlx-lm's SwitchLinear stores them: a dense
 * [E, out, in] weight, or a quantized one (U32 [E, out, in*bits/32] with
 * scales and biases [E, out, in/group]). Each expert is a view. */
static lmc_status bind_stacked(lmc_moe *m, const lmc_weights *w, const char *prefix,
                               const char *const names[3], int64_t hidden, int64_t inter) {
    lmc_linear *dst[3] = {m->gate, m->up, m->down};
    int64_t E = m->n_experts;
    m->views = calloc((size_t)(3 * E), sizeof *m->views);
    if (!m->views) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    for (int j = 0; j < 3; j++) {
        char module[512], name[600];
        snprintf(module, sizeof module, "%s.%s", prefix, names[j]);
        int64_t out = j == 2 ? hidden : inter, in = j == 2 ? inter : hidden;
        snprintf(name, sizeof name, "%s.scales", module);
        const lmc_tensor *scales = lmc_weights_find(w, name);
        snprintf(name, sizeof name, "%s.weight", module);
        const lmc_tensor *t;
        lmc_status st;
        if (scales) {
            if ((st = lmc_weights_get(w, name, &t)) != LMC_OK) return st;
            snprintf(name, sizeof name, "%s.biases", module);
            const lmc_tensor *biases;
            if ((st = lmc_weights_get(w, name, &biases)) != LMC_OK) return st;
            int64_t packed_shape[3] = {E, out, -1}, scale_shape[3] = {E, out, -1};
            snprintf(name, sizeof name, "%s.weight", module);
            if ((st = lmc_weights_get_shaped(w, name, 3, packed_shape, &t)) != LMC_OK) return st;
            snprintf(name, sizeof name, "%s.scales", module);
            if ((st = lmc_weights_get_shaped(w, name, 3, scale_shape, &scales)) != LMC_OK)
                return st;
            int bits, group;
            if ((st = lmc_quant_params(w, module, t, scales, in, &bits, &group)) != LMC_OK)
                return st;
            lmc_qweight all;
            st = lmc_qweight_from_tensors(t, scales, biases, bits, group, module, &all);
            if (st != LMC_OK) return lmc_error_prefix(st, "%s", w->dir);
            for (int64_t e = 0; e < E; e++)
                dst[j][e] = (lmc_linear){.weight = t,
                                         .quantized = true,
                                         .qw = lmc_qweight_rows(&all, e * out, out),
                                         .in = in,
                                         .out = out};
            continue;
        }
        int64_t shape[3] = {E, out, in};
        if ((st = lmc_weights_get_shaped(w, name, 3, shape, &t)) != LMC_OK) return st;
        if (t->dtype != LMC_DTYPE_F32 && t->dtype != LMC_DTYPE_F16 && t->dtype != LMC_DTYPE_BF16)
            return lmc_error(LMC_ERR_FORMAT, "%s: '%s' has dtype %s and no scales", w->dir, name,
                             lmc_dtype_name(t->dtype));
        for (int64_t e = 0; e < E; e++) {
            lmc_tensor *v = &m->views[j * E + e];
            expert_view(v, t, e);
            dst[j][e] = (lmc_linear){.weight = v, .in = in, .out = out};
        }
    }
    return LMC_OK;
}

/* transformers 5's in-memory layout, should a file hold it:
 * <prefix>.experts.gate_up_proj [E, 2I, H] ([gate; up] per expert) and
 * <prefix>.experts.down_proj [E, H, I], dense. */
static lmc_status bind_fused(lmc_moe *m, const lmc_weights *w, const char *prefix, int64_t hidden,
                             int64_t inter) {
    int64_t E = m->n_experts;
    char name[512];
    const lmc_tensor *gu, *down;
    int64_t gu_shape[3] = {E, 2 * inter, hidden}, down_shape[3] = {E, hidden, inter};
    snprintf(name, sizeof name, "%s.experts.gate_up_proj", prefix);
    lmc_status st = lmc_weights_get_shaped(w, name, 3, gu_shape, &gu);
    if (st != LMC_OK) return st;
    snprintf(name, sizeof name, "%s.experts.down_proj", prefix);
    if ((st = lmc_weights_get_shaped(w, name, 3, down_shape, &down)) != LMC_OK) return st;
    m->views = calloc((size_t)(3 * E), sizeof *m->views);
    if (!m->views) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    for (int64_t e = 0; e < E; e++) {
        lmc_tensor *g = &m->views[e], *u = &m->views[E + e], *d = &m->views[2 * E + e];
        expert_view(g, gu, e);
        g->shape[0] = inter;
        g->nbytes /= 2;
        *u = *g;
        u->data = (const uint8_t *)g->data + g->nbytes;
        expert_view(d, down, e);
        m->gate[e] = (lmc_linear){.weight = g, .in = hidden, .out = inter};
        m->up[e] = (lmc_linear){.weight = u, .in = hidden, .out = inter};
        m->down[e] = (lmc_linear){.weight = d, .in = inter, .out = hidden};
    }
    return LMC_OK;
}

lmc_status lmc_moe_bind(lmc_moe *m, const lmc_weights *w, const char *prefix, const char *router,
                        int64_t n_experts, int64_t top_k, int64_t hidden, int64_t inter,
                        const char *const stacked[4], const char *const per_expert[3]) {
    memset(m, 0, sizeof *m);
    m->n_experts = n_experts;
    m->top_k = top_k;
    m->act = LMC_ACT_SILU;
    char name[512];
    snprintf(name, sizeof name, "%s.%s", prefix, router);
    lmc_status st = lmc_linear_bind(&m->router, w, name, hidden, n_experts, false);
    if (st != LMC_OK) return st;
    m->gate = calloc((size_t)n_experts, sizeof *m->gate);
    m->up = calloc((size_t)n_experts, sizeof *m->up);
    m->down = calloc((size_t)n_experts, sizeof *m->down);
    if (!m->gate || !m->up || !m->down) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    /* mlx-lm's sanitize stacks experts as <prefix>.<stacked[0]>.{gate,up,down}; HF keeps
     * one tensor per expert. Read whichever the file holds, in place. */
    char sprefix[512];
    snprintf(sprefix, sizeof sprefix, "%s.%s", prefix, stacked[0]);
    snprintf(name, sizeof name, "%s.%s.weight", sprefix, stacked[1]);
    if (lmc_weights_find(w, name)) return bind_stacked(m, w, sprefix, stacked + 1, hidden, inter);
    snprintf(name, sizeof name, "%s.experts.gate_up_proj", prefix);
    if (lmc_weights_find(w, name)) return bind_fused(m, w, prefix, hidden, inter);
    lmc_linear *dst[3] = {m->gate, m->up, m->down};
    for (int64_t e = 0; e < n_experts; e++)
        for (int j = 0; j < 3; j++) {
            char sub[256];
            snprintf(sub, sizeof sub, per_expert[j], (int)e);
            snprintf(name, sizeof name, "%s.%s", prefix, sub);
            st = lmc_linear_bind(&dst[j][e], w, name, j == 2 ? inter : hidden,
                                 j == 2 ? hidden : inter, false);
            if (st != LMC_OK) return st;
        }
    return LMC_OK;
}
