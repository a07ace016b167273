/* The sampling options generate and chat share: one table, one mapping
 * onto lmc_generate_params. */
#include "cli.h"

#include <string.h>

void cli_sampling_init(cli_sampling *s) {
    lmc_generate_params p;
    lmc_generate_params_default(&p);
    memset(s, 0, sizeof *s);
    s->max_tokens = p.max_tokens;
    s->rep_ctx = p.repetition_context;
    s->temp = p.temperature;
    s->top_p = 1;
    s->rep = 1;
}

void cli_sampling_options(cli_sampling *s, cli_option out[CLI_SAMPLING_N]) {
    const cli_option o[CLI_SAMPLING_N] = {
        {"max-tokens", 'n', CLI_INT, &s->max_tokens, "N", "tokens to generate (default 256)", 0,
         1 << 30, NULL},
        {"temp", 0, CLI_FLOAT, &s->temp, "T", "sampling temperature; 0 = greedy (default 0.8)", 0,
         1e6, NULL},
        {"top-p", 0, CLI_FLOAT, &s->top_p, "P", "nucleus sampling: keep the top P of the mass",
         1e-9, 1, NULL},
        {"top-k", 0, CLI_INT, &s->top_k, "K", "keep the K most likely tokens (0 = off)", 0, 1 << 30,
         NULL},
        {"min-p", 0, CLI_FLOAT, &s->min_p, "P", "drop tokens below P x the most likely (0 = off)",
         0, 1, NULL},
        {"repetition-penalty", 0, CLI_FLOAT, &s->rep, "R",
         "transformers' repetition penalty (1 = off)", 1e-6, 1e6, NULL},
        {"repetition-context-size", 0, CLI_INT, &s->rep_ctx, "N",
         "tokens the repetition penalty sees (default 64)", 1, 1 << 30, NULL},
        {"presence-penalty", 0, CLI_FLOAT, &s->presence, "P",
         "subtract P from each token seen in the last 20", -1e6, 1e6, NULL},
        {"frequency-penalty", 0, CLI_FLOAT, &s->frequency, "P",
         "subtract P x its count from each token of the last 20", -1e6, 1e6, NULL},
        {"seed", 's', CLI_INT, &s->seed, "S", "sampling seed (default 0)", 0, 9.2e18,
         &s->seed_given},
        {"stop", 0, CLI_STRS, &s->stops, "TEXT", "stop at this text", 0, 0, NULL},
        {"ignore-eos", 0, CLI_FLAG, &s->ignore_eos, NULL, "go on past end-of-sequence tokens", 0, 0,
         NULL},
    };
    memcpy(out, o, sizeof o);
}

void cli_sampling_apply(const cli_sampling *s, lmc_generate_params *p) {
    p->max_tokens = (int32_t)s->max_tokens;
    p->temperature = (float)s->temp;
    p->top_p = (float)s->top_p;
    p->top_k = (int32_t)s->top_k;
    p->min_p = (float)s->min_p;
    p->repetition_penalty = (float)s->rep;
    p->repetition_context = (int32_t)s->rep_ctx;
    p->presence_penalty = (float)s->presence;
    p->frequency_penalty = (float)s->frequency;
    if (s->seed_given) p->seed = (uint64_t)s->seed;
    p->ignore_eos = s->ignore_eos;
    p->stop = s->stops.v;
    p->n_stop = s->stops.n;
}
