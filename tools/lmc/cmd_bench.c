/* lmc bench: prompt (prefill) and generation (decode) speed in the shape of
 * llama.cpp's llama-bench: -p/-n/-d/-t take lists, -r repetitions, -o md or
 * json (one object per line and test). Tests run after one untimed warm-up;
 * each repetition starts from a cache holding -d tokens of context. The
 * memory read bandwidth of the machine is measured in the same run, so each
 * test states the share of it that its weight traffic reaches. Without -o
 * the older text summary (which tools parse) is printed. */
#include "cli.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void mean_sd(const double *v, int n, double *mean, double *sd) {
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++) s += v[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) ss += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(ss / (n - 1)) : 0;
}

/* ---- memory bandwidth (what bench/membw measures, with plain threads) ---- */

typedef struct bw_slice {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
} bw_slice;

/* Reads ahead in software as the decode kernels do (2 KB): on Zen 5 the
 * hardware prefetcher alone reaches about two thirds of what a core can pull,
 * and the kernels' share of a limit measured without it came out above 1. */
static void *bw_sum(void *arg) {
    bw_slice *s = arg;
    uint64_t a[8] = {0};
    for (size_t i = 0; i + 8 <= s->n; i += 8) {
        __builtin_prefetch(s->p + i + 256);
        for (int k = 0; k < 8; k++) a[k] += s->p[i + k];
    }
    for (int k = 0; k < 8; k++) s->sum += a[k];
    return NULL;
}

/* GB/s reading a 512 MB buffer with `threads` threads, best of 3; 0 when
 * memory or threads are short. */
static double measure_bandwidth(int threads) {
    const size_t n = (512u << 20) / sizeof(uint64_t);
    uint64_t *buf = malloc(n * sizeof *buf);
    if (!buf || threads < 1 || threads > 256) {
        free(buf);
        return 0;
    }
    for (size_t i = 0; i < n; i++) buf[i] = i;
    pthread_t tid[256];
    bw_slice sl[256];
    double best = 0;
    for (int pass = 0; pass < 3; pass++) {
        double t0 = now();
        int started = 0;
        for (int i = 0; i < threads; i++) {
            size_t b = n / (size_t)threads * (size_t)i,
                   e = i == threads - 1 ? n : b + n / (size_t)threads;
            sl[i] = (bw_slice){buf + b, e - b, 0};
            if (i > 0 && pthread_create(&tid[i], NULL, bw_sum, &sl[i]) == 0) started = i;
        }
        bw_sum(&sl[0]);
        for (int i = 1; i <= started; i++) pthread_join(tid[i], NULL);
        double dt = now() - t0;
        if (started == threads - 1 && dt > 0 && (double)(n * 8) / dt / 1e9 > best)
            best = (double)(n * 8) / dt / 1e9;
    }
    free(buf);
    return best;
}

/* ---- lists ------------------------------------------------------------------ */

/* "128,512" into v (at most 16 values in [lo, hi]). */
static bool parse_list(const char *s, long lo, long hi, long *v, int *n) {
    int32_t *ids;
    size_t k;
    if (!cli_parse_ids(s, &ids, &k)) return false;
    bool ok = k >= 1 && k <= 16;
    for (size_t i = 0; ok && i < k; i++) ok = ids[i] >= lo && ids[i] <= hi;
    for (size_t i = 0; ok && i < k; i++) v[i] = ids[i];
    if (ok) *n = (int)k;
    free(ids);
    return ok;
}

typedef struct bench_ctx {
    lmc_model *model;
    lmc_session *sess;
    lmc_model_info info;
    float *logits;
    int32_t *tokens;
    long reps;
} bench_ctx;

/* Fills the cache with `depth` random tokens (untimed). */
static lmc_status fill_depth(bench_ctx *b, long depth) {
    lmc_session_reset(b->sess);
    for (long i = 0; i < depth; i += 512) {
        long n = depth - i < 512 ? depth - i : 512;
        for (long k = 0; k < n; k++) b->tokens[k] = rand() % b->info.vocab_size;
        lmc_status st = lmc_session_forward(b->sess, b->tokens, (int32_t)n, 0, b->logits);
        if (st != LMC_OK) return st;
    }
    return LMC_OK;
}

