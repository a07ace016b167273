/* The built-in logit processors and sampler (transformers' and mlx-lm's
 * semantics), each an lmc_logits_processor / lmc_sampler like a user's. */
#ifndef LMC_SAMPLER_H
#define LMC_SAMPLER_H

#include "base/base.h"

typedef struct lmc_rng {
    uint64_t s[2];
} lmc_rng;

void lmc_rng_seed(lmc_rng *r, uint64_t seed);
/* Uniform in [0, 1). */
double lmc_rng_uniform(lmc_rng *r);

/* States of the built-ins; the processor's apply / sampler's sample take
 * a pointer to one. */
typedef struct lmc_bias_state {
    const lmc_logit_bias *bias;
    int32_t n;
} lmc_bias_state;

typedef struct lmc_penalty_state {
    float penalty;
    int32_t context; /* the last `context` tokens */
    int32_t *counts; /* vocab_size zeroed ints (scratch) */
} lmc_penalty_state;

/* logits[t] += bias */
lmc_status lmc_process_logit_bias(void *state, float *logits, int32_t V, const int32_t *tokens,
                                  int32_t n, int32_t n_prompt);
/* transformers' RepetitionPenaltyLogitsProcessor: each distinct token of
 * the window once, logit < 0 ? logit * penalty : logit / penalty. */
lmc_status lmc_process_repetition(void *state, float *logits, int32_t V, const int32_t *tokens,
                                  int32_t n, int32_t n_prompt);
/* mlx-lm's presence penalty: logits[t] -= penalty for each distinct t. */
lmc_status lmc_process_presence(void *state, float *logits, int32_t V, const int32_t *tokens,
                                int32_t n, int32_t n_prompt);
/* mlx-lm's frequency penalty: logits[t] -= penalty * count(t). */
lmc_status lmc_process_frequency(void *state, float *logits, int32_t V, const int32_t *tokens,
                                 int32_t n, int32_t n_prompt);

typedef struct lmc_sampler_state {
    float temperature;
    int32_t top_k;
    float top_p, min_p;
    lmc_rng rng;
    void *scratch; /* 8 * vocab_size bytes */
} lmc_sampler_state;

/* The built-in sampler (lmc.h's order: temperature, top-k, top-p, min-p). */
lmc_status lmc_sample_builtin(void *state, const float *logits, int32_t V, int32_t *token);
/* The distribution the built-in sampler draws from: probs[i] of token
 * ids[i], i < *n, most likely first (scratch as the state's). For tests. */
void lmc_sampler_distribution(lmc_sampler_state *s, const float *logits, int32_t V, int32_t *ids,
                              float *probs, int32_t *n);

#endif
