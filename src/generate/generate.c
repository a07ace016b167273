/* The generation loop: reuse the session's cached prefix, prefill the rest
 * in batches, then one token at a time: processors, sampler, stops, text. */
#include "generate/sampler.h"
#include "models/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

void lmc_generate_params_default(lmc_generate_params *p) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->max_tokens = 256;
    p->temperature = 0.8f;
    p->top_p = 1.0f;
    p->repetition_penalty = 1.0f;
    p->repetition_context = 64;
    p->presence_context = 20;
    p->frequency_context = 20;
    p->prefill_step = 512;
}

void lmc_generate_result_clear(lmc_generate_result *r) {
    if (!r) return;
    free(r->tokens);
    free(r->text);
    memset(r, 0, sizeof *r);
}

#define BAD(fmt, ...) lmc_error(LMC_ERR_INVALID_ARG, "lmc_generate: " fmt, __VA_ARGS__)

static lmc_status check_params(const lmc_generate_params *p) {
    if (p->max_tokens < 0) return BAD("max_tokens = %d is negative", p->max_tokens);
    if (!(p->temperature >= 0) || isinf(p->temperature))
        return BAD("temperature = %g must be a finite number >= 0", (double)p->temperature);
    if (p->top_k < 0) return BAD("top_k = %d is negative", p->top_k);
    if (!(p->top_p > 0 && p->top_p <= 1))
        return BAD("top_p = %g is outside (0, 1]", (double)p->top_p);
    if (!(p->min_p >= 0 && p->min_p <= 1))
        return BAD("min_p = %g is outside [0, 1]", (double)p->min_p);
    if (!(p->repetition_penalty > 0) || isinf(p->repetition_penalty))
        return BAD("repetition_penalty = %g must be a finite number > 0",
                   (double)p->repetition_penalty);
    if (!isfinite(p->presence_penalty))
        return BAD("presence_penalty = %g is not finite", (double)p->presence_penalty);
    if (!isfinite(p->frequency_penalty))
        return BAD("frequency_penalty = %g is not finite", (double)p->frequency_penalty);
    if (p->repetition_context < 0 || p->presence_context < 0 || p->frequency_context < 0)
        return BAD("%s", "the penalty context sizes must be >= 0");
    if (p->n_logit_bias < 0 || (p->n_logit_bias > 0 && !p->logit_bias))
        return BAD("%s", "logit_bias is NULL or n_logit_bias negative");
    for (int32_t i = 0; i < p->n_logit_bias; i++)
        if (isnan(p->logit_bias[i].bias)) return BAD("logit_bias[%d] is NaN", i);
    if (p->n_eos_tokens < 0 || (p->n_eos_tokens > 0 && !p->eos_tokens))
        return BAD("%s", "eos_tokens is NULL or n_eos_tokens negative");
    if (p->n_eos_strings < 0 || (p->n_eos_strings > 0 && !p->eos_strings))
        return BAD("%s", "eos_strings is NULL or n_eos_strings negative");
    for (int32_t i = 0; i < p->n_eos_strings; i++)
        if (!p->eos_strings[i] || !*p->eos_strings[i]) return BAD("eos_strings[%d] is empty", i);
    if (p->n_stop < 0 || (p->n_stop > 0 && !p->stop))
        return BAD("%s", "stop is NULL or n_stop negative");
    for (int32_t i = 0; i < p->n_stop; i++)
        if (!p->stop[i] || !*p->stop[i]) return BAD("stop[%d] is empty", i);
    if (p->prefill_step < 0) return BAD("prefill_step = %d is negative", p->prefill_step);
    if (p->max_kv_size < 0) return BAD("max_kv_size = %d is negative", p->max_kv_size);
    if (p->n_processors < 0 || (p->n_processors > 0 && !p->processors))
        return BAD("%s", "processors is NULL or n_processors negative");
    for (int32_t i = 0; i < p->n_processors; i++)
        if (!p->processors[i].apply) return BAD("processors[%d].apply is NULL", i);
    if (p->sampler && !p->sampler->sample) return BAD("%s", "sampler->sample is NULL");
    return LMC_OK;
}

typedef struct gen {
    const lmc_generate_params *p;
    int32_t *eos;
    int32_t n_eos;
    const char **stops; /* stop strings, eos_strings that are not tokens included */
    int32_t n_stops;
    char *text; /* generated text */
    size_t len, cap, emitted;
} gen;

static bool is_eos(const gen *g, int32_t t) {
    for (int32_t i = 0; i < g->n_eos; i++)
        if (g->eos[i] == t) return true;
    return false;
}

