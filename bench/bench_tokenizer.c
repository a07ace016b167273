/* Tokenizer benchmark: load time of a tokenizer folder and encode speed.
 * usage: bench_tokenizer DIR [TEXT_FILE [MIN_MB]]
 * The text (default: a built-in English paragraph) is repeated up to MIN_MB
 * (default 10) megabytes and encoded in one call, plain text mode. */
#include "lmc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* CPU time of this process: on a shared machine wall time mostly measures
 * the other jobs. Both are reported. */
static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static const char PARAGRAPH[] =
    "The history of the city begins in the late Middle Ages, when a small market town grew up "
    "around a crossing of the river. Merchants from the north brought wool, timber and salted "
    "fish; in return they carried away wine, cloth and, later, printed books. By 1650 the town "
    "had about 12,000 inhabitants, a grammar school and two hospitals. Its growth was not "
    "steady: fires in 1702 and 1788 destroyed whole streets, and an epidemic in 1832 killed "
    "nearly one person in ten. Yet each time the town was rebuilt, usually in brick rather than "
    "wood, and often on a grander plan. \"We build for our grandchildren,\" wrote the mayor in "
    "his diary, \"not for ourselves.\" Today visitors can still walk along the old walls, see "
    "the cathedral's painted ceiling, and eat in restaurants that occupy former warehouses.\n";

static void log_fn(lmc_log_level level, const char *msg, void *user) {
    (void)level;
    (void)user;
    fprintf(stderr, "  [%s]\n", msg);
}

int main(int argc, char **argv) {
    if (getenv("BENCH_VERBOSE")) lmc_set_log_callback(log_fn, NULL);
    if (argc < 2) {
        fprintf(stderr, "usage: bench_tokenizer DIR [TEXT_FILE [MIN_MB]]\n");
        return 2;
    }
    double min_mb = argc > 3 ? atof(argv[3]) : 10.0;
    char *unit = NULL;
    size_t unit_len = 0;
    if (argc > 2 && argv[2][0]) {
        FILE *f = fopen(argv[2], "rb");
        if (!f) {
            fprintf(stderr, "cannot open %s\n", argv[2]);
            return 1;
        }
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        rewind(f);
        unit = malloc((size_t)n + 1);
        unit_len = fread(unit, 1, (size_t)n, f);
        fclose(f);
    } else {
        unit_len = sizeof PARAGRAPH - 1;
        unit = malloc(unit_len);
        memcpy(unit, PARAGRAPH, unit_len);
    }
    size_t want = (size_t)(min_mb * 1e6), len = 0;
    char *text = malloc(want + unit_len);
    while (len < want) {
        memcpy(text + len, unit, unit_len);
        len += unit_len;
    }

    lmc_tokenizer *tok = NULL;
    double best = 1e9, best_cpu = 1e9;
    for (int r = 0; r < 5; r++) {
        double t0 = now(), c0 = cpu_now();
        if (lmc_tokenizer_load(argv[1], &tok) != LMC_OK) {
            fprintf(stderr, "load: %s\n", lmc_last_error());
            return 1;
        }
        double t = now() - t0, c = cpu_now() - c0;
        if (t < best) best = t;
        if (c < best_cpu) best_cpu = c;
        if (r < 4) lmc_tokenizer_free(tok);
    }
    printf("load: %.1f ms wall, %.1f ms cpu (best of 5), vocab %d\n", best * 1e3, best_cpu * 1e3,
           (int)lmc_tokenizer_vocab_size(tok));

    int32_t *ids = NULL;
    size_t n = 0;
    double t0 = now(), c0 = cpu_now();
    if (lmc_tokenizer_encode(tok, text, len, 0, &ids, &n) != LMC_OK) {
        fprintf(stderr, "encode: %s\n", lmc_last_error());
        return 1;
    }
    double t = now() - t0, c = cpu_now() - c0;
    printf("encode: %.2f MB in %.3f s wall = %.1f MB/s (cpu %.1f MB/s), %zu tokens (%.2f "
           "bytes/token)\n",
           len / 1e6, t, len / 1e6 / t, len / 1e6 / c, n, (double)len / (double)n);
    char *back = NULL;
    size_t back_len = 0;
    t0 = now();
    if (lmc_tokenizer_decode(tok, ids, n, 0, &back, &back_len) != LMC_OK) {
        fprintf(stderr, "decode: %s\n", lmc_last_error());
        return 1;
    }
    t = now() - t0;
    printf("decode: %.1f MB/s, round trip %s\n", back_len / 1e6 / t,
           back_len == len && !memcmp(back, text, len) ? "exact" : "differs");
    lmc_free(back);
    lmc_free(ids);
    lmc_tokenizer_free(tok);
    free(text);
    free(unit);
    return 0;
}
