/* Generation jobs: a bounded FIFO queue in front of the model container and
 * the one thread that runs them, each as one lmc_container_perform
 * transaction (the container has one model; its kernels' pool serves one
 * caller at a time, so one generation at a time keeps the cores busy). A
 * streaming job's tokens become server-sent events in the job's buffer,
 * which the connection's thread drains; a job whose client is gone stops at
 * its next token. */
#include "cli.h"
#include "serve.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double serve_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void deadline_in(struct timespec *ts, int ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* ---- setup ----------------------------------------------------------------------- */

typedef struct init_job {
    serve_server *s;
    lmc_status st;
} init_job;

static lmc_status init_in_context(lmc_context *ctx, void *ud) {
    serve_server *s = ((init_job *)ud)->s;
    lmc_model_info info;
    lmc_model_get_info(lmc_context_model(ctx), &info);
    s->vocab_size = info.vocab_size;
    if (s->max_tokens <= 0) s->max_tokens = info.max_position_embeddings;
    const lmc_model_preset *p = lmc_context_preset(ctx);
    s->extra_eos = p ? p->extra_eos : NULL;
    s->tokenizer = lmc_context_tokenizer(ctx);
    s->model_dir = strdup(lmc_context_dir(ctx));
    if (!s->model_dir) return LMC_ERR_NOMEM;
    serve_cache_init(&s->cache, lmc_context_model(ctx), s->max_tokens, s->cfg.cache_bytes);
    return LMC_OK;
}

lmc_status serve_server_init(serve_server *s, const serve_config *cfg, lmc_container *c,
                             const char *model_id) {
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->container = c;
    s->max_tokens = cfg->ctx_size;
    s->started = (int64_t)time(NULL);
    serve_metrics_init(&s->metrics);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->model_id = strdup(model_id);
    if (!s->model_id) return LMC_ERR_NOMEM;
    init_job ij = {.s = s};
    return lmc_container_perform(c, init_in_context, &ij);
}

static lmc_status destroy_in_context(lmc_context *ctx, void *ud) {
    (void)ctx;
    serve_cache_destroy(&((serve_server *)ud)->cache);
    return LMC_OK;
}

void serve_server_destroy(serve_server *s) {
    if (s->container) lmc_container_perform(s->container, destroy_in_context, s);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    serve_metrics_destroy(&s->metrics);
    free(s->model_id);
    free(s->model_dir);
}

/* ---- jobs ---------------------------------------------------------------------------- */

void serve_job_release(serve_job *j) {
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left > 0) return;
    serve_request_free(&j->req);
    free(j->out);
    free(j->text);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

