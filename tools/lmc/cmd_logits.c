/* lmc logits [--model M] (--tokens 1,2,3 | --prompt TEXT [--image PATH]...) --out FILE
 * Writes the logits after every prompt position as raw little-endian
 * float32, T x V, row-major, from one batched forward pass. With --image
 * the model is a VLM: the input is what its processor makes of the images
 * and the prompt (image tokens, BOS, prompt, newline), T of its length. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes count floats to path through a temporary file renamed into place,
 * so a failure leaves nothing. */
typedef struct image_job {
    lmc_user_input input;
    float *logits;
    size_t count;
} image_job;

static lmc_status run_images(lmc_context *c, void *ud) {
    image_job *j = ud;
    lmc_model_input mi;
    lmc_status st = lmc_context_prepare(c, &j->input, &mi);
    if (st != LMC_OK) return st;
    lmc_model_info info;
    lmc_model_get_info(lmc_context_model(c), &info);
    lmc_session *s = lmc_context_session(c);
    lmc_session_reset(s);
    j->count = (size_t)mi.n_tokens * (size_t)info.vocab_size;
    j->logits = malloc(j->count * sizeof(float));
    st = j->logits ? lmc_session_forward_input(s, &mi, 1, j->logits) : LMC_ERR_NOMEM;
    lmc_model_input_clear(&mi);
    return st;
}

static int logits_with_images(const char *spec, const char *prompt, const cli_strs *images,
                              const char *out_path) {
    char *text = cli_text_arg("logits", prompt);
    if (!text) return CLI_EXIT_ERROR;
    lmc_container *c = NULL;
    int rc = CLI_EXIT_ERROR;
    image_job j = {.input = {.prompt = text, .images = images->v, .n_images = images->n}};
    if (cli_load("logits", spec, LMC_MODEL_VLM, 0, &c)) {
        lmc_status st = lmc_container_perform(c, run_images, &j);
        if (st == LMC_OK)
            rc = cli_write_file("logits", out_path, j.logits, j.count * sizeof(float));
        else if (st == LMC_ERR_NOMEM && !j.logits)
            rc = cli_fail("logits", "out of memory for %zu logits", j.count);
        else
            rc = cli_fail_status("logits", st);
    }
    free(j.logits);
    lmc_container_free(c);
    free(text);
    return rc;
}

int cmd_logits(int argc, char **argv) {
    const char *spec = NULL, *tokens_arg = NULL, *prompt = NULL, *out_path = NULL;
    cli_strs images = {0};
    const cli_option opts[] = {
        {"model", 'm', CLI_STR, &spec, "M",
         "a folder, registry name or cached hub id (default: the shipped model)", 0, 0, NULL},
        {"tokens", 0, CLI_STR, &tokens_arg, "IDS", "the prompt as token ids, comma-separated", 0, 0,
         NULL},
        {"prompt", 'p', CLI_STR, &prompt, "TEXT",
         "the prompt as text (with the tokenizer's special tokens; @FILE reads FILE)", 0, 0, NULL},
        {"out", 'o', CLI_STR, &out_path, "FILE", "where the logits go", 0, 0, NULL},
        {"image", 0, CLI_STRS, &images, "PATH",
         "an image, with --prompt (uses the VLM factory and its processor)", 0, 0, NULL},
    };
    const cli_command cmd = {
        .name = "logits",
        .synopsis = "[--model M] (--tokens IDS | --prompt TEXT [--image PATH]...) --out FILE "
                    "[options]",
        .about = "Writes the logits after every prompt position, from one batched forward pass,\n"
                 "as raw little-endian float32, T x V, row-major.",
        .options = opts,
        .n_options = sizeof opts / sizeof opts[0],
        .flags = CLI_MODEL_OPTIONS,
        .examples = "  lmc logits --tokens 0,361,1240 --out logits.f32\n"};
    int r = cli_parse(&cmd, argc, argv);
    if (r >= 0) {
        cli_strs_free(&images);
        return r;
    }
    if (!tokens_arg == !prompt || (images.n && !prompt)) {
        cli_strs_free(&images);
        return cli_usage_error("logits", images.n ? "--image goes with --prompt"
                                                  : "give one of --tokens or --prompt");
    }
    if (!out_path) {
        cli_strs_free(&images);
        return cli_usage_error("logits", "--out is required");
    }
    if (images.n) {
        int rc = logits_with_images(spec, prompt, &images, out_path);
        cli_strs_free(&images);
        return rc;
    }
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
