/* lmc bench [--model M] [--prompt-tokens N] [--gen-tokens N] [--reps R]
 * Prompt (prefill) and generation (decode) speed in tokens/s, mean and
 * standard deviation over repetitions, on random in-vocabulary prompts. */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void mean_sd(const double *v, int n, double *mean, double *sd) {
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++) s += v[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) ss += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(ss / (n - 1)) : 0;
}

int cmd_bench(int argc, char **argv) {
    const char *spec = NULL;
    long pp = 128, tg = 64, reps = 3;
    const cli_option opts[] = {
        {"model", 'm', CLI_STR, &spec, "M",
         "a folder, registry name or cached hub id (default: the shipped model)", 0, 0, NULL},
        {"prompt-tokens", 'p', CLI_INT, &pp, "N", "prompt (prefill) tokens (default 128)", 1,
         1 << 20, NULL},
        {"gen-tokens", 'n', CLI_INT, &tg, "N", "generated (decode) tokens (default 64)", 1, 1 << 20,
         NULL},
        {"reps", 'r', CLI_INT, &reps, "N", "repetitions (default 3)", 1, 1000, NULL},
    };
    const cli_command cmd = {
        .name = "bench",
        .synopsis = "[--model M] [-p N] [-n N] [-r N] [options]",
        .about = "Prompt (prefill) and generation (decode) speed in tokens/s, mean and standard\n"
                 "deviation over repetitions, on random in-vocabulary prompts.",
        .options = opts,
        .n_options = sizeof opts / sizeof opts[0],
        .flags = CLI_MODEL_OPTIONS,
        .examples = "  lmc bench -p 128 -n 64 -r 3 --threads 2\n"};
    int r = cli_parse(&cmd, argc, argv);
    if (r >= 0) return r;
    char *model_dir = cli_model_dir("bench", spec);
    if (!model_dir) return CLI_EXIT_ERROR;
    lmc_model *model = NULL;
    lmc_session *sess = NULL;
    double t_load = now();
    lmc_status st = lmc_model_load(model_dir, &model);
    if (st != LMC_OK) {
        lmc_free(model_dir);
        return cli_fail_status("bench", st);
    }
    t_load = now() - t_load;
    lmc_model_info info;
    lmc_model_get_info(model, &info);
    st = lmc_session_create(model, (int32_t)(pp + tg + 1), &sess);
    if (st != LMC_OK) {
        lmc_model_free(model);
        lmc_free(model_dir);
        return cli_fail_status("bench", st);
    }
    int32_t *prompt = malloc((size_t)pp * sizeof *prompt);
    float *logits = malloc((size_t)info.vocab_size * sizeof(float));
    double *pp_rate = calloc((size_t)reps, sizeof(double)),
           *tg_rate = calloc((size_t)reps, sizeof(double));
    srand(1234);
    int rc = 0;
    /* One untimed warm-up pass pages the weights in. */
    for (long rep = -1; rep < reps && rc == 0; rep++) {
        for (long i = 0; i < pp; i++) prompt[i] = rand() % info.vocab_size;
        lmc_session_reset(sess);
        double t0 = now();
        st = lmc_session_forward(sess, prompt, (int32_t)pp, 0, logits);
        double t1 = now();
        int32_t tok = prompt[pp - 1];
        for (long i = 0; i < tg && st == LMC_OK; i++) {
            st = lmc_session_forward(sess, &tok, 1, 0, logits);
            tok = (tok * 7 + 3) % info.vocab_size;
        }
        double t2 = now();
        if (st != LMC_OK) rc = cli_fail_status("bench", st);
        if (rep >= 0) {
            pp_rate[rep] = (double)pp / (t1 - t0);
            tg_rate[rep] = (double)tg / (t2 - t1);
        }
    }
    if (rc == 0) {
        double pm, ps, gm, gs;
        mean_sd(pp_rate, (int)reps, &pm, &ps);
        mean_sd(tg_rate, (int)reps, &gm, &gs);
        printf("model: %s (%s, %d layers, hidden %d, vocab %d, %.1f MB of weights)\n", model_dir,
               info.model_type, info.num_layers, info.hidden_size, info.vocab_size,
               (double)info.weight_bytes / 1e6);
        printf("threads: %d, load: %.3f s, repetitions: %ld\n", lmc_get_num_threads(), t_load,
               reps);
        printf("prompt     %5ld tokens: %9.2f tokens/s  (sd %.2f)\n", pp, pm, ps);
        printf("generation %5ld tokens: %9.2f tokens/s  (sd %.2f)\n", tg, gm, gs);
        /* Decode reads each weight it uses once per token (for MoE, the
         * chosen experts only): tokens/s x bytes per token is the bandwidth
         * it draws, to set against the machine's (build/bench/membw). */
        double per_token = (double)(info.decode_bytes ? info.decode_bytes : info.weight_bytes);
        printf("decode weight traffic: %.2f GB/s (%.1f MB read per token)\n", gm * per_token / 1e9,
               per_token / 1e6);
    }
    free(prompt);
    free(logits);
    free(pp_rate);
    free(tg_rate);
    lmc_session_free(sess);
    lmc_model_free(model);
    lmc_free(model_dir);
    return rc;
}