static lmc_status setup_stops(gen *g, const lmc_model_config *c, const lmc_tokenizer *tok) {
    const lmc_generate_params *p = g->p;
    g->eos = malloc(((size_t)c->n_eos + (size_t)p->n_eos_tokens + (size_t)p->n_eos_strings + 1) *
                    sizeof *g->eos);
    g->stops = malloc(((size_t)p->n_stop + (size_t)p->n_eos_strings + 1) * sizeof *g->stops);
    if (!g->eos || !g->stops) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    for (int i = 0; i < c->n_eos; i++) g->eos[g->n_eos++] = c->eos_token_ids[i];
    for (int32_t i = 0; i < p->n_eos_tokens; i++) g->eos[g->n_eos++] = p->eos_tokens[i];
    for (int32_t i = 0; i < p->n_stop; i++) g->stops[g->n_stops++] = p->stop[i];
    for (int32_t i = 0; i < p->n_eos_strings; i++) {
        int32_t id = tok ? lmc_tokenizer_token_to_id(tok, p->eos_strings[i]) : -1;
        if (id >= 0)
            g->eos[g->n_eos++] = id;
        else if (tok)
            g->stops[g->n_stops++] = p->eos_strings[i]; /* not one token: match the text */
    }
    if (g->n_stops > 0 && !tok)
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_generate: stop strings need a tokenizer");
    return LMC_OK;
}

static lmc_status append_text(gen *g, const char *s, size_t n) {
    if (g->len + n + 1 > g->cap) {
        size_t cap = g->cap ? g->cap : 256;
        while (cap < g->len + n + 1) cap *= 2;
        char *t = realloc(g->text, cap);
        if (!t) return lmc_error(LMC_ERR_NOMEM, "out of memory");
        g->text = t;
        g->cap = cap;
    }
    memcpy(g->text + g->len, s, n);
    g->len += n;
    g->text[g->len] = '\0';
    return LMC_OK;
}

/* After new text: whether a stop string matched (the text then ends before
 * it), and how far the text may be emitted (*ready). */
static bool scan_stops(gen *g, size_t *ready) {
    size_t best = (size_t)-1;
    for (int32_t i = 0; i < g->n_stops; i++) {
        size_t sl = strlen(g->stops[i]);
        for (size_t k = g->emitted; k + sl <= g->len && k < best; k++)
            if (!memcmp(g->text + k, g->stops[i], sl)) {
                best = k;
                break;
            }
    }
    if (best != (size_t)-1) {
        g->len = best;
        g->text[best] = '\0';
        *ready = best;
        return true;
    }
    size_t hold = 0;
    for (int32_t i = 0; i < g->n_stops; i++) {
        size_t sl = strlen(g->stops[i]);
        for (size_t l = sl - 1; l > hold; l--)
            if (l <= g->len - g->emitted && !memcmp(g->text + g->len - l, g->stops[i], l)) {
                hold = l;
                break;
            }
    }
    *ready = g->len - hold;
    return false;
}

static uint64_t peak_rss(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (uint64_t)ru.ru_maxrss * 1024u;
}

/* Keeps the longest common prefix of the session and prompt (leaving at
 * least one prompt token to run); returns how many tokens were kept. */
static int32_t reuse_prefix(lmc_session *s, const int32_t *prompt, int32_t n) {
    int32_t have = lmc_session_position(s), k = 0;
    const int32_t *held = lmc_session_tokens(s);
    while (k < have && k < n && held[k] == prompt[k]) k++;
    if (k == n) k = n - 1;
    if (k < have && lmc_session_truncate(s, k) != LMC_OK) {
        lmc_session_reset(s);
        k = 0;
    }
    return k;
}

