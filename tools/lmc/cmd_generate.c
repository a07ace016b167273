/* lmc generate --model DIR (--tokens 1,2,3 | --prompt TEXT) [--max-tokens N] [--temp T] ...
 * Prefills the prompt in one batch, decodes with the KV cache; prints ids
 * (--print-ids) or streams text. A text prompt goes through the model's chat
 * template when it has one (--no-template to skip), as mlx-lm does. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(void) {
    fprintf(stderr,
            "usage: lmc generate --model DIR (--tokens 1,2,3 | --prompt TEXT [--system TEXT]\n"
            "                    [--no-template]) [--max-tokens N] [--temp T]\n"
            "                    [--top-k K] [--top-p P] [--min-p P] [--repetition-penalty R]\n"
            "                    [--seed S] [--ignore-eos] [--print-ids] [--stats] [--threads N]\n"
            "                    [--exact]\n");
}

typedef struct gen_out {
    int count;
    bool ids; /* print ids, not text */
} gen_out;

static int print_token(int32_t token, const char *text, size_t len, void *ud) {
    gen_out *o = ud;
    if (o->ids) {
        if (token >= 0) printf(o->count++ ? " %d" : "%d", token);
    } else {
        o->count++;
        fwrite(text, 1, len, stdout);
    }
    fflush(stdout);
    return 0;
}

/* Appends s as a JSON string literal to buf (malloc'd, grown). */
static bool json_string_append(char **buf, size_t *len, size_t *cap, const char *s) {
    size_t need = *len + strlen(s) * 6 + 3;
    if (need > *cap) {
        char *b = realloc(*buf, need * 2);
        if (!b) return false;
        *buf = b;
        *cap = need * 2;
    }
    char *p = *buf + *len;
    *p++ = '"';
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') {
            *p++ = '\\';
            *p++ = (char)*c;
        } else if (*c < 0x20) {
            p += sprintf(p, "\\u%04x", *c);
        } else {
            *p++ = (char)*c;
        }
    }
    *p++ = '"';
    *p = '\0';
    *len = (size_t)(p - *buf);
    return true;
}

static char *messages_json(const char *system, const char *prompt) {
    size_t len = 0, cap = 64;
    char *b = malloc(cap);
    if (!b) return NULL;
    bool ok = true;
#define LIT(str)                                                                                   \
    do {                                                                                           \
        size_t n_ = strlen(str);                                                                   \
        if (len + n_ + 1 > cap) {                                                                  \
            char *nb_ = realloc(b, (len + n_ + 1) * 2);                                            \
            if (!nb_) {                                                                            \
                free(b);                                                                           \
                return NULL;                                                                       \
            }                                                                                      \
            b = nb_;                                                                               \
            cap = (len + n_ + 1) * 2;                                                              \
        }                                                                                          \
        memcpy(b + len, str, n_ + 1);                                                              \
        len += n_;                                                                                 \
    } while (0)
    LIT("[");
    if (system) {
        LIT("{\"role\": \"system\", \"content\": ");
        ok = ok && json_string_append(&b, &len, &cap, system);
        LIT("}, ");
    }
    LIT("{\"role\": \"user\", \"content\": ");
    ok = ok && json_string_append(&b, &len, &cap, prompt);
    LIT("}]");
#undef LIT
    if (!ok) {
        free(b);
        return NULL;
    }
    return b;
}

/* Token ids of a text prompt: through the chat template when the model has
 * one (its rendering carries the special tokens, so none are added), else
 * the text with the tokenizer's special tokens. */
static lmc_status encode_prompt(const char *dir, const lmc_tokenizer *tok, const char *system,
                                const char *prompt, bool use_template, int32_t **ids, size_t *n) {
    if (use_template) {
        char *msgs = messages_json(system, prompt), *rendered = NULL;
        size_t rlen = 0;
        if (!msgs) return LMC_ERR_NOMEM;
        lmc_status st = lmc_chat_template_render(dir, msgs, 1, NULL, &rendered, &rlen);
        free(msgs);
        if (st == LMC_OK) {
            st = lmc_tokenizer_encode(tok, rendered, rlen, 0, ids, n);
            lmc_free(rendered);
            return st;
        }
        if (st != LMC_ERR_NOT_FOUND) return st;
    }
    return lmc_tokenizer_encode(tok, prompt, strlen(prompt), LMC_ENCODE_ADD_SPECIAL, ids, n);
}

