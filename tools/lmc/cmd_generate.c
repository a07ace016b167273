/* lmc generate --model DIR --tokens 1,2,3 --max-tokens N --temp 0 --print-ids
 * Prefills the prompt in one batch, decodes with the KV cache. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(void) {
    fprintf(stderr,
            "usage: lmc generate --model DIR --tokens 1,2,3 [--max-tokens N] [--temp T]\n"
            "                    [--top-k K] [--top-p P] [--min-p P] [--repetition-penalty R]\n"
            "                    [--seed S] [--ignore-eos] [--print-ids] [--stats] [--threads N]\n");
}

typedef struct gen_out {
    int count;
} gen_out;

static int print_id(int32_t token, void *ud) {
    gen_out *o = ud;
    printf(o->count++ ? " %d" : "%d", token);
    fflush(stdout);
    return 0;
}

int cmd_generate(int argc, char **argv) {
    const char *model_dir = NULL, *tokens_arg = NULL, *v;
    bool print_ids = false, show_stats = false;
    lmc_generate_params p;
    lmc_generate_params_default(&p);
    for (int i = 1; i < argc; i++) {
        long n;
        double d;
        if (cli_opt(argc, argv, &i, "--model", &v)) model_dir = v;
        else if (cli_opt(argc, argv, &i, "--tokens", &v)) tokens_arg = v;
        else if (cli_opt(argc, argv, &i, "--max-tokens", &v)) {
            if (!v || !cli_parse_int(v, &n) || n < 0 || n > 1 << 30)
                return cli_fail("generate", "bad --max-tokens");
            p.max_tokens = (int32_t)n;
        } else if (cli_opt(argc, argv, &i, "--temp", &v)) {
            if (!v || !cli_parse_float(v, &d) || d < 0) return cli_fail("generate", "bad --temp");
            p.temperature = (float)d;
        } else if (cli_opt(argc, argv, &i, "--top-k", &v)) {
            if (!v || !cli_parse_int(v, &n) || n < 0) return cli_fail("generate", "bad --top-k");
            p.top_k = (int32_t)n;
        } else if (cli_opt(argc, argv, &i, "--top-p", &v)) {
            if (!v || !cli_parse_float(v, &d) || d <= 0 || d > 1)
                return cli_fail("generate", "bad --top-p");
            p.top_p = (float)d;
        } else if (cli_opt(argc, argv, &i, "--min-p", &v)) {
            if (!v || !cli_parse_float(v, &d) || d < 0 || d > 1)
                return cli_fail("generate", "bad --min-p");
            p.min_p = (float)d;
        } else if (cli_opt(argc, argv, &i, "--repetition-penalty", &v)) {
            if (!v || !cli_parse_float(v, &d) || d <= 0)
                return cli_fail("generate", "bad --repetition-penalty");
            p.repetition_penalty = (float)d;
        } else if (cli_opt(argc, argv, &i, "--seed", &v)) {
            if (!v || !cli_parse_int(v, &n)) return cli_fail("generate", "bad --seed");
            p.seed = (uint64_t)n;
        } else if (cli_opt(argc, argv, &i, "--threads", &v)) {
            if (!v || !cli_parse_int(v, &n) || n < 0) return cli_fail("generate", "bad --threads");
            lmc_set_num_threads((int)n);
        } else if (!strcmp(argv[i], "--ignore-eos")) p.ignore_eos = 1;
        else if (!strcmp(argv[i], "--print-ids")) print_ids = true;
        else if (!strcmp(argv[i], "--stats")) show_stats = true;
        else if (!strcmp(argv[i], "--exact")) {
            /* activations are always f32 (the exact path); accepted for scripts */
        }
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage();
            return 0;
        } else {
            return cli_fail("generate", "unknown option '%s' (see 'lmc generate --help')", argv[i]);
        }
    }
    if (!model_dir || !tokens_arg) {
        return cli_fail("generate",
                        "--model and --tokens are required (see 'lmc generate --help')");
    }
    if (!print_ids)
        return cli_fail("generate", "text output needs a tokenizer; use --print-ids with --tokens");
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (!cli_parse_ids(tokens_arg, &ids, &n_ids) || n_ids == 0) {
        free(ids);
        return cli_fail("generate", "--tokens must be a comma-separated list of token ids");
    }
    lmc_model *model = NULL;
    lmc_session *sess = NULL;
    int rc = 1;
    lmc_status st = lmc_model_load(model_dir, &model);
    if (st == LMC_OK)
        st = lmc_session_create(model, (int32_t)n_ids + p.max_tokens + 1, &sess);
    gen_out out = {0};
    lmc_generate_stats stats;
    if (st == LMC_OK) st = lmc_generate(sess, ids, (int32_t)n_ids, &p, print_id, &out, &stats);
    if (st != LMC_OK) {
        if (out.count) printf("\n");
        rc = cli_fail_status("generate", st);
    } else {
        printf("\n");
        rc = 0;
        if (show_stats)
            fprintf(stderr, "prompt: %d tokens, %.2f tokens/s; generated: %d tokens, %.2f tokens/s\n",
                    stats.prompt_tokens, stats.prompt_tokens / (stats.prompt_seconds + 1e-12),
                    stats.generated_tokens,
                    stats.generated_tokens > 1
                        ? (stats.generated_tokens - 1) / (stats.generate_seconds + 1e-12)
                        : 0.0);
    }
    free(ids);
    lmc_session_free(sess);
    lmc_model_free(model);
    return rc;
}
