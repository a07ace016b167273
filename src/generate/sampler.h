/* Logit processors and samplers (transformers' and mlx-lm's semantics). */
#ifndef LMC_SAMPLER_H
#define LMC_SAMPLER_H

#include "base/base.h"

typedef struct lmc_rng {
    uint64_t s[2];
} lmc_rng;

void lmc_rng_seed(lmc_rng *r, uint64_t seed);

/* transformers RepetitionPenaltyLogitsProcessor: for each distinct token in
 * history, logit < 0 ? logit * penalty : logit / penalty. */
void lmc_apply_repetition_penalty(float *logits, int64_t V, const int32_t *history, int64_t n,
                                  float penalty);

/* Temperature, then top-k, top-p (nucleus) and min-p filtering, then a draw.
 * scratch must hold 2*V floats' worth (indices and probabilities). */
int32_t lmc_sample(const float *logits, int64_t V, float temperature, int32_t top_k, float top_p,
                   float min_p, lmc_rng *rng, void *scratch);

#endif
