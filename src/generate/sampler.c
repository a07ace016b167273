/* The built-in logit processors and sampler. */
#include "generate/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* xorshift128+ seeded through splitmix64. */
static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void lmc_rng_seed(lmc_rng *r, uint64_t seed) {
    r->s[0] = splitmix(&seed);
    r->s[1] = splitmix(&seed);
}

double lmc_rng_uniform(lmc_rng *r) {
    uint64_t a = r->s[0], b = r->s[1];
    r->s[0] = b;
    a ^= a << 23;
    r->s[1] = a ^ b ^ (a >> 17) ^ (b >> 26);
    return (double)((r->s[1] + b) >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- processors ----------------------------------------------------------------- */

lmc_status lmc_process_logit_bias(void *state, float *logits, int32_t V, const int32_t *tokens,
                                  int32_t n, int32_t n_prompt) {
    (void)tokens, (void)n, (void)n_prompt;
    const lmc_bias_state *b = state;
    for (int32_t i = 0; i < b->n; i++)
        if (b->bias[i].token >= 0 && b->bias[i].token < V)
            logits[b->bias[i].token] += b->bias[i].bias;
    return LMC_OK;
}

/* counts[t] = occurrences of t in the window (the caller zeroes them after). */
static void count_window(const lmc_penalty_state *p, int32_t V, const int32_t *tokens, int32_t n,
                         int32_t *from) {
    *from = p->context > 0 && n > p->context ? n - p->context : 0;
    for (int32_t i = *from; i < n; i++)
        if (tokens[i] >= 0 && tokens[i] < V) p->counts[tokens[i]]++;
}

static void clear_window(const lmc_penalty_state *p, int32_t V, const int32_t *tokens, int32_t n,
                         int32_t from) {
    for (int32_t i = from; i < n; i++)
        if (tokens[i] >= 0 && tokens[i] < V) p->counts[tokens[i]] = 0;
}

typedef enum penalty_kind { REPETITION, PRESENCE, FREQUENCY } penalty_kind;

/* Each distinct token of the window once (as torch's gather/scatter), by
 * its count in the window. */
static lmc_status penalize(const lmc_penalty_state *p, penalty_kind kind, float *logits, int32_t V,
                           const int32_t *tokens, int32_t n) {
    int32_t from;
    count_window(p, V, tokens, n, &from);
    for (int32_t i = from; i < n; i++) {
        int32_t t = tokens[i];
        if (t < 0 || t >= V || p->counts[t] == 0) continue;
        if (kind == REPETITION)
            logits[t] = logits[t] < 0 ? logits[t] * p->penalty : logits[t] / p->penalty;
        else
            logits[t] -= kind == PRESENCE ? p->penalty : p->penalty * (float)p->counts[t];
        p->counts[t] = 0;
    }
    clear_window(p, V, tokens, n, from);
    return LMC_OK;
}

lmc_status lmc_process_repetition(void *state, float *logits, int32_t V, const int32_t *tokens,
                                  int32_t n, int32_t n_prompt) {
    (void)n_prompt;
    return penalize(state, REPETITION, logits, V, tokens, n);
}

lmc_status lmc_process_presence(void *state, float *logits, int32_t V, const int32_t *tokens,
                                int32_t n, int32_t n_prompt) {
    (void)n_prompt;
    return penalize(state, PRESENCE, logits, V, tokens, n);
}

lmc_status lmc_process_frequency(void *state, float *logits, int32_t V, const int32_t *tokens,
                                 int32_t n, int32_t n_prompt) {
    (void)n_prompt;
    return penalize(state, FREQUENCY, logits, V, tokens, n);
}

/* ---- sampler ------------------------------------------------------------------------- */

typedef struct cand {
    float p;
    int32_t id;
} cand;

/* Whether a comes before b: higher p first, then the lower id (a total
 * order, so any sort gives the same result). */
static inline bool cand_before(cand a, cand b) {
    return a.p != b.p ? a.p > b.p : a.id < b.id;
}

static void sift(cand *c, int32_t n, int32_t i) {
    cand x = c[i];
    for (;;) {
        int32_t k = 2 * i + 1;
        if (k >= n) break;
        if (k + 1 < n && cand_before(c[k], c[k + 1])) k++;
        if (!cand_before(x, c[k])) break;
        c[i] = c[k];
        i = k;
    }
    c[i] = x;
}

/* Sorts c by cand_before in place: a heapsort, since glibc's
 * qsort allocates a buffer for arrays over 1 KB, once per sampled token. */
static void sort_cands(cand *c, int32_t n) {
    for (int32_t i = n / 2; i-- > 0;) sift(c, n, i);
    for (int32_t e = n - 1; e > 0; e--) {
        cand t = c[0];
        c[0] = c[e];
        c[e] = t;
        sift(c, e, 0);
    }
}

static int32_t argmax(const float *logits, int32_t V) {
    int32_t best = 0;
    for (int32_t i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

/* The candidates left after the filters, in c[0..n): most likely first
 * when a filter ran, else in id order. Probabilities unnormalized. */
static int32_t filter(const lmc_sampler_state *s, const float *logits, int32_t V, cand *c) {
    float m = -INFINITY;
    for (int32_t i = 0; i < V; i++) m = logits[i] > m ? logits[i] : m;
    int32_t n = 0;
    double sum = 0;
    for (int32_t i = 0; i < V; i++) {
        float p = expf((logits[i] - m) / s->temperature);
        if (!(p > 0)) continue;
        c[n].id = i;
        c[n].p = p;
        sum += p;
        n++;
    }
    float pmax = 0;
    double all = 0; /* top-p without top-k measures against every candidate */
    for (int32_t i = 0; i < n; i++) {
        c[i].p = (float)(c[i].p / sum);
        pmax = c[i].p > pmax ? c[i].p : pmax;
        all += c[i].p;
    }
    bool k_on = s->top_k > 0 && s->top_k < n;
    bool p_on = s->top_p > 0 && s->top_p < 1;
    bool m_on = s->min_p > 0;
    if (!k_on && !p_on && !m_on) return n;
    /* Sort only what the filters can keep: the candidates at or above a
     * threshold t, when those alone hold the top k, reach top_p, and t is at
     * most min_p's cut (everything below t would be dropped anyway, since the
     * filters keep a prefix of the sorted order). */
    for (float t = pmax * 1e-2f; t > pmax * 1e-9f; t *= 1e-3f) {
        if (m_on && t > pmax * s->min_p) t = pmax * s->min_p;
        int32_t kept = 0;
        double mass = 0;
        for (int32_t i = 0; i < n; i++)
            if (c[i].p >= t) {
                kept++;
                mass += c[i].p;
            }
        if ((k_on && kept <= s->top_k) || (!k_on && p_on && mass < s->top_p * all * 1.0001))
            continue;
        int32_t w = 0;
        for (int32_t i = 0; i < n; i++)
            if (c[i].p >= t) c[w++] = c[i];
        n = w;
        break;
    }
    sort_cands(c, n);
    if (k_on) { /* transformers keeps the ties of the k-th value */
        int32_t k = s->top_k;
        while (k < n && c[k].p == c[s->top_k - 1].p) k++;
        n = k;
    }
    if (p_on) {
        double total = 0, cum = 0;
        for (int32_t i = 0; i < n; i++) total += c[i].p;
        if (!k_on) total = all;
        int32_t k = 0;
        while (k < n) {
            cum += c[k].p;
            k++;
            if (cum >= s->top_p * total) break;
        }
        n = k;
    }
    if (m_on) {
        float thr = c[0].p * s->min_p;
        int32_t k = 1;
        while (k < n && c[k].p >= thr) k++;
        n = k;
    }
    return n;
}

lmc_status lmc_sample_builtin(void *state, const float *logits, int32_t V, int32_t *token) {
    lmc_sampler_state *s = state;
    if (s->temperature <= 0) {
        *token = argmax(logits, V);
        return LMC_OK;
    }
    cand *c = s->scratch;
    int32_t n = filter(s, logits, V, c);
    if (n == 0) { /* every logit -inf or NaN */
        *token = argmax(logits, V);
        return LMC_OK;
    }
    double total = 0;
    for (int32_t i = 0; i < n; i++) total += c[i].p;
    double r = lmc_rng_uniform(&s->rng) * total, acc = 0;
    for (int32_t i = 0; i < n; i++) {
        acc += c[i].p;
        if (r < acc) {
            *token = c[i].id;
            return LMC_OK;
        }
    }
    *token = c[n - 1].id;
    return LMC_OK;
}

void lmc_sampler_distribution(lmc_sampler_state *s, const float *logits, int32_t V, int32_t *ids,
                              float *probs, int32_t *n_out) {
    cand *c = s->scratch;
    int32_t n;
    if (s->temperature <= 0) {
        c[0].id = argmax(logits, V);
        c[0].p = 1;
        n = 1;
    } else {
        n = filter(s, logits, V, c);
        if (!(s->top_k > 0 && s->top_k < V) && !(s->top_p > 0 && s->top_p < 1) && !(s->min_p > 0))
            sort_cands(c, n);
    }
    double total = 0;
    for (int32_t i = 0; i < n; i++) total += c[i].p;
    for (int32_t i = 0; i < n; i++) {
        ids[i] = c[i].id;
        probs[i] = (float)(c[i].p / total);
    }
    *n_out = n;
}
