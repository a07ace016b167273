/* lmc bench: prompt (prefill) and generation (decode) speed in the shape of
 * llama.cpp's llama-bench: -p/-n/-d/-t take lists, -r repetitions, -o md or
 * json (one object per line and test). Tests run after one untimed warm-up;
 * each repetition starts from a cache holding -d tokens of context (filled
 * once per depth, then truncated back to it). --interleave runs the tests
 * repetition by repetition, so that tests compared with each other see the
 * same machine (its bandwidth moves within minutes). The
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

/* Reads the slice as the decode kernels read a matrix: four streams a
 * quarter of it apart, each prefetched 2 KB ahead in software. One stream
 * per thread drew about half of what bf16 decode reaches (37 against 70 GB/s
 * on 2 threads here: limit shares of 1.4-1.9); four give 64-74 GB/s. */
static void *bw_sum(void *arg) {
    bw_slice *s = arg;
    const size_t q = s->n / 4 / 8 * 8;
    const uint64_t *p[4] = {s->p, s->p + q, s->p + 2 * q, s->p + 3 * q};
    uint64_t a[4] = {0};
    for (size_t i = 0; i < q; i += 8)
        for (int k = 0; k < 4; k++) {
            __builtin_prefetch(p[k] + i + 256);
            a[k] += (p[k][i] + p[k][i + 1]) + (p[k][i + 2] + p[k][i + 3]) +
                    (p[k][i + 4] + p[k][i + 5]) + (p[k][i + 6] + p[k][i + 7]);
        }
    for (size_t i = 4 * q; i < s->n; i++) a[0] += s->p[i];
    s->sum += (a[0] + a[1]) + (a[2] + a[3]);
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
    lmc_model_info info;
    float *logits;
    int32_t *tokens;
} bench_ctx;

/* Brings `sess` to `depth` tokens of context: back by truncation when it
 * holds more (the keys and values of the context stay), else (or when the
 * cache cannot go back: a rotating window) reset and filled with random
 * tokens (untimed). */
static lmc_status to_depth(bench_ctx *b, lmc_session *sess, long depth) {
    long pos = lmc_session_position(sess);
    if (pos == depth) return LMC_OK;
    if (pos > depth && lmc_session_truncate(sess, (int32_t)depth) == LMC_OK) return LMC_OK;
    lmc_session_reset(sess);
    for (long i = 0; i < depth; i += 512) {
        long n = depth - i < 512 ? depth - i : 512;
        for (long k = 0; k < n; k++) b->tokens[k] = rand() % b->info.vocab_size;
        lmc_status st = lmc_session_forward(sess, b->tokens, (int32_t)n, 0, b->logits);
        if (st != LMC_OK) return st;
    }
    return LMC_OK;
}

/* One test (kind 0: ppN, kind 1: tgN) after `depth` tokens of context,
 * with its session (one per depth) and its results per repetition. */
typedef struct bench_test {
    int kind, depth_index, thread_index;
    long n_prompt, n_gen, depth;
    double *rates, cpu_sum, wall_sum;
} bench_test;

/* One repetition of a test: pp (n_prompt tokens in one forward) or tg (n_gen
 * forwards of one token). rep < 0 is the untimed warm-up. */
static lmc_status run_rep(bench_ctx *b, lmc_session *sess, bench_test *t, long rep) {
    lmc_status st = to_depth(b, sess, t->depth);
    if (st != LMC_OK) return st;
    for (long i = 0; i < t->n_prompt; i++) b->tokens[i] = rand() % b->info.vocab_size;
    int32_t tok = rand() % b->info.vocab_size;
    double t0 = now(), c0 = cpu_now();
    if (t->n_prompt > 0)
        st = lmc_session_forward(sess, b->tokens, (int32_t)t->n_prompt, 0, b->logits);
    for (long i = 0; i < t->n_gen && st == LMC_OK; i++) {
        st = lmc_session_forward(sess, &tok, 1, 0, b->logits);
        tok = (tok * 7 + 3) % b->info.vocab_size;
    }
    double dt = now() - t0, dc = cpu_now() - c0;
    if (st != LMC_OK) return st;
    if (rep >= 0) {
        t->rates[rep] = (double)(t->n_prompt + t->n_gen) / dt;
        t->cpu_sum += dc;
        t->wall_sum += dt;
    }
    return LMC_OK;
}

