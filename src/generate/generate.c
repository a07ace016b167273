/* The generation loop: one batched prefill, then one token at a time with
 * the KV cache. */
#include "generate/sampler.h"
#include "models/model.h"

#include <stdlib.h>
#include <string.h>

void lmc_generate_params_default(lmc_generate_params *p) {
    memset(p, 0, sizeof *p);
    p->max_tokens = 256;
    p->temperature = 0.8f;
    p->top_p = 1.0f;
    p->repetition_penalty = 1.0f;
    p->repetition_context = 64;
    p->seed = 0;
}

static bool is_eos(const lmc_model_config *c, int32_t t) {
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_token_ids[i] == t) return true;
    return false;
}

lmc_status lmc_generate(lmc_session *s, const int32_t *prompt, int32_t n,
                        const lmc_generate_params *params, lmc_token_fn cb, void *ud,
                        lmc_generate_stats *stats) {
    lmc_generate_params def;
    if (!params) {
        lmc_generate_params_default(&def);
        params = &def;
    }
    lmc_generate_stats local;
    if (!stats) stats = &local;
    memset(stats, 0, sizeof *stats);
    if (!s || n <= 0 || !prompt)
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_generate: need a session and a prompt");
    const lmc_model_config *c = &s->model->cfg;
    int64_t V = c->vocab_size;
    int32_t ctx = params->repetition_context > 0 ? params->repetition_context : 64;
    float *logits = malloc((size_t)V * sizeof(float));
    void *scratch = malloc((size_t)V * 8);
    int32_t *history = malloc(
        ((size_t)n + (size_t)(params->max_tokens > 0 ? params->max_tokens : 0)) * sizeof(int32_t));
    lmc_status st = LMC_OK;
    if (!logits || !scratch || !history) {
        st = lmc_error(LMC_ERR_NOMEM, "out of memory");
        goto done;
    }
    memcpy(history, prompt, (size_t)n * sizeof(int32_t));
    int64_t n_hist = n;
    lmc_rng rng;
    lmc_rng_seed(&rng, params->seed);
    stats->prompt_tokens = n;
    double t0 = lmc_time_now();
    st = lmc_session_forward(s, prompt, n, 0, logits);
    if (st != LMC_OK) goto done;
    double t1 = lmc_time_now();
    stats->prompt_seconds = t1 - t0;
    for (int32_t i = 0; i < params->max_tokens; i++) {
        int64_t from = n_hist > ctx ? n_hist - ctx : 0;
        lmc_apply_repetition_penalty(logits, V, history + from, n_hist - from,
                                     params->repetition_penalty);
        int32_t tok = lmc_sample(logits, V, params->temperature, params->top_k, params->top_p,
                                 params->min_p, &rng, scratch);
        history[n_hist++] = tok;
        stats->generated_tokens++;
        if (cb && cb(tok, ud)) {
            stats->stopped_by_callback = 1;
            break;
        }
        if (!params->ignore_eos && is_eos(c, tok)) {
            stats->stopped_by_eos = 1;
            break;
        }
        if (i + 1 == params->max_tokens) break;
        st = lmc_session_forward(s, &tok, 1, 0, logits);
        if (st != LMC_OK) goto done;
    }
    stats->generate_seconds = lmc_time_now() - t1;
done:
    free(logits);
    free(scratch);
    free(history);
    return st;
}