/* One test: pp (n_prompt tokens in one forward) or tg (n_gen forwards of one
 * token), after `depth` tokens of context. rates[rep] in tokens/s; *cpu the
 * mean CPU seconds per timed run over its wall seconds. */
static lmc_status run_test(bench_ctx *b, long n_prompt, long n_gen, long depth, double *rates,
                           double *cpu_share) {
    double cpu_sum = 0, wall_sum = 0;
    for (long rep = -1; rep < b->reps; rep++) {
        lmc_status st = fill_depth(b, depth);
        if (st != LMC_OK) return st;
        for (long i = 0; i < n_prompt; i++) b->tokens[i] = rand() % b->info.vocab_size;
        int32_t tok = rand() % b->info.vocab_size;
        double t0 = now(), c0 = cpu_now();
        if (n_prompt > 0)
            st = lmc_session_forward(b->sess, b->tokens, (int32_t)n_prompt, 0, b->logits);
        for (long i = 0; i < n_gen && st == LMC_OK; i++) {
            st = lmc_session_forward(b->sess, &tok, 1, 0, b->logits);
            tok = (tok * 7 + 3) % b->info.vocab_size;
        }
        double dt = now() - t0, dc = cpu_now() - c0;
        if (st != LMC_OK) return st;
        if (rep >= 0) {
            rates[rep] = (double)(n_prompt + n_gen) / dt;
            cpu_sum += dc;
            wall_sum += dt;
        }
    }
    *cpu_share = wall_sum > 0 ? cpu_sum / wall_sum : 0;
    return LMC_OK;
}

