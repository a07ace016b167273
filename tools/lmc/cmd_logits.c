/* lmc logits [--model M] (--tokens 1,2,3 | --prompt TEXT) --out FILE
 * Writes the logits after every prompt position as raw little-endian
 * float32, T x V, row-major, from one batched forward pass. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cmd_logits(int argc, char **argv) {
    const char *spec = NULL, *tokens_arg = NULL, *prompt = NULL, *out_path = NULL;
    const cli_option opts[] = {
        {"model", 'm', CLI_STR, &spec, "M",
         "a folder, registry name or cached hub id (default: the shipped model)", 0, 0, NULL},
        {"tokens", 0, CLI_STR, &tokens_arg, "IDS", "the prompt as token ids, comma-separated", 0, 0,
         NULL},
        {"prompt", 'p', CLI_STR, &prompt, "TEXT",
         "the prompt as text (with the tokenizer's special tokens; @FILE reads FILE)", 0, 0, NULL},
        {"out", 'o', CLI_STR, &out_path, "FILE", "where the logits go", 0, 0, NULL},
    };
    const cli_command cmd = {
        .name = "logits",
        .synopsis = "[--model M] (--tokens IDS | --prompt TEXT) --out FILE [options]",
        .about = "Writes the logits after every prompt position, from one batched forward pass,\n"
                 "as raw little-endian float32, T x V, row-major.",
        .options = opts,
        .n_options = sizeof opts / sizeof opts[0],
        .flags = CLI_MODEL_OPTIONS,
        .examples = "  lmc logits --tokens 0,361,1240 --out logits.f32\n"};
    int r = cli_parse(&cmd, argc, argv);
    if (r >= 0) return r;
    if (!tokens_arg == !prompt)
        return cli_usage_error("logits", "give one of --tokens or --prompt");
    if (!out_path) return cli_usage_error("logits", "--out is required");
    int32_t *ids = NULL;
    size_t n = 0;
    if (tokens_arg && (!cli_parse_ids(tokens_arg, &ids, &n) || n == 0)) {
        free(ids);
        return cli_usage_error("logits", "--tokens must be a comma-separated list of token ids");
    }
    char *dir = cli_model_dir("logits", spec);
    if (!dir) {
        free(ids);
        return CLI_EXIT_ERROR;
    }
    if (prompt) {
        char *text = cli_text_arg("logits", prompt);
        lmc_tokenizer *tok = NULL;
        int32_t *enc = NULL;
        int rc = CLI_EXIT_ERROR;
        lmc_status st = LMC_ERR_IO;
        if (text) st = lmc_tokenizer_load(dir, &tok);
        if (st == LMC_OK)
            st = lmc_tokenizer_encode(tok, text, strlen(text), LMC_ENCODE_ADD_SPECIAL, &enc, &n);
        if (text && st != LMC_OK)
            cli_fail_status("logits", st);
        else if (st == LMC_OK && n == 0)
            cli_fail("logits", "the prompt encodes to no tokens");
        else if (st == LMC_OK && !(ids = malloc(n * sizeof *ids)))
            cli_fail("logits", "out of memory");
        else if (st == LMC_OK) {
            memcpy(ids, enc, n * sizeof *ids);
            rc = 0;
        }
        lmc_free(enc);
        lmc_tokenizer_free(tok);
        free(text);
        if (rc) {
            lmc_free(dir);
            return rc;
        }
    }
    lmc_model *model = NULL;
    lmc_session *sess = NULL;
    float *logits = NULL;
    int rc = 1;
    lmc_status st = lmc_model_load(dir, &model);
    if (st != LMC_OK) {
        rc = cli_fail_status("logits", st);
        goto done;
    }
    lmc_model_info info;
    lmc_model_get_info(model, &info);
    st = lmc_session_create(model, (int32_t)n, &sess);
    if (st != LMC_OK) {
        rc = cli_fail_status("logits", st);
        goto done;
    }
    logits = malloc(n * (size_t)info.vocab_size * sizeof(float));
    if (!logits) {
        rc = cli_fail("logits", "out of memory");
        goto done;
    }
    st = lmc_session_forward(sess, ids, (int32_t)n, 1, logits);
    if (st != LMC_OK) {
        rc = cli_fail_status("logits", st);
        goto done;
    }
    rc = cli_write_file("logits", out_path, logits, n * (size_t)info.vocab_size * sizeof(float));
done:
    free(logits);
    free(ids);
    lmc_free(dir);
    lmc_session_free(sess);
    lmc_model_free(model);
    return rc;
}
