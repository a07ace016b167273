/* lmc serve: the OpenAI-compatible HTTP server's parts, shared by its files.
 *
 *   serve_request.c  a request body (JSON) -> generation parameters, or an
 *                    OpenAI-style error (no HTTP, no model: fuzzed alone)
 *   serve_cache.c    the prompt cache: sessions over the model, one per
 *                    conversation prefix, least recently used first out,
 *                    bounded in bytes
 *   serve_metrics.c  counters and histograms, Prometheus text
 *   serve_worker.c   the bounded queue of generation jobs and the thread that
 *                    runs them on the model container; SSE chunks
 *   serve_http.c     libmicrohttpd: routing, auth, bodies, responses, streams
 *   cmd_serve.c      options, loading, signals and shutdown
 */
#ifndef LMC_SERVE_H
#define LMC_SERVE_H

#include "lmc.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- errors: OpenAI's {"error": {message, type, param, code}} --------------- */

typedef struct serve_error {
    int status;       /* the HTTP status, 4xx or 5xx */
    const char *type; /* "invalid_request_error", "server_error", ... (static) */
    const char *code; /* NULL, or "context_length_exceeded", "model_not_found", ... (static) */
    char param[64];   /* the request field at fault; "" for none */
    char message[512];
} serve_error;

/* Fills e and returns e->status. param may be NULL. */
int serve_fail(serve_error *e, int status, const char *type, const char *code, const char *param,
               const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* e as the JSON body OpenAI sends; malloc'd, NULL when out of memory. */
char *serve_error_json(const serve_error *e);

/* ---- requests (serve_request.c) ---------------------------------------------- */

typedef enum serve_endpoint {
    SERVE_CHAT,       /* POST /v1/chat/completions */
    SERVE_COMPLETION, /* POST /v1/completions */
} serve_endpoint;

/* Limits on what one request may ask for. */
#define SERVE_MAX_STOP 16
#define SERVE_MAX_LOGIT_BIAS 1024
#define SERVE_MAX_TOKENS_LIMIT (1 << 24)

/* A parsed generation request. Strings point into root; everything is freed
 * by serve_request_free. */
typedef struct serve_request {
    serve_endpoint endpoint;
    json_t *root;
    const char *model;     /* NULL when not given */
    lmc_message *messages; /* chat: n_messages of them */
    int32_t n_messages;
    char **texts; /* contents joined from parts, owned */
    int32_t n_texts;
    const char *prompt;     /* completions: the text, or NULL for token ids */
    int32_t *prompt_tokens; /* completions: token ids, owned */
    int32_t n_prompt_tokens;
    lmc_generate_params params; /* stop and logit_bias point into the arrays below */
    const char **stop;
    lmc_logit_bias *logit_bias;
    bool max_tokens_given;
    bool stream;
    bool include_usage; /* stream_options.include_usage */
} serve_request;

/* Parses a request body of endpoint ep. vocab_size bounds token ids and
 * logit_bias keys; default_max_tokens is max_tokens when the request has
 * none. Returns true with *out filled, or false with *err (a 4xx) and *out
 * empty. Unknown fields are ignored; the fields OpenAI defines are checked
 * for their types even when they are not used. */
bool serve_request_parse(serve_endpoint ep, const char *body, size_t len, int32_t vocab_size,
                         int32_t default_max_tokens, serve_request *out, serve_error *err);
void serve_request_free(serve_request *r);

/* Whether s[0..n) is valid UTF-8; *bad gets the offset of the first bad byte. */
bool serve_utf8_valid(const char *s, size_t n, size_t *bad);

/* ---- metrics (serve_metrics.c) --------------------------------------------------- */

enum { SERVE_HIST_BUCKETS = 14 };
typedef struct serve_histogram {
    uint64_t counts[SERVE_HIST_BUCKETS + 1]; /* the last is +Inf */
    double sum;
    uint64_t count;
} serve_histogram;

typedef enum serve_route {
    ROUTE_CHAT,
    ROUTE_COMPLETIONS,
    ROUTE_MODELS,
    ROUTE_HEALTH,
    ROUTE_TOKENIZE,
    ROUTE_DETOKENIZE,
    ROUTE_METRICS,
    ROUTE_OTHER,
    ROUTE_COUNT
} serve_route;

typedef struct serve_metrics {
    pthread_mutex_t mu;                /* guards everything below */
    uint64_t requests[ROUTE_COUNT][6]; /* by status class: 1xx..5xx, other */
    uint64_t prompt_tokens, cached_tokens, prefill_tokens, generated_tokens;
    uint64_t cancelled, rejected, generations;
    serve_histogram latency[ROUTE_COUNT]; /* request received -> response sent */
    serve_histogram queue_wait, first_token;
    /* gauges, set by the worker */
    int64_t queue_depth, running;
    uint64_t cache_bytes, cache_sessions, cache_evictions, cache_hits;
} serve_metrics;

void serve_metrics_init(serve_metrics *m);
void serve_metrics_destroy(serve_metrics *m);
const char *serve_route_name(serve_route r);
void serve_metrics_request(serve_metrics *m, serve_route r, int status, double seconds);
/* The Prometheus text exposition; malloc'd. */
char *serve_metrics_text(serve_metrics *m);
void serve_histogram_add(serve_histogram *h, double v);

/* ---- the prompt cache (serve_cache.c) ----------------------------------------------- */

typedef struct serve_cache_entry {
    lmc_session *session;
    uint64_t last_used;
} serve_cache_entry;

/* Used only inside lmc_container_perform (the container's lock guards it). */
typedef struct serve_cache {
    lmc_model *model;
    int32_t max_tokens; /* each session's capacity */
    size_t max_bytes;   /* bound on the sessions' memory (one session always stays) */
    serve_cache_entry *v;
    int n, cap;
    uint64_t clock, evictions, hits;
} serve_cache;

void serve_cache_init(serve_cache *c, lmc_model *model, int32_t max_tokens, size_t max_bytes);
void serve_cache_destroy(serve_cache *c);
/* The session to continue prompt[0..n) on: the one holding the longest
 * prefix of it, unless reusing that would throw away more than it keeps
 * and memory allows a fresh one. *reused gets the prefix length it holds. */
lmc_status serve_cache_acquire(serve_cache *c, const int32_t *prompt, int32_t n, lmc_session **out,
                               int32_t *reused);
/* Marks s used and frees the least recently used others while the cache is
 * over its bytes. */
void serve_cache_release(serve_cache *c, lmc_session *s);
size_t serve_cache_bytes(const serve_cache *c);

/* ---- the server (serve_worker.c, serve_http.c) ------------------------------------------- */

typedef struct serve_config {
    const char *host;
    int port;
    const char *api_key;  /* NULL: no auth */
    size_t max_body;      /* bytes */
    int queue;            /* jobs that may wait for the model */
    int timeout;          /* seconds a connection may be idle / a body may take */
    int shutdown_timeout; /* seconds in-flight jobs get at shutdown */
    int32_t default_max_tokens;
    int32_t ctx_size; /* tokens of each session; 0 = the model's context */
    size_t cache_bytes;
} serve_config;

typedef enum serve_job_state { JOB_QUEUED, JOB_RUNNING, JOB_STREAMING, JOB_DONE } serve_job_state;

typedef struct serve_job serve_job;
typedef struct serve_server serve_server;

struct serve_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs; /* the handler's and the worker's */
    serve_server *srv;
    serve_request req;
    char id[40];
    int64_t created;
    double t_submit;
    atomic_int cancel; /* set by the handler when the client is gone, or at shutdown */
    serve_job_state state;
    /* SSE bytes not yet handed to the connection (streaming) */
    char *out;
    size_t out_len, out_cap, out_off;
    /* the result */
    serve_error err; /* err.status != 0: failed */
    char *text;      /* the generated text (non-streaming) */
    size_t text_len;
    const char *finish_reason;
    lmc_generate_stats stats;
    serve_job *next;
};

