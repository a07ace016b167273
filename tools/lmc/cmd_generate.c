/* lmc generate: llm-tool's eval. Loads a model through the LLM factory (the
 * VLM factory when images are given), prepares the user input (chat
 * template unless --no-template) and streams the generated text. Ctrl-C
 * stops the generation cleanly and prints the stats so far. */
#include "cli.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t g_interrupted;

static void on_sigint(int sig) {
    (void)sig;
    g_interrupted = 1;
}

typedef struct job {
    lmc_user_input input;
    lmc_generate_params params;
    bool print_ids;
    int count;
    bool write_failed;
    lmc_generate_result result;
    int32_t context; /* the KV cache's capacity: the model's context */
} job;

static int on_token(int32_t token, const char *text, size_t len, void *ud) {
    job *j = ud;
    if (j->print_ids) {
        if (token >= 0 && printf(j->count++ ? " %d" : "%d", token) < 0) j->write_failed = true;
    } else if (len && fwrite(text, 1, len, stdout) != len) {
        j->write_failed = true;
    }
    if (fflush(stdout) != 0) j->write_failed = true;
    return g_interrupted || j->write_failed;
}

static lmc_status run(lmc_context *ctx, void *ud) {
    job *j = ud;
    if (!j->input.prompt && !j->input.tokens && !j->input.messages) {
        const lmc_model_preset *p = lmc_context_preset(ctx);
        j->input.prompt = p && p->default_prompt ? p->default_prompt : "Hello";
    }
    lmc_model_info info;
    lmc_model_get_info(lmc_context_model(ctx), &info);
    j->context = info.max_position_embeddings;
    return lmc_context_generate(ctx, &j->input, &j->params, on_token, j, &j->result);
}

void cli_print_stats(const lmc_generate_stats *s) {
    fprintf(stderr,
            "prompt: %d tokens (%d cached, %d computed), %.2f tokens/s; generated: %d tokens, "
            "%.2f tokens/s; first token %.3f s; peak memory %.1f MB\n",
            s->prompt_tokens, s->cached_tokens, s->prefill_tokens, s->prompt_tps,
            s->generated_tokens, s->generate_tps, s->first_token_seconds,
            (double)s->peak_memory_bytes / 1e6);
}