int cmd_bench(int argc, char **argv) {
    const char *spec = NULL, *pp_s = "128", *tg_s = "64", *depth_s = "0", *out_s = NULL;
    long reps = 3;
    const cli_option opts[] = {
        {"model", 'm', CLI_STR, &spec, "M",
         "a folder, registry name or cached hub id (default: the shipped model)", 0, 0, NULL},
        {"prompt-tokens", 'p', CLI_STR, &pp_s, "N[,N..]",
         "prompt (prefill) tokens, one test each (default 128; 0: none)", 0, 0, NULL},
        {"gen-tokens", 'n', CLI_STR, &tg_s, "N[,N..]",
         "generated (decode) tokens, one test each (default 64; 0: none)", 0, 0, NULL},
        {"depth", 'd', CLI_STR, &depth_s, "N[,N..]",
         "tokens of context in the cache before each test (default 0)", 0, 0, NULL},
        {"reps", 'r', CLI_INT, &reps, "N", "repetitions (default 3)", 1, 1000, NULL},
        {"output", 'o', CLI_STR, &out_s, "md|json",
         "a markdown table, or one JSON object per line and test (default: a text summary)", 0, 0,
         NULL},
    };
    const cli_command cmd = {
        .name = "bench",
        .synopsis = "[--model M] [-p N,..] [-n N,..] [-d N,..] [-t N,..] [-r N] [-o md|json]",
        .about = "Prompt (prefill) and generation (decode) speed in tokens/s, mean and standard\n"
                 "deviation over repetitions, on random in-vocabulary tokens, as llama-bench\n"
                 "measures it: ppN is one forward of N tokens, tgN N forwards of one token,\n"
                 "each after -d tokens of context. -t takes a list here. The machine's memory\n"
                 "read bandwidth is measured in the same run: bandwidth_gbs is the weight\n"
                 "traffic of a test (bytes_per_token x tokens/s; weights only, not the KV\n"
                 "cache) and limit_share its share of that bandwidth.",
        .options = opts,
        .n_options = sizeof opts / sizeof opts[0],
        .flags = CLI_MODEL_OPTIONS,
        .examples = "  lmc bench -p 128 -n 64 -r 3 -t 1,2 -o json\n"
                    "  lmc bench -p 0 -n 64 -d 0,2048 -o md\n"};
    /* -t/--threads take a list here: taken out before the common parser
     * (which knows them as one number) */
    long threads[16];
    int n_threads = 0;
    char **av = malloc(sizeof(char *) * (size_t)(argc + 1));
    if (!av) return cli_fail("bench", "out of memory");
    int ac = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        if (i > 0 && (!strcmp(a, "-t") || !strcmp(a, "--threads")) && i + 1 < argc)
            val = argv[++i];
        else if (i > 0 && !strncmp(a, "--threads=", 10))
            val = a + 10;
        if (!val) {
            av[ac++] = argv[i];
            continue;
        }
        if (!parse_list(val, 1, 1024, threads, &n_threads)) {
            free(av);
            return cli_usage_error("bench", "--threads: '%s' is not a list of 1 to 1024", val);
        }
    }
    av[ac] = NULL;
    int r = cli_parse(&cmd, ac, av);
    free(av);
    if (r >= 0) return r;
    long pps[16], tgs[16], depths[16];
    int n_pp = 0, n_tg = 0, n_depth = 0;
    if (!parse_list(pp_s, 0, 1 << 20, pps, &n_pp))
        return cli_usage_error("bench", "--prompt-tokens: '%s' is not a list of 0 to 1048576",
                               pp_s);
    if (!parse_list(tg_s, 0, 1 << 20, tgs, &n_tg))
        return cli_usage_error("bench", "--gen-tokens: '%s' is not a list of 0 to 1048576", tg_s);
    if (!parse_list(depth_s, 0, 1 << 24, depths, &n_depth))
        return cli_usage_error("bench", "--depth: '%s' is not a list of 0 to 16777216", depth_s);
    bool any = false;
    for (int i = 0; i < n_pp; i++) any |= pps[i] > 0;
    for (int i = 0; i < n_tg; i++) any |= tgs[i] > 0;
    if (!any) return cli_usage_error("bench", "no test: -p and -n are all 0");
    int fmt = 0; /* 0 text, 1 md, 2 json */
    if (out_s && !strcmp(out_s, "md"))
        fmt = 1;
    else if (out_s && (!strcmp(out_s, "json") || !strcmp(out_s, "jsonl")))
        fmt = 2;
    else if (out_s)
        return cli_usage_error("bench", "--output: '%s' is not md or json", out_s);
    if (n_threads == 0) threads[n_threads++] = lmc_get_num_threads();
    long max_tokens = 1;
    for (int d = 0; d < n_depth; d++)
        for (int i = 0; i < n_pp || i < n_tg; i++) {
            long need = depths[d] + (i < n_pp ? pps[i] : 0) + (i < n_tg ? tgs[i] : 0) + 1;
            max_tokens = need > max_tokens ? need : max_tokens;
        }
    char *model_dir = cli_model_dir("bench", spec);
    if (!model_dir) return CLI_EXIT_ERROR;
    bench_ctx b = {.reps = reps};
    double t_load = now();
    lmc_status st = lmc_model_load(model_dir, &b.model);
    if (st != LMC_OK) {
        lmc_free(model_dir);
        return cli_fail_status("bench", st);
    }
    t_load = now() - t_load;
    lmc_model_get_info(b.model, &b.info);
    st = lmc_session_create(b.model, (int32_t)max_tokens, &b.sess);
    if (st != LMC_OK) {
        lmc_model_free(b.model);
        lmc_free(model_dir);
        return cli_fail_status("bench", st);
    }
    long max_pp = 512;
    for (int i = 0; i < n_pp; i++) max_pp = pps[i] > max_pp ? pps[i] : max_pp;
    b.tokens = malloc((size_t)max_pp * sizeof *b.tokens);
    b.logits = malloc((size_t)b.info.vocab_size * sizeof(float));
    double *rates = calloc((size_t)reps, sizeof(double));
    int rc = 0;
    if (!b.tokens || !b.logits || !rates) rc = cli_fail("bench", "out of memory");
    srand(1234);
    const double per_token =
        (double)(b.info.decode_bytes ? b.info.decode_bytes : b.info.weight_bytes);
    const char *kernels = getenv("LMC_NO_SIMD")     ? "generic"
                          : getenv("LMC_NO_AVX512") ? "avx2 (LMC_NO_AVX512)"
                                                    : "best";
    if (fmt == 1) {
        printf("| model | size | threads | test | t/s | GB/s | share of bandwidth |\n");
        printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    }
    double pm = 0, ps = 0, gm = 0, gs = 0; /* the text summary: first pp and tg */
    bool have_pp = false, have_tg = false;
    for (int ti = 0; ti < n_threads && rc == 0; ti++) {
        lmc_set_num_threads((int)threads[ti]);
        int nt = lmc_get_num_threads();
        double bw = measure_bandwidth(nt);
        for (int di = 0; di < n_depth && rc == 0; di++)
            for (int kind = 0; kind < 2 && rc == 0; kind++) {
                int n = kind == 0 ? n_pp : n_tg;
                for (int i = 0; i < n && rc == 0; i++) {
                    long np = kind == 0 ? pps[i] : 0, ng = kind == 1 ? tgs[i] : 0;
                    if (np == 0 && ng == 0) continue;
                    double cpu_share;
                    st = run_test(&b, np, ng, depths[di], rates, &cpu_share);
                    if (st != LMC_OK) {
                        rc = cli_fail_status("bench", st);
                        break;
                    }
                    double mean, sd;
                    mean_sd(rates, (int)reps, &mean, &sd);
                    /* prefill reads the weights once for all its tokens */
                    double bpt = kind == 0 ? per_token / (double)np : per_token;
                    double gbs = mean * bpt / 1e9, share = bw > 0 ? gbs / bw : 0;
                    char test[64];
                    if (depths[di])
                        snprintf(test, sizeof test, "%s%ld @ d%ld", kind ? "tg" : "pp",
                                 kind ? ng : np, depths[di]);
                    else
                        snprintf(test, sizeof test, "%s%ld", kind ? "tg" : "pp", kind ? ng : np);
                    if (kind == 0 && !have_pp && depths[di] == 0)
                        pm = mean, ps = sd, have_pp = true;
                    if (kind == 1 && !have_tg && depths[di] == 0)
                        gm = mean, gs = sd, have_tg = true;
                    if (fmt == 1) {
                        printf("| %s | %.2f GB | %d | %s | %.2f ± %.2f | %.2f | %.3f |\n",
                               b.info.model_type, (double)b.info.weight_bytes / 1e9, nt, test, mean,
                               sd, gbs, share);
                    } else if (fmt == 2) {
                        printf("{\"model\": \"%s\", \"model_type\": \"%s\", \"model_size\": %llu, "
                               "\"kernels\": \"%s\", \"threads\": %d, \"test\": \"%s\", "
                               "\"n_prompt\": %ld, \"n_gen\": %ld, \"n_depth\": %ld, "
                               "\"reps\": %ld, \"mean_tps\": %.4f, \"sd_tps\": %.4f, "
                               "\"avg_ts\": %.4f, \"stddev_ts\": %.4f, \"samples_ts\": [",
                               model_dir, b.info.model_type,
                               (unsigned long long)b.info.weight_bytes, kernels, nt, test, np, ng,
                               depths[di], reps, mean, sd, mean, sd);
                        for (long k = 0; k < reps; k++) printf(k ? ", %.4f" : "%.4f", rates[k]);
                        printf("], \"bytes_per_token\": %.0f, \"bandwidth_gbs\": %.4f, "
                               "\"membw_gbs\": %.4f, \"limit_share\": %.4f, \"cpu_share\": "
                               "%.3f, \"load_s\": %.4f}\n",
                               bpt, gbs, bw, share, cpu_share, t_load);
                    }
                    fflush(stdout);
                }
            }
    }
    if (rc == 0 && fmt == 0) {
        printf("model: %s (%s, %d layers, hidden %d, vocab %d, %.1f MB of weights)\n", model_dir,
               b.info.model_type, b.info.num_layers, b.info.hidden_size, b.info.vocab_size,
               (double)b.info.weight_bytes / 1e6);
        printf("threads: %d, load: %.3f s, repetitions: %ld\n", lmc_get_num_threads(), t_load,
               reps);
        if (have_pp) printf("prompt     %5ld tokens: %9.2f tokens/s  (sd %.2f)\n", pps[0], pm, ps);
        if (have_tg) printf("generation %5ld tokens: %9.2f tokens/s  (sd %.2f)\n", tgs[0], gm, gs);
        /* Decode reads each weight it uses once per token (for MoE, the
         * chosen experts only): tokens/s x bytes per token is the bandwidth
         * it draws, to set against the machine's (build/bench/membw). */
        if (have_tg)
            printf("decode weight traffic: %.2f GB/s (%.1f MB read per token)\n",
                   gm * per_token / 1e9, per_token / 1e6);
    }
    free(b.tokens);
    free(b.logits);
    free(rates);
    lmc_session_free(b.sess);
    lmc_model_free(b.model);
    lmc_free(model_dir);
    return rc;
}