struct serve_server {
    serve_config cfg;
    lmc_container *container;
    char *model_id;  /* what /v1/models lists */
    char *model_dir; /* the folder; requests may name the model by it or its basename */
    int32_t vocab_size, max_tokens;
    const lmc_tokenizer *tokenizer; /* the container's (read-only, any thread); may be NULL */
    const char *const *extra_eos;   /* the preset's, NULL-terminated, or NULL */
    serve_metrics metrics;
    serve_cache cache;
    /* the queue */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    serve_job *head, *tail;
    int queued;
    bool stopping;       /* no new jobs; the worker exits once the queue is empty */
    atomic_int draining; /* shutdown began: /health says so, new requests get 503 */
    serve_job *running;
    pthread_t worker;
    struct MHD_Daemon *daemon;
    int64_t started;
};

/* serve_worker.c */
lmc_status serve_server_init(serve_server *s, const serve_config *cfg, lmc_container *c,
                             const char *model_id);
/* Starts the worker thread. */
bool serve_worker_start(serve_server *s);
/* A new job for req (moved into the job: the caller's req is emptied).
 * Returns NULL with *err a 503 when the queue is full or the server is
 * draining. The caller holds one reference; serve_job_release drops it. */
serve_job *serve_job_submit(serve_server *s, serve_request *req, serve_error *err);
void serve_job_release(serve_job *j);
/* The client is gone: a waiting job leaves the queue at once, a running one
 * stops at its next token. */
void serve_job_cancel(serve_job *j);
/* Waits until the job is past state (or done), at most ms milliseconds;
 * returns its state. */
serve_job_state serve_job_wait(serve_job *j, serve_job_state past, int ms);
/* Waits until the job has unread stream bytes or is done, at most ms. */
void serve_job_wait_output(serve_job *j, int ms);
/* Shutdown: queued jobs fail with 503, the running one gets grace_s
 * seconds and is then cancelled; the worker thread is joined. */
void serve_worker_stop(serve_server *s, int grace_s);
void serve_server_destroy(serve_server *s);
/* The non-streaming response body of a finished job; malloc'd. */
char *serve_job_response_json(const serve_job *j);
double serve_now(void);

/* serve_http.c */
bool serve_http_start(serve_server *s);
/* Stops accepting connections (the listening socket is closed). */
void serve_http_quiesce(serve_server *s);
/* Closes every connection and joins their threads. */
void serve_http_stop(serve_server *s);
/* The port bound (useful with port 0). */
int serve_http_port(serve_server *s);

#endif