int cmd_bench(int argc, char **argv) {
    const char *spec = NULL, *pp_s = "128", *tg_s = "64", *depth_s = "0", *out_s = NULL;
    long reps = 3;
    bool interleave = false;
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
        {"interleave", 0, CLI_FLAG, &interleave, NULL,
         "repetition by repetition: each test's first, then each one's second, ... (so\n"
         "that tests set against each other, such as -d 0,2048, see the same machine)",
         0, 0, NULL},
        {"output", 'o', CLI_STR, &out_s, "md|json",
         "a markdown table, or one JSON object per line and test (default: a text summary)", 0, 0,
         NULL},
    };
    const cli_command cmd = {
        .name = "bench",
        .synopsis = "[--model M] [-p N,..] [-n N,..] [-d N,..] [-t N,..] [-r N] [--interleave]\n"
                    "[-o md|json]",
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
                    "  lmc bench -p 0 -n 64 -d 0,2048 -o md\n"
                    "  lmc bench -p 0 -n 16 -d 0,2048 -r 20 --interleave -o md\n"};
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
    /* the tests in the order of the output, and one session per depth */
    int n_tests = 0;
    bench_test *tests = malloc((size_t)(n_threads * n_depth * (n_pp + n_tg)) * sizeof *tests);
    if (!tests) return cli_fail("bench", "out of memory");
    long max_pp = 512;
    for (int ti = 0; ti < n_threads; ti++)
        for (int di = 0; di < n_depth; di++)
            for (int kind = 0; kind < 2; kind++)
                for (int i = 0; i < (kind == 0 ? n_pp : n_tg); i++) {
                    long np = kind == 0 ? pps[i] : 0, ng = kind == 1 ? tgs[i] : 0;
                    if (np == 0 && ng == 0) continue;
                    max_pp = np > max_pp ? np : max_pp;
                    tests[n_tests++] = (bench_test){.kind = kind,
                                                    .depth_index = di,
                                                    .thread_index = ti,
                                                    .n_prompt = np,
                                                    .n_gen = ng,
                                                    .depth = depths[di]};
                }
    char *model_dir = cli_model_dir("bench", spec);
    if (!model_dir) {
        free(tests);
        return CLI_EXIT_ERROR;
    }
    bench_ctx b = {0};
    double t_load = now();
    lmc_status st = lmc_model_load(model_dir, &b.model);
    if (st != LMC_OK) {
        lmc_free(model_dir);
        free(tests);
        return cli_fail_status("bench", st);
    }
    t_load = now() - t_load;
    lmc_model_get_info(b.model, &b.info);
    int rc = 0;
    lmc_session *sess[16] = {0};
    for (int di = 0; di < n_depth && rc == 0; di++) {
        long need = 1;
        for (int k = 0; k < n_tests; k++)
            if (tests[k].depth_index == di) {
                long n = depths[di] + tests[k].n_prompt + tests[k].n_gen + 1;
                need = n > need ? n : need;
            }
        st = lmc_session_create(b.model, (int32_t)need, &sess[di]);
        if (st != LMC_OK) rc = cli_fail_status("bench", st);
    }
    b.tokens = malloc((size_t)max_pp * sizeof *b.tokens);
    b.logits = malloc((size_t)b.info.vocab_size * sizeof(float));
    double *rates = calloc((size_t)(reps * n_tests), sizeof(double));
    if (rc == 0 && (!b.tokens || !b.logits || !rates)) rc = cli_fail("bench", "out of memory");
    for (int k = 0; k < n_tests && rc == 0; k++) tests[k].rates = rates + k * reps;
    srand(1234);
    const double per_token =
        (double)(b.info.decode_bytes ? b.info.decode_bytes : b.info.weight_bytes);
    const char *kernels = getenv("LMC_NO_SIMD")     ? "generic"
                          : getenv("LMC_NO_AVX512") ? "avx2 (LMC_NO_AVX512)"
                                                    : "best";
    if (fmt == 1 && rc == 0) {
        printf("| model | size | threads | test | t/s | GB/s | share of bandwidth |\n");
        printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    }
    double pm = 0, ps = 0, gm = 0, gs = 0; /* the text summary: first pp and tg */
    bool have_pp = false, have_tg = false;
    double bw[16] = {0}; /* the machine's read bandwidth per thread count */
    int nts[16] = {0};
    for (int ti = 0; ti < n_threads && rc == 0; ti++) {
        lmc_set_num_threads((int)threads[ti]);
        nts[ti] = lmc_get_num_threads();
        bw[ti] = measure_bandwidth(nts[ti]);
    }
    /* Test by test (llama-bench's order), each after an untimed warm-up
     * (rep -1); or repetition by repetition, with a warm-up run again where
     * the thread count changed (a new pool). */
    int cur_ti = -1;
    long outer = interleave ? reps + 1 : n_tests, inner = interleave ? n_tests : reps + 1;
    for (long o = 0; o < outer && rc == 0; o++)
        for (long i = 0; i < inner && rc == 0; i++) {
            bench_test *t = &tests[interleave ? i : o];
            long rep = (interleave ? o : i) - 1;
            lmc_session *ts = sess[t->depth_index];
            if (t->thread_index != cur_ti) {
                cur_ti = t->thread_index;
                lmc_set_num_threads((int)threads[cur_ti]);
                if (rep >= 0) st = run_rep(&b, ts, t, -1);
            }
            if (st == LMC_OK) st = run_rep(&b, ts, t, rep);
            if (st != LMC_OK) rc = cli_fail_status("bench", st);
        }
    for (int k = 0; k < n_tests && rc == 0; k++) {
        const bench_test *t = &tests[k];
        const int nt = nts[t->thread_index];
        const double bwt = bw[t->thread_index];
        int kind = t->kind;
        long np = t->n_prompt, ng = t->n_gen, depth = t->depth;
        double mean, sd;
        mean_sd(t->rates, (int)reps, &mean, &sd);
        double cpu_share = t->wall_sum > 0 ? t->cpu_sum / t->wall_sum : 0;
        /* prefill reads the weights once for all its tokens */
        double bpt = kind == 0 ? per_token / (double)np : per_token;
        double gbs = mean * bpt / 1e9, share = bwt > 0 ? gbs / bwt : 0;
        char test[64];
        if (depth)
            snprintf(test, sizeof test, "%s%ld @ d%ld", kind ? "tg" : "pp", kind ? ng : np, depth);
        else
            snprintf(test, sizeof test, "%s%ld", kind ? "tg" : "pp", kind ? ng : np);
        if (kind == 0 && !have_pp && depth == 0) pm = mean, ps = sd, have_pp = true;
        if (kind == 1 && !have_tg && depth == 0) gm = mean, gs = sd, have_tg = true;
        if (fmt == 1) {
            printf("| %s | %.2f GB | %d | %s | %.2f ± %.2f | %.2f | %.3f |\n", b.info.model_type,
                   (double)b.info.weight_bytes / 1e9, nt, test, mean, sd, gbs, share);
        } else if (fmt == 2) {
            printf("{\"model\": \"%s\", \"model_type\": \"%s\", \"model_size\": %llu, "
                   "\"kernels\": \"%s\", \"threads\": %d, \"test\": \"%s\", "
                   "\"n_prompt\": %ld, \"n_gen\": %ld, \"n_depth\": %ld, "
                   "\"reps\": %ld, \"interleaved\": %s, \"mean_tps\": %.4f, "
                   "\"sd_tps\": %.4f, \"avg_ts\": %.4f, \"stddev_ts\": %.4f, "
                   "\"samples_ts\": [",
                   model_dir, b.info.model_type, (unsigned long long)b.info.weight_bytes, kernels,
                   nt, test, np, ng, depth, reps, interleave ? "true" : "false", mean, sd, mean,
                   sd);
            for (long q = 0; q < reps; q++) printf(q ? ", %.4f" : "%.4f", t->rates[q]);
            printf("], \"bytes_per_token\": %.0f, \"bandwidth_gbs\": %.4f, "
                   "\"membw_gbs\": %.4f, \"limit_share\": %.4f, \"cpu_share\": "
                   "%.3f, \"load_s\": %.4f}\n",
                   bpt, gbs, bwt, share, cpu_share, t_load);
        }
        fflush(stdout);
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
    free(tests);
    for (int di = 0; di < n_depth; di++) lmc_session_free(sess[di]);
    lmc_model_free(b.model);
    lmc_free(model_dir);
    return rc;
}