/* The one generation loop, for text (px NULL) and images. */
static lmc_status generate(lmc_session *s, const lmc_tokenizer *tok, const int32_t *prompt,
                           int32_t n, const lmc_pixels *px, const lmc_generate_params *params,
                           lmc_token_fn cb, void *ud, lmc_generate_result *result) {
    lmc_generate_result local;
    if (!result) result = &local;
    memset(result, 0, sizeof *result);
    lmc_generate_params def;
    if (!params) {
        lmc_generate_params_default(&def);
        params = &def;
    }
    if (!s || n <= 0 || !prompt)
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_generate: need a session and a prompt");
    lmc_status st = check_params(params);
    if (st != LMC_OK) return st;
    const lmc_model_config *c = &s->model->cfg;
    const int32_t V = (int32_t)c->vocab_size;
    for (int32_t i = 0; i < n; i++)
        if (prompt[i] < 0 || prompt[i] >= V)
            return lmc_error(LMC_ERR_RANGE,
                             "token id %d at position %d is outside the vocabulary (0..%d)",
                             prompt[i], i, V - 1);
    if (n > s->max_tokens)
        return lmc_error(LMC_ERR_RANGE,
                         "the prompt's %d tokens exceed the session's context of %lld tokens", n,
                         (long long)s->max_tokens);
    if (px && params->max_kv_size > 0)
        return lmc_error(LMC_ERR_UNSUPPORTED,
                         "lmc_generate: max_kv_size cannot be used with images (their prompt is "
                         "one bidirectional block)");
    if (params->max_kv_size != s->max_kv &&
        (st = lmc_session_set_max_kv(s, params->max_kv_size)) != LMC_OK)
        return st;
    lmc_generate_stats *stats = &result->stats;
    gen g = {.p = params};
    lmc_detokenizer *detok = NULL;
    float *logits = malloc((size_t)V * sizeof(float));
    void *scratch = malloc((size_t)V * 8);
    int32_t *counts = calloc((size_t)V, sizeof(int32_t));
    size_t max_new = (size_t)params->max_tokens;
    int32_t *hist = malloc(((size_t)n + max_new + 1) * sizeof(int32_t));
    result->tokens = malloc((max_new + 1) * sizeof(int32_t));
    if (!logits || !scratch || !counts || !hist || !result->tokens) {
        st = lmc_error(LMC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = setup_stops(&g, c, tok)) != LMC_OK) goto done;
    if (tok && (st = lmc_detokenizer_create(tok, 1, &detok)) != LMC_OK) goto done;

    /* the processors, built-ins first, all of the same interface */
    lmc_bias_state bias = {params->logit_bias, params->n_logit_bias};
    lmc_penalty_state rep = {params->repetition_penalty, params->repetition_context, counts};
    lmc_penalty_state pres = {params->presence_penalty, params->presence_context, counts};
    lmc_penalty_state freq = {params->frequency_penalty, params->frequency_context, counts};
    lmc_logits_processor chain[4 + 64];
    int32_t n_chain = 0;
    if (bias.n > 0) chain[n_chain++] = (lmc_logits_processor){lmc_process_logit_bias, &bias};
    if (rep.penalty != 1.0f)
        chain[n_chain++] = (lmc_logits_processor){lmc_process_repetition, &rep};
    if (pres.penalty != 0) chain[n_chain++] = (lmc_logits_processor){lmc_process_presence, &pres};
    if (freq.penalty != 0) chain[n_chain++] = (lmc_logits_processor){lmc_process_frequency, &freq};
    if (params->n_processors > 64) {
        st = lmc_error(LMC_ERR_INVALID_ARG, "lmc_generate: at most 64 processors");
        goto done;
    }
    for (int32_t i = 0; i < params->n_processors; i++) chain[n_chain++] = params->processors[i];
    lmc_sampler_state ss = {params->temperature, params->top_k, params->top_p,
                            params->min_p,       {{0, 0}},      scratch};
    lmc_rng_seed(&ss.rng, params->seed);
    lmc_sampler sampler =
        params->sampler ? *params->sampler : (lmc_sampler){lmc_sample_builtin, &ss};

    /* prefill what the cache does not hold yet */
    double t0 = lmc_time_now();
    stats->prompt_tokens = n;
    if (px) { /* one bidirectional block: nothing cached is reused, no chunks */
        lmc_session_reset(s);
        stats->cached_tokens = 0;
        stats->prefill_tokens = n;
        if ((st = lmc_session_forward_images(s, prompt, n, px, false, logits)) != LMC_OK) goto done;
    } else {
        stats->cached_tokens = reuse_prefix(s, prompt, n);
        stats->prefill_tokens = n - stats->cached_tokens;
    }
    int32_t step = params->prefill_step > 0 ? params->prefill_step : n;
    for (int32_t off = stats->cached_tokens; !px && off < n; off += step) {
        int32_t m = n - off < step ? n - off : step;
        if ((st = lmc_session_forward(s, prompt + off, m, 0, logits)) != LMC_OK) goto done;
    }
    double t1 = lmc_time_now();
    stats->prompt_seconds = t1 - t0;
    stats->prompt_tps =
        stats->prefill_tokens / (stats->prompt_seconds > 0 ? stats->prompt_seconds : 1e-9);
    memcpy(hist, prompt, (size_t)n * sizeof(int32_t));
    int32_t n_hist = n;
    result->stop_reason = LMC_STOP_LENGTH;
    bool stopped = false;
    for (int32_t i = 0; i < params->max_tokens && !stopped; i++) {
        for (int32_t k = 0; k < n_chain && st == LMC_OK; k++)
            st = chain[k].apply(chain[k].state, logits, V, hist, n_hist, n);
        int32_t t = 0;
        if (st == LMC_OK) st = sampler.sample(sampler.state, logits, V, &t);
        if (st == LMC_OK && (t < 0 || t >= V))
            st = lmc_error(LMC_ERR_RANGE, "the sampler returned token %d (vocabulary 0..%d)", t,
                           V - 1);
        if (st != LMC_OK) goto done;
        if (i == 0) stats->first_token_seconds = lmc_time_now() - t0;
        if (!params->ignore_eos && is_eos(&g, t)) {
            result->stop_reason = LMC_STOP_EOS;
            break;
        }
        hist[n_hist++] = t;
        result->tokens[result->n_tokens++] = t;
        stats->generated_tokens++;
        const char *piece = NULL;
        size_t plen = 0, ready = 0;
        if (detok) {
            if ((st = lmc_detokenizer_push(detok, t, &piece, &plen)) != LMC_OK) goto done;
            if ((st = append_text(&g, piece, plen)) != LMC_OK) goto done;
            if (scan_stops(&g, &ready)) {
                result->stop_reason = LMC_STOP_STRING;
                stopped = true;
            }
        }
        const char *out = detok ? g.text + g.emitted : NULL;
        size_t olen = detok ? ready - g.emitted : 0;
        g.emitted = detok ? ready : 0;
        if (cb && cb(t, out ? out : "", olen, ud) && !stopped) {
            result->stop_reason = LMC_STOP_CALLBACK;
            stopped = true;
        }
        if (stopped || i + 1 == params->max_tokens) break;
        if (lmc_session_position(s) + 1 > s->max_tokens) break; /* the context is full */
        if ((st = lmc_session_forward(s, &t, 1, 0, logits)) != LMC_OK) goto done;
    }
    /* what was held back (a possible stop string prefix, a UTF-8 tail) */
    if (detok && result->stop_reason != LMC_STOP_STRING) {
        const char *rest;
        size_t rlen;
        if ((st = lmc_detokenizer_flush(detok, &rest, &rlen)) != LMC_OK) goto done;
        if ((st = append_text(&g, rest, rlen)) != LMC_OK) goto done;
        size_t ready;
        if (scan_stops(&g, &ready)) result->stop_reason = LMC_STOP_STRING;
        if (g.len > g.emitted && cb) cb(-1, g.text + g.emitted, g.len - g.emitted, ud);
        g.emitted = g.len;
    }
    stats->generate_seconds = lmc_time_now() - t1;
    stats->generate_tps = stats->generated_tokens > 1 && stats->generate_seconds > 0
                              ? (stats->generated_tokens - 1) / stats->generate_seconds
                              : 0;
done:
    stats->peak_memory_bytes = peak_rss();
    if (!g.text) append_text(&g, "", 0);
    result->text = g.text;
    result->text_len = g.len;
    if (result == &local) lmc_generate_result_clear(&local);
    lmc_detokenizer_free(detok);
    free(g.eos);
    free(g.stops);
    free(logits);
    free(scratch);
    free(counts);
    free(hist);
    return st;
}

lmc_status lmc_generate(lmc_session *s, const lmc_tokenizer *tok, const int32_t *prompt, int32_t n,
                        const lmc_generate_params *params, lmc_token_fn cb, void *ud,
                        lmc_generate_result *result) {
    return generate(s, tok, prompt, n, NULL, params, cb, ud, result);
}

lmc_status lmc_generate_input(lmc_session *s, const lmc_tokenizer *tok, const lmc_model_input *in,
                              const lmc_generate_params *params, lmc_token_fn cb, void *ud,
                              lmc_generate_result *result) {
    if (result) memset(result, 0, sizeof *result);
    if (!in) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_generate_input: input is NULL");
    if (in->n_images < 0 || (in->n_images > 0 && !in->pixel_values))
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_generate_input: bad images");
    lmc_pixels px = {in->pixel_values, in->n_images, in->image_height, in->image_width};
    return generate(s, tok, in->tokens, in->n_tokens, in->n_images > 0 ? &px : NULL, params, cb, ud,
                    result);
}
