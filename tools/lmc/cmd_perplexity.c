/* lmc perplexity: exp of the mean negative log-likelihood of a text under a
 * model. The text is tokenized without special tokens and cut into windows
 * of --ctx tokens, each beginning with BOS (when the model has one) and
 * followed by ctx - 1 tokens of the text; every text token is scored from
 * the positions before it in its window (the last window may be shorter).
 * llama.cpp's llama-perplexity and mlx-lm's evaluate do the same with
 * other window rules; models/train/ reproduces this one in transformers. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -log softmax(logits)[target], in double. */
static double nll(const float *logits, int32_t vocab, int32_t target) {
    float mx = logits[0];
    for (int32_t i = 1; i < vocab; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (int32_t i = 0; i < vocab; i++) sum += exp((double)logits[i] - mx);
    return log(sum) + mx - (double)logits[target];
}

int cmd_perplexity(int argc, char **argv) {
    const char *spec = NULL, *file = NULL, *text_arg = NULL;
    long ctx = 256, max_windows = 0;
    bool json = false;
    const cli_option opts[] = {
        {"model", 'm', CLI_STR, &spec, "M",
         "a folder, registry name or cached hub id (default: the shipped model)", 0, 0, NULL},
        {"file", 'f', CLI_STR, &file, "FILE", "the text ('-': stdin)", 0, 0, NULL},
        {"text", 0, CLI_STR, &text_arg, "TEXT", "the text itself", 0, 0, NULL},
        {"ctx", 'c', CLI_INT, &ctx, "N", "window length in tokens, BOS included (default 256)", 2,
         1 << 20, NULL},
        {"max-windows", 0, CLI_INT, &max_windows, "N", "score only the first N windows (0 = all)",
         0, 1 << 30, NULL},
        {"json", 0, CLI_FLAG, &json, NULL, "print one JSON object", 0, 0, NULL},
    };
    const cli_command cmd = {
        .name = "perplexity",
        .synopsis = "[--model M] (--file FILE | --text TEXT) [--ctx N] [options]",
        .about = "Perplexity of a text: the text is tokenized without special tokens and cut\n"
                 "into windows of --ctx tokens, each BOS (when the model has one) and ctx - 1\n"
                 "text tokens; every text token is scored from the tokens before it in its\n"
                 "window, and the perplexity is exp(mean negative log-likelihood).",
        .options = opts,
        .n_options = sizeof opts / sizeof opts[0],
        .flags = CLI_MODEL_OPTIONS,
        .examples = "  lmc perplexity --file models/train/heldout-sample.txt --ctx 256\n"};
    int r = cli_parse(&cmd, argc, argv);
    if (r >= 0) return r;
    if (!file == !text_arg) return cli_usage_error("perplexity", "give one of --file or --text");
    size_t len = 0;
    char *text = NULL;
    if (file) {
        if (!(text = cli_read_file(file, &len)))
            return cli_fail("perplexity", "cannot read '%s': %s", file, strerror(errno));
    } else if (!(text = strdup(text_arg))) {
        return cli_fail("perplexity", "out of memory");
    } else {
        len = strlen(text);
    }
    int rc = CLI_EXIT_ERROR;
    char *dir = cli_model_dir("perplexity", spec);
    lmc_tokenizer *tok = NULL;
    lmc_model *model = NULL;
    lmc_session *sess = NULL;
    int32_t *ids = NULL, *window = NULL;
    float *logits = NULL;
    size_t n = 0;
    lmc_status st = LMC_OK;
    if (!dir) goto done;
    if ((st = lmc_tokenizer_load(dir, &tok)) != LMC_OK ||
        (st = lmc_tokenizer_encode(tok, text, len, 0, &ids, &n)) != LMC_OK ||
        (st = lmc_model_load(dir, &model)) != LMC_OK) {
        rc = cli_fail_status("perplexity", st);
        goto done;
    }
    lmc_model_info info;
    lmc_model_get_info(model, &info);
    if (info.max_position_embeddings > 0 && ctx > info.max_position_embeddings) {
        rc = cli_usage_error("perplexity", "--ctx %ld is longer than the model's context (%d)", ctx,
                             info.max_position_embeddings);
        goto done;
    }
    int32_t bos = info.bos_token_id;
    size_t per = bos >= 0 ? (size_t)ctx - 1 : (size_t)ctx; /* text tokens per window */
    if (n < (bos >= 0 ? 1u : 2u)) {
        rc = cli_fail("perplexity", "the text is too short to score (%zu tokens)", n);
        goto done;
    }
    if ((st = lmc_session_create(model, (int32_t)ctx, &sess)) != LMC_OK) {
        rc = cli_fail_status("perplexity", st);
        goto done;
    }
    window = malloc((size_t)ctx * sizeof *window);
    logits = malloc((size_t)ctx * (size_t)info.vocab_size * sizeof *logits);
    if (!window || !logits) {
        rc = cli_fail("perplexity", "out of memory");
        goto done;
    }
    double total = 0;
    size_t scored = 0, windows = 0;
    for (size_t at = 0; at < n && (!max_windows || windows < (size_t)max_windows); at += per) {
        size_t take = n - at < per ? n - at : per, w = 0;
        if (bos >= 0) window[w++] = bos;
        memcpy(window + w, ids + at, take * sizeof *ids);
        w += take;
        if (w < 2) break;
        lmc_session_reset(sess);
        if ((st = lmc_session_forward(sess, window, (int32_t)w, 1, logits)) != LMC_OK) {
            rc = cli_fail_status("perplexity", st);
            goto done;
        }
        for (size_t i = 1; i < w; i++) {
            int32_t t = window[i];
            if (t < 0 || t >= info.vocab_size) {
                rc = cli_fail("perplexity", "token %d is outside the model's vocabulary (%d)", t,
                              info.vocab_size);
                goto done;
            }
            total += nll(logits + (i - 1) * (size_t)info.vocab_size, info.vocab_size, t);
            scored++;
        }
        windows++;
    }
    double mean = total / (double)scored;
    if (json)
        printf("{\"perplexity\": %.9g, \"mean_nll\": %.9g, \"tokens\": %zu, \"windows\": %zu, "
               "\"ctx\": %ld}\n",
               exp(mean), mean, scored, windows, ctx);
    else
        printf("perplexity %.6f (mean NLL %.6f nats) over %zu tokens in %zu windows of up to %ld\n",
               exp(mean), mean, scored, windows, ctx);
    rc = fflush(stdout) == 0 ? CLI_EXIT_OK : cli_fail("perplexity", "cannot write the output");
done:
    free(window);
    free(logits);
    lmc_free(ids);
    lmc_session_free(sess);
    lmc_model_free(model);
    lmc_tokenizer_free(tok);
    lmc_free(dir);
    free(text);
    return rc;
}