static void job_set_state(serve_job *j, serve_job_state st) {
    pthread_mutex_lock(&j->mu);
    j->state = st;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

serve_job_state serve_job_wait(serve_job *j, serve_job_state past, int ms) {
    struct timespec ts;
    deadline_in(&ts, ms);
    pthread_mutex_lock(&j->mu);
    while (j->state <= past && j->state != JOB_DONE)
        if (pthread_cond_timedwait(&j->cv, &j->mu, &ts) == ETIMEDOUT) break;
    serve_job_state st = j->state;
    pthread_mutex_unlock(&j->mu);
    return st;
}

void serve_job_wait_output(serve_job *j, int ms) {
    struct timespec ts;
    deadline_in(&ts, ms);
    pthread_mutex_lock(&j->mu);
    while (j->out_len == j->out_off && j->state != JOB_DONE)
        if (pthread_cond_timedwait(&j->cv, &j->mu, &ts) == ETIMEDOUT) break;
    pthread_mutex_unlock(&j->mu);
}

static atomic_ullong g_ids;

serve_job *serve_job_submit(serve_server *s, serve_request *req, serve_error *err) {
    serve_job *j = calloc(1, sizeof *j);
    if (!j) {
        serve_fail(err, 500, "server_error", NULL, NULL, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->srv = s;
    j->refs = 2; /* the caller's and the queue's (the worker's) */
    j->created = (int64_t)time(NULL);
    j->t_submit = serve_now();
    unsigned long long n = atomic_fetch_add(&g_ids, 1) + 1;
    snprintf(j->id, sizeof j->id, "%s-%08llx%08llx",
             req->endpoint == SERVE_CHAT ? "chatcmpl" : "cmpl", (unsigned long long)s->started, n);
    pthread_mutex_lock(&s->mu);
    bool full = s->queued >= s->cfg.queue && (s->running || s->head);
    if (s->stopping || atomic_load(&s->draining) || full) {
        pthread_mutex_unlock(&s->mu);
        pthread_mutex_lock(&s->metrics.mu);
        s->metrics.rejected++;
        pthread_mutex_unlock(&s->metrics.mu);
        if (full)
            serve_fail(err, 503, "server_error", "queue_full", NULL,
                       "The server is busy: %d requests are waiting for the model. Retry later.",
                       s->queued);
        else
            serve_fail(err, 503, "server_error", "shutting_down", NULL,
                       "The server is shutting down.");
        pthread_mutex_destroy(&j->mu);
        pthread_cond_destroy(&j->cv);
        free(j);
        return NULL;
    }
    j->req = *req;
    memset(req, 0, sizeof *req);
    if (s->tail)
        s->tail->next = j;
    else
        s->head = j;
    s->tail = j;
    s->queued++;
    pthread_mutex_lock(&s->metrics.mu);
    s->metrics.queue_depth = s->queued;
    pthread_mutex_unlock(&s->metrics.mu);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return j;
}

/* Takes j out of the queue (the caller holds s->mu); false when it is not there. */
static bool unlink_job(serve_server *s, serve_job *j) {
    serve_job **pp = &s->head, *prev = NULL;
    while (*pp && *pp != j) prev = *pp, pp = &(*pp)->next;
    if (!*pp) return false;
    *pp = j->next;
    if (s->tail == j) s->tail = prev;
    j->next = NULL;
    s->queued--;
    pthread_mutex_lock(&s->metrics.mu);
    s->metrics.queue_depth = s->queued;
    pthread_mutex_unlock(&s->metrics.mu);
    return true;
}

void serve_job_cancel(serve_job *j) {
    serve_server *s = j->srv;
    atomic_store(&j->cancel, 1);
    pthread_mutex_lock(&s->mu);
    bool was_queued = unlink_job(s, j); /* a waiting job frees its place at once */
    pthread_mutex_unlock(&s->mu);
    if (was_queued) {
        pthread_mutex_lock(&s->metrics.mu);
        s->metrics.cancelled++;
        pthread_mutex_unlock(&s->metrics.mu);
        job_set_state(j, JOB_DONE);
        serve_job_release(j); /* the queue's reference */
    }
}

/* ---- server-sent events -------------------------------------------------------------------- */

/* A JSON string of UTF-8 text; invalid bytes (none are expected: the
 * detokenizer emits whole characters) become U+FFFD. */
static json_t *text_json(const char *t, size_t n) {
    json_t *s = json_stringn(t, n);
    if (s) return s;
    char *fixed = malloc(n * 3 + 1);
    if (!fixed) return NULL;
    size_t o = 0, i = 0, bad;
    while (i < n) {
        if (serve_utf8_valid(t + i, n - i, &bad)) bad = n - i;
        memcpy(fixed + o, t + i, bad);
        o += bad;
        i += bad;
        if (i < n) {
            memcpy(fixed + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    s = json_stringn(fixed, o);
    free(fixed);
    return s;
}

static void out_append(serve_job *j, const char *s, size_t n) {
    pthread_mutex_lock(&j->mu);
    if (j->out_len + n > j->out_cap) {
        size_t cap = (j->out_cap ? j->out_cap * 2 : 4096) + n;
        char *p = realloc(j->out, cap);
        if (!p) {
            atomic_store(&j->cancel, 1);
            pthread_mutex_unlock(&j->mu);
            return;
        }
        j->out = p;
        j->out_cap = cap;
    }
    memcpy(j->out + j->out_len, s, n);
    j->out_len += n;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* "data: JSON\n\n"; takes o */
static void send_event(serve_job *j, json_t *o) {
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s) {
        atomic_store(&j->cancel, 1);
        return;
    }
    out_append(j, "data: ", 6);
    out_append(j, s, strlen(s));
    out_append(j, "\n\n", 2);
    free(s);
}

static json_t *usage_json(const lmc_generate_stats *st) {
    return json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", st->prompt_tokens,
                     "completion_tokens", st->generated_tokens, "total_tokens",
                     st->prompt_tokens + st->generated_tokens, "prompt_tokens_details",
                     "cached_tokens", st->cached_tokens);
}

/* One chunk: a chat delta (content or role) or a completion's text. */
static json_t *chunk(const serve_job *j, json_t *text, const char *role, const char *finish) {
    const serve_server *s = j->srv;
    bool chat = j->req.endpoint == SERVE_CHAT;
    json_t *choice;
    if (chat) {
        json_t *delta = json_object();
        if (role) json_object_set_new(delta, "role", json_string(role));
        if (text) json_object_set_new(delta, "content", text);
        choice = json_pack("{s:i, s:o, s:n, s:o}", "index", 0, "delta", delta, "logprobs",
                           "finish_reason", finish ? json_string(finish) : json_null());
    } else {
        choice =
            json_pack("{s:i, s:o, s:n, s:o}", "index", 0, "text", text ? text : json_string(""),
                      "logprobs", "finish_reason", finish ? json_string(finish) : json_null());
    }
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:[o]}", "id", j->id, "object",
                          chat ? "chat.completion.chunk" : "text_completion", "created",
                          (json_int_t)j->created, "model", s->model_id, "system_fingerprint",
                          "lmc-" LMC_CLI_VERSION, "choices", choice);
    if (o && j->req.include_usage) json_object_set_new(o, "usage", json_null());
    return o;
}

static int on_token(int32_t token, const char *text, size_t len, void *ud) {
    serve_job *j = ud;
    (void)token;
    if (j->req.stream && len > 0) send_event(j, chunk(j, text_json(text, len), NULL, NULL));
    return atomic_load(&j->cancel);
}

static const char *finish_reason(lmc_stop_reason r) {
    return r == LMC_STOP_LENGTH ? "length" : "stop";
}

char *serve_job_response_json(const serve_job *j) {
    bool chat = j->req.endpoint == SERVE_CHAT;
    json_t *text = text_json(j->text ? j->text : "", j->text_len);
    json_t *choice = chat ? json_pack("{s:i, s:{s:s, s:o, s:n}, s:n, s:s}", "index", 0, "message",
                                      "role", "assistant", "content", text, "refusal", "logprobs",
                                      "finish_reason", j->finish_reason)
                          : json_pack("{s:i, s:o, s:n, s:s}", "index", 0, "text", text, "logprobs",
                                      "finish_reason", j->finish_reason);
    json_t *o =
        json_pack("{s:s, s:s, s:I, s:s, s:s, s:[o], s:o}", "id", j->id, "object",
                  chat ? "chat.completion" : "text_completion", "created", (json_int_t)j->created,
                  "model", j->srv->model_id, "system_fingerprint", "lmc-" LMC_CLI_VERSION,
                  "choices", choice, "usage", usage_json(&j->stats));
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

/* ---- running a job on the model ----------------------------------------------------------- */

static lmc_status job_error(serve_job *j, lmc_status st, const char *param) {
    const char *msg = lmc_last_error();
    if (!msg || !*msg) msg = lmc_status_string(st);
    if (st == LMC_ERR_NOMEM || st == LMC_ERR_IO)
        serve_fail(&j->err, 500, "server_error", NULL, NULL, "%s", msg);
    else
        serve_fail(&j->err, 400, "invalid_request_error", NULL, param, "%s", msg);
    return st;
}

static lmc_status run_job(lmc_context *ctx, void *ud) {
    serve_job *j = ud;
    serve_server *s = j->srv;
    serve_request *r = &j->req;
    double t_start = serve_now();
    lmc_user_input in = {0};
    if (r->endpoint == SERVE_CHAT) {
        in.messages = r->messages;
        in.n_messages = r->n_messages;
    } else if (r->prompt) {
        in.prompt = r->prompt; /* the text as it is, with the tokenizer's BOS */
        in.no_template = 1;
    } else {
        in.tokens = r->prompt_tokens;
        in.n_tokens = r->n_prompt_tokens;
    }
    lmc_model_input mi;
    lmc_status st = lmc_context_prepare(ctx, &in, &mi);
    if (st != LMC_OK) return job_error(j, st, r->endpoint == SERVE_CHAT ? "messages" : "prompt");
    if (mi.n_tokens >= s->max_tokens) {
        serve_fail(&j->err, 400, "invalid_request_error", "context_length_exceeded",
                   r->endpoint == SERVE_CHAT ? "messages" : "prompt",
                   "This model's maximum context length is %d tokens. However, your %s resulted "
                   "in %d tokens.",
                   s->max_tokens, r->endpoint == SERVE_CHAT ? "messages" : "prompt", mi.n_tokens);
        lmc_model_input_clear(&mi);
        return LMC_ERR_RANGE;
    }
    lmc_generate_params p = r->params;
    const char *eos[16];
    int32_t n_eos = 0;
    const lmc_tokenizer *tok = lmc_context_tokenizer(ctx);
    for (const char *const *e = s->extra_eos; e && *e && n_eos < 16; e++)
        if (tok && lmc_tokenizer_token_to_id(tok, *e) >= 0) eos[n_eos++] = *e;
    p.eos_strings = eos;
    p.n_eos_strings = n_eos;
    lmc_session *session;
    int32_t reused;
    st = serve_cache_acquire(&s->cache, mi.tokens, mi.n_tokens, &session, &reused);
    if (st != LMC_OK) {
        lmc_model_input_clear(&mi);
        serve_fail(&j->err, 500, "server_error", NULL, NULL, "cannot create a session: %s",
                   lmc_last_error());
        return st;
    }
    job_set_state(j, JOB_STREAMING);
    if (r->stream && r->endpoint == SERVE_CHAT)
        send_event(j, chunk(j, json_string(""), "assistant", NULL));
    lmc_generate_result res;
    st = lmc_generate(session, tok, mi.tokens, mi.n_tokens, &p, on_token, j, &res);
    serve_cache_release(&s->cache, session);
    lmc_model_input_clear(&mi);
    j->stats = res.stats;
    j->finish_reason = finish_reason(res.stop_reason);
    bool cancelled = res.stop_reason == LMC_STOP_CALLBACK || atomic_load(&j->cancel);
    pthread_mutex_lock(&s->metrics.mu);
    serve_metrics *m = &s->metrics;
    m->generations++;
    m->prompt_tokens += (uint64_t)res.stats.prompt_tokens;
    m->cached_tokens += (uint64_t)res.stats.cached_tokens;
    m->prefill_tokens += (uint64_t)res.stats.prefill_tokens;
    m->generated_tokens += (uint64_t)res.stats.generated_tokens;
    if (cancelled) m->cancelled++;
    serve_histogram_add(&m->queue_wait, t_start - j->t_submit);
    if (res.stats.generated_tokens > 0)
        serve_histogram_add(&m->first_token, res.stats.first_token_seconds);
    m->cache_bytes = serve_cache_bytes(&s->cache);
    m->cache_sessions = (uint64_t)s->cache.n;
    m->cache_evictions = s->cache.evictions;
    m->cache_hits = s->cache.hits;
    pthread_mutex_unlock(&s->metrics.mu);
    if (st != LMC_OK) {
        job_error(j, st, NULL);
        if (r->stream) { /* the headers are out: the error is an event, as OpenAI's */
            char *e = serve_error_json(&j->err);
            if (e) {
                out_append(j, "data: ", 6);
                out_append(j, e, strlen(e));
                out_append(j, "\n\ndata: [DONE]\n\n", 16);
            }
            free(e);
        }
        lmc_generate_result_clear(&res);
        return st;
    }
    if (r->stream) {
        send_event(j, chunk(j, r->endpoint == SERVE_CHAT ? NULL : json_string(""), NULL,
                            j->finish_reason));
        if (r->include_usage) {
            json_t *u = chunk(j, NULL, NULL, NULL);
            if (u) {
                json_array_clear(json_object_get(u, "choices"));
                json_object_set_new(u, "usage", usage_json(&j->stats));
            }
            send_event(j, u);
        }
        out_append(j, "data: [DONE]\n\n", 14);
    } else {
        j->text = res.text;
        j->text_len = res.text_len;
        res.text = NULL;
    }
    lmc_generate_result_clear(&res);
    return LMC_OK;
}

static void *worker_main(void *arg) {
    serve_server *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->head && !s->stopping) pthread_cond_wait(&s->cv, &s->mu);
        serve_job *j = s->head;
        if (!j) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        unlink_job(s, j);
        s->running = j;
        pthread_mutex_unlock(&s->mu);
        pthread_mutex_lock(&s->metrics.mu);
        s->metrics.running = 1;
        pthread_mutex_unlock(&s->metrics.mu);
        job_set_state(j, JOB_RUNNING);
        if (!atomic_load(&j->cancel)) lmc_container_perform(s->container, run_job, j);
        pthread_mutex_lock(&s->metrics.mu);
        s->metrics.running = 0;
        pthread_mutex_unlock(&s->metrics.mu);
        pthread_mutex_lock(&s->mu);
        s->running = NULL;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        job_set_state(j, JOB_DONE);
        serve_job_release(j);
    }
    return NULL;
}

bool serve_worker_start(serve_server *s) {
    return pthread_create(&s->worker, NULL, worker_main, s) == 0;
}

void serve_worker_stop(serve_server *s, int grace_s) {
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    while (s->head) { /* waiting jobs are refused */
        serve_job *j = s->head;
        unlink_job(s, j);
        serve_fail(&j->err, 503, "server_error", "shutting_down", NULL,
                   "The server is shutting down.");
        atomic_store(&j->cancel, 1);
        pthread_mutex_unlock(&s->mu);
        job_set_state(j, JOB_DONE);
        serve_job_release(j);
        pthread_mutex_lock(&s->mu);
    }
    pthread_cond_broadcast(&s->cv);
    struct timespec ts;
    deadline_in(&ts, grace_s * 1000);
    while (s->running)
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT) break;
    if (s->running) atomic_store(&s->running->cancel, 1); /* past the grace: stop it */
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->worker, NULL);
}
