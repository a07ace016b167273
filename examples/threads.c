/* Many threads share one model container: each request (prepare + generate)
 * is one transaction under the container's lock. Checks that every thread
 * got what the same request gives alone.
 *   cc threads.c $(pkg-config --cflags --libs lmc) -lpthread -o threads
 *   ./threads MODEL [THREADS] */
#include <lmc.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NEW 8

typedef struct job {
    lmc_container *model;
    int id;
    int32_t out[MAX_NEW];
    int32_t n_out;
    lmc_status st;
} job;

static lmc_status request(lmc_context *ctx, void *user_data) {
    job *j = user_data;
    int32_t prompt[4] = {1, 10 + j->id % 50, 20, 30};
    lmc_user_input in = {.tokens = prompt, .n_tokens = 4};
    lmc_generate_params p;
    lmc_generate_params_default(&p);
    p.max_tokens = MAX_NEW;
    p.seed = (uint64_t)j->id;
    p.ignore_eos = 1;
    lmc_generate_result r;
    lmc_status st = lmc_context_generate(ctx, &in, &p, NULL, NULL, &r);
    j->n_out = r.n_tokens;
    memcpy(j->out, r.tokens, sizeof(int32_t) * (size_t)r.n_tokens);
    lmc_generate_result_clear(&r);
    return st;
}

static void *worker(void *arg) {
    job *j = arg;
    j->st = lmc_container_perform(j->model, request, j);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [THREADS]\n", argv[0]);
        return 2;
    }
    int n = argc > 2 ? atoi(argv[2]) : 8;
    if (n < 1 || n > 256) n = 8;
    lmc_container *model = NULL;
    if (lmc_llm_load(argv[1], NULL, &model) != LMC_OK) {
        fprintf(stderr, "%s\n", lmc_last_error());
        return 1;
    }
    job *jobs = calloc((size_t)n, sizeof *jobs), alone;
    pthread_t *t = calloc((size_t)n, sizeof *t);
    for (int i = 0; i < n; i++) {
        jobs[i] = (job){.model = model, .id = i};
        pthread_create(&t[i], NULL, worker, &jobs[i]);
    }
    int bad = 0;
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < n; i++) {
        alone = (job){.model = model, .id = i};
        worker(&alone);
        if (jobs[i].st != LMC_OK || alone.st != LMC_OK || jobs[i].n_out != alone.n_out ||
            memcmp(jobs[i].out, alone.out, sizeof(int32_t) * (size_t)alone.n_out))
            bad++;
    }
    printf("%d threads, %d requests differ from the same request alone\n", n, bad);
    free(jobs);
    free(t);
    lmc_container_free(model);
    return bad ? 1 : 0;
}
