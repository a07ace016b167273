/* The smallest lmc program: load a model by folder, registry name or hub id,
 * stream a reply to a prompt, print the stats.
 *   cc generate.c $(pkg-config --cflags --libs lmc) -o generate
 *   ./generate MODEL "Why is the sky blue?"
 * A model without a tokenizer takes token ids instead: ./generate MODEL --tokens 1,15,27 */
#include <lmc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int on_token(int32_t token, const char *text, size_t len, void *user_data) {
    int *ids = user_data;
    if (*ids && token >= 0)
        printf("%d ", token);
    else if (!*ids)
        fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0; /* non-zero would stop */
}

typedef struct request {
    lmc_user_input input;
    lmc_generate_params params;
    lmc_generate_result result;
    int ids;
} request;

static lmc_status run(lmc_context *ctx, void *user_data) {
    request *r = user_data;
    return lmc_context_generate(ctx, &r->input, &r->params, on_token, &r->ids, &r->result);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL PROMPT | MODEL --tokens 1,2,3\n", argv[0]);
        return 2;
    }
    lmc_container *model = NULL;
    if (lmc_llm_load(argv[1], NULL, &model) != LMC_OK) {
        fprintf(stderr, "%s\n", lmc_last_error());
        return 1;
    }
    request r = {0};
    int32_t tokens[256];
    if (!strcmp(argv[2], "--tokens") && argc > 3) {
        int n = 0;
        for (char *p = strtok(argv[3], ","); p && n < 256; p = strtok(NULL, ","))
            tokens[n++] = atoi(p);
        r.input.tokens = tokens;
        r.input.n_tokens = n;
        r.ids = 1;
    } else {
        r.input.prompt = argv[2];
    }
    lmc_generate_params_default(&r.params);
    r.params.max_tokens = 32;
    r.params.temperature = 0;
    lmc_status st = lmc_container_perform(model, run, &r);
    printf("\n");
    if (st != LMC_OK)
        fprintf(stderr, "%s\n", lmc_last_error());
    else
        fprintf(stderr, "prompt %d tokens (%.1f tok/s), generated %d tokens (%.1f tok/s)\n",
                r.result.stats.prompt_tokens, r.result.stats.prompt_tps,
                r.result.stats.generated_tokens, r.result.stats.generate_tps);
    lmc_generate_result_clear(&r.result);
    lmc_container_free(model);
    return st == LMC_OK ? 0 : 1;
}
