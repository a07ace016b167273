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

static double rng_uniform(lmc_rng *r) {
    uint64_t a = r->s[0], b = r->s[1];
    r->s[0] = b;
    a ^= a << 23;
    r->s[1] = a ^ b ^ (a >> 17) ^ (b >> 26);
    return (double)((r->s[1] + b) >> 11) * (1.0 / 9007199254740992.0);
}

void lmc_apply_repetition_penalty(float *logits, int64_t V, const int32_t *history, int64_t n,
                                  float penalty) {
    if (penalty == 1.0f || penalty <= 0) return;
    for (int64_t i = 0; i < n; i++) {
        int32_t t = history[i];
        if (t < 0 || t >= V) continue;
        bool seen = false; /* each distinct token once, as torch.gather/scatter does */
        for (int64_t j = 0; j < i && !seen; j++) seen = history[j] == t;
        if (seen) continue;
        logits[t] = logits[t] < 0 ? logits[t] * penalty : logits[t] / penalty;
    }
}

static int32_t sample_argmax(const float *logits, int64_t V) {
    int64_t best = 0;
    for (int64_t i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    return (int32_t)best;
}

typedef struct cand {
    float p;
    int32_t id;
} cand;

static int cmp_cand_desc(const void *a, const void *b) {
    float x = ((const cand *)a)->p, y = ((const cand *)b)->p;
    if (x != y) return x > y ? -1 : 1;
    return ((const cand *)a)->id - ((const cand *)b)->id;
}

int32_t lmc_sample(const float *logits, int64_t V, float temperature, int32_t top_k, float top_p,
                   float min_p, lmc_rng *rng, void *scratch) {
    if (temperature <= 0) return sample_argmax(logits, V);
    cand *c = scratch;
    float m = -INFINITY;
    for (int64_t i = 0; i < V; i++) m = logits[i] > m ? logits[i] : m;
    double sum = 0;
    for (int64_t i = 0; i < V; i++) {
        c[i].id = (int32_t)i;
        c[i].p = expf((logits[i] - m) / temperature);
        sum += c[i].p;
    }
    for (int64_t i = 0; i < V; i++) c[i].p = (float)(c[i].p / sum);
    qsort(c, (size_t)V, sizeof *c, cmp_cand_desc);
    int64_t n = V;
    if (top_k > 0 && top_k < n) n = top_k;
    if (min_p > 0) {
        float thr = c[0].p * min_p;
        int64_t k = 1;
        while (k < n && c[k].p >= thr) k++;
        n = k;
    }
    if (top_p > 0 && top_p < 1) {
        double cum = 0;
        int64_t k = 0;
        while (k < n) {
            cum += c[k].p;
            k++;
            if (cum >= top_p) break;
        }
        n = k;
    }
    double total = 0;
    for (int64_t i = 0; i < n; i++) total += c[i].p;
    double r = rng_uniform(rng) * total, acc = 0;
    for (int64_t i = 0; i < n; i++) {
        acc += c[i].p;
        if (r < acc) return c[i].id;
    }
    return c[n - 1].id;
}