int cmd_generate(int argc, char **argv) {
    const char *spec = NULL, *prompt_arg = NULL, *system_arg = NULL, *tokens_arg = NULL;
    cli_strs images = {0};
    bool no_template = false, stats = false, print_ids = false;
    cli_sampling smp;
    cli_sampling_init(&smp);
    const cli_option own[] = {
        {"model", 'm', CLI_STR, &spec, "M",
         "a folder, registry name or cached hub id (default: the shipped model)", 0, 0, NULL},
        {"prompt", 'p', CLI_STR, &prompt_arg, "TEXT",
         "the prompt (@FILE reads FILE; default: the model's preset prompt)", 0, 0, NULL},
        {"system", 0, CLI_STR, &system_arg, "TEXT", "a system message first (@FILE reads FILE)", 0,
         0, NULL},
        {"image", 0, CLI_STRS, &images, "PATH", "an image (uses the VLM factory)", 0, 0, NULL},
        {"tokens", 0, CLI_STR, &tokens_arg, "IDS", "the prompt as token ids, comma-separated", 0, 0,
         NULL},
        {"no-template", 0, CLI_FLAG, &no_template, NULL,
         "the prompt as plain text, not through the chat template", 0, 0, NULL},
        {"print-ids", 0, CLI_FLAG, &print_ids, NULL, "print token ids, not text", 0, 0, NULL},
        {"stats", 0, CLI_FLAG, &stats, NULL, "print speed and memory on stderr at the end", 0, 0,
         NULL},
    };
    enum { N_OWN = sizeof own / sizeof own[0] };
    cli_option opts[N_OWN + CLI_SAMPLING_N];
    memcpy(opts, own, sizeof own);
    cli_sampling_options(&smp, opts + N_OWN);
    const cli_command cmd = {
        .name = "generate",
        .synopsis = "[--model M] [--prompt TEXT | --tokens IDS] [--image PATH]... [options]",
        .about = "Generates text from a prompt and streams it to stdout. Without --model it runs\n"
                 "the model shipped with lmc (models/" CLI_SHIPPED_DIR "). Ctrl-C stops the\n"
                 "generation and prints the stats so far (exit status 130).",
        .options = opts,
        .n_options = N_OWN + CLI_SAMPLING_N,
        .flags = CLI_MODEL_OPTIONS,
        .examples = "  lmc generate --prompt \"And God said,\" --no-template --max-tokens 64\n"
                    "  lmc generate --model qwen3:4b --prompt @question.txt --temp 0.6 --stats\n"};
    int r = cli_parse(&cmd, argc, argv);
    if (r >= 0) {
        cli_strs_free(&images);
        cli_strs_free(&smp.stops);
        return r;
    }
    int rc = CLI_EXIT_ERROR;
    job j;
    memset(&j, 0, sizeof j);
    char *prompt = NULL, *system = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    lmc_container *c = NULL;
    lmc_message msg;
    if (tokens_arg && (prompt_arg || system_arg || images.n)) {
        rc = cli_usage_error("generate", "--tokens excludes --prompt, --system and --image");
        goto done;
    }
    if (tokens_arg && (!cli_parse_ids(tokens_arg, &ids, &n_ids) || n_ids == 0)) {
        rc = cli_usage_error("generate", "--tokens must be a comma-separated list of token ids");
        goto done;
    }
    if (prompt_arg && !(prompt = cli_text_arg("generate", prompt_arg))) goto done;
    if (system_arg && !(system = cli_text_arg("generate", system_arg))) goto done;
    lmc_generate_params p;
    lmc_generate_params_default(&p);
    cli_sampling_apply(&smp, &p);
    j.params = p;
    j.print_ids = print_ids;
    j.input.no_template = no_template;
    if (ids) {
        j.input.tokens = ids;
        j.input.n_tokens = (int32_t)n_ids;
    } else if (images.n) {
        msg = (lmc_message){.role = "user",
                            .content = prompt ? prompt : "Describe the image in English",
                            .images = images.v,
                            .n_images = images.n};
        j.input.messages = &msg;
        j.input.n_messages = 1;
        j.input.system = NULL;
        if (system) {
            rc = cli_usage_error("generate", "--system with --image is not supported");
            goto done;
        }
    } else {
        j.input.prompt = prompt;
        j.input.system = system;
    }
    if (!cli_load("generate", spec, images.n ? LMC_MODEL_VLM : LMC_MODEL_LLM, 0, &c)) goto done;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, &old);
    lmc_status st = lmc_container_perform(c, run, &j);
    sigaction(SIGINT, &old, NULL);
    if (j.count || j.result.n_tokens) printf("\n");
    if (fflush(stdout) != 0) j.write_failed = true;
    if (j.write_failed) {
        rc = cli_fail("generate", "cannot write the output");
    } else if (st != LMC_OK) {
        rc = cli_fail_status("generate", st);
    } else if (g_interrupted) {
        fprintf(stderr, "lmc generate: interrupted\n");
        cli_print_stats(&j.result.stats);
        rc = CLI_EXIT_INTERRUPTED;
    } else {
        const lmc_generate_stats *s = &j.result.stats;
        if (j.result.stop_reason == LMC_STOP_LENGTH && s->generated_tokens < p.max_tokens)
            fprintf(stderr, "lmc generate: stopped at the end of the model's context (%d tokens)\n",
                    j.context);
        if (stats) cli_print_stats(s);
        rc = CLI_EXIT_OK;
    }
done:
    lmc_generate_result_clear(&j.result);
    lmc_container_free(c);
    free(prompt);
    free(system);
    free(ids);
    cli_strs_free(&images);
    cli_strs_free(&smp.stops);
    return rc;
}