int cmd_generate(int argc, char **argv) {
    const char *model_dir = NULL, *tokens_arg = NULL, *prompt = NULL, *system = NULL, *v;
    bool print_ids = false, show_stats = false, use_template = true;
    lmc_generate_params p;
    lmc_generate_params_default(&p);
    for (int i = 1; i < argc; i++) {
        long n;
        double d;
        if (cli_opt(argc, argv, &i, "--model", &v))
            model_dir = v;
        else if (cli_opt(argc, argv, &i, "--tokens", &v))
            tokens_arg = v;
        else if (cli_opt(argc, argv, &i, "--prompt", &v))
            prompt = v;
        else if (cli_opt(argc, argv, &i, "--system", &v))
            system = v;
        else if (!strcmp(argv[i], "--no-template"))
            use_template = false;
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
        } else if (!strcmp(argv[i], "--ignore-eos"))
            p.ignore_eos = 1;
        else if (!strcmp(argv[i], "--print-ids"))
            print_ids = true;
        else if (!strcmp(argv[i], "--stats"))
            show_stats = true;
        else if (!strcmp(argv[i], "--exact"))
            lmc_set_exact(1); /* f32 activations */
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage();
            return 0;
        } else {
            return cli_fail("generate", "unknown option '%s' (see 'lmc generate --help')", argv[i]);
        }
    }
    if (!model_dir || (!tokens_arg == !prompt))
        return cli_fail("generate", "--model and one of --tokens or --prompt are required (see "
                                    "'lmc generate --help')");
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (tokens_arg && (!cli_parse_ids(tokens_arg, &ids, &n_ids) || n_ids == 0)) {
        free(ids);
        return cli_fail("generate", "--tokens must be a comma-separated list of token ids");
    }
    lmc_model *model = NULL;
    lmc_session *sess = NULL;
    lmc_tokenizer *tok = NULL;
    gen_out out = {0};
    int rc = 1;
    lmc_status st = LMC_OK;
    /* Text comes in or goes out through the tokenizer (ids-only runs need none). */
    if (prompt || !print_ids) st = lmc_tokenizer_load(model_dir, &tok);
    if (st == LMC_OK && prompt)
        st = encode_prompt(model_dir, tok, system, prompt, use_template, &ids, &n_ids);
    if (st == LMC_OK && n_ids == 0) {
        free(ids);
        lmc_tokenizer_free(tok);
        return cli_fail("generate", "the prompt encodes to no tokens");
    }
    out.ids = print_ids;
    if (st == LMC_OK) st = lmc_model_load(model_dir, &model);
    if (st == LMC_OK) st = lmc_session_create(model, (int32_t)n_ids + p.max_tokens + 1, &sess);
    lmc_generate_result res = {0};
    if (st == LMC_OK)
        st = lmc_generate(sess, print_ids ? NULL : tok, ids, (int32_t)n_ids, &p, print_token, &out,
                          &res);
    lmc_generate_stats stats = res.stats;
    lmc_generate_result_clear(&res);
    if (st != LMC_OK) {
        if (out.count) printf("\n");
        rc = cli_fail_status("generate", st);
    } else {
        printf("\n");
        rc = 0;
        if (show_stats)
            fprintf(
                stderr, "prompt: %d tokens, %.2f tokens/s; generated: %d tokens, %.2f tokens/s\n",
                stats.prompt_tokens, stats.prompt_tps, stats.generated_tokens, stats.generate_tps);
    }
    free(ids);
    lmc_tokenizer_free(tok);
    lmc_session_free(sess);
    lmc_model_free(model);
    return rc;
}
