/* GET /metrics: Prometheus' text exposition format (version 0.0.4) of the
 * server's counters, gauges and histograms. */
#include "serve.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* seconds; the same buckets serve latency, queue wait and time to first token */
static const double BUCKETS[SERVE_HIST_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                   1,     2.5,  5,     10,   30,  60,   300};

void serve_metrics_init(serve_metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
}

void serve_metrics_destroy(serve_metrics *m) {
    pthread_mutex_destroy(&m->mu);
}

const char *serve_route_name(serve_route r) {
    static const char *const names[ROUTE_COUNT] = {
        "/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/tokenize",
        "/detokenize",          "/metrics",        "other"};
    return r < ROUTE_COUNT ? names[r] : "other";
}

void serve_histogram_add(serve_histogram *h, double v) {
    int i = 0;
    while (i < SERVE_HIST_BUCKETS && v > BUCKETS[i]) i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

void serve_metrics_request(serve_metrics *m, serve_route r, int status, double seconds) {
    int cls = status >= 100 && status < 600 ? status / 100 - 1 : 5;
    pthread_mutex_lock(&m->mu);
    m->requests[r][cls]++;
    serve_histogram_add(&m->latency[r], seconds);
    pthread_mutex_unlock(&m->mu);
}

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool failed;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)n;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

static void histogram(sbuf *b, const char *name, const char *labels, const serve_histogram *h) {
    uint64_t cum = 0;
    const char *sep = labels[0] ? "," : "";
    for (int i = 0; i < SERVE_HIST_BUCKETS; i++) {
        cum += h->counts[i];
        put(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, BUCKETS[i],
            (unsigned long long)cum);
    }
    cum += h->counts[SERVE_HIST_BUCKETS];
    put(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep, (unsigned long long)cum);
    put(b, "%s_sum{%s} %.6f\n%s_count{%s} %llu\n", name, labels, h->sum, name, labels,
        (unsigned long long)h->count);
}

static void counter(sbuf *b, const char *name, const char *help, uint64_t v) {
    put(b, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name,
        (unsigned long long)v);
}

static void gauge(sbuf *b, const char *name, const char *help, double v) {
    put(b, "# HELP %s %s\n# TYPE %s gauge\n%s %.17g\n", name, help, name, name, v);
}

char *serve_metrics_text(serve_metrics *m) {
    sbuf b = {.p = malloc(8192), .cap = 8192};
    if (!b.p) return NULL;
    b.p[0] = '\0';
    pthread_mutex_lock(&m->mu);
    put(&b, "# HELP lmc_http_requests_total HTTP requests answered, by path and status class.\n"
            "# TYPE lmc_http_requests_total counter\n");
    static const char *const cls[6] = {"1xx", "2xx", "3xx", "4xx", "5xx", "other"};
    for (int r = 0; r < ROUTE_COUNT; r++)
        for (int c = 0; c < 6; c++)
            if (m->requests[r][c])
                put(&b, "lmc_http_requests_total{path=\"%s\",code=\"%s\"} %llu\n",
                    serve_route_name((serve_route)r), cls[c],
                    (unsigned long long)m->requests[r][c]);
    put(&b, "# HELP lmc_http_request_duration_seconds From the request's arrival to the end of "
            "its response.\n# TYPE lmc_http_request_duration_seconds histogram\n");
    for (int r = 0; r < ROUTE_COUNT; r++) {
        if (!m->latency[r].count) continue;
        char labels[64];
        snprintf(labels, sizeof labels, "path=\"%s\"", serve_route_name((serve_route)r));
        histogram(&b, "lmc_http_request_duration_seconds", labels, &m->latency[r]);
    }
    put(&b, "# HELP lmc_queue_wait_seconds Time a generation waited for the model.\n"
            "# TYPE lmc_queue_wait_seconds histogram\n");
    histogram(&b, "lmc_queue_wait_seconds", "", &m->queue_wait);
    put(&b, "# HELP lmc_time_to_first_token_seconds From the start of a generation to its first "
            "token (prefill).\n# TYPE lmc_time_to_first_token_seconds histogram\n");
    histogram(&b, "lmc_time_to_first_token_seconds", "", &m->first_token);
    counter(&b, "lmc_generations_total", "Generations run on the model.", m->generations);
    counter(&b, "lmc_prompt_tokens_total", "Prompt tokens of the generations.", m->prompt_tokens);
    counter(&b, "lmc_prompt_cached_tokens_total",
            "Prompt tokens reused from the prompt cache (not computed).", m->cached_tokens);
    counter(&b, "lmc_prefill_tokens_total", "Prompt tokens computed (prompt minus cached).",
            m->prefill_tokens);
    counter(&b, "lmc_generated_tokens_total", "Tokens generated.", m->generated_tokens);
    counter(&b, "lmc_requests_cancelled_total",
            "Generations stopped because the client went away or the server shut down.",
            m->cancelled);
    counter(&b, "lmc_requests_rejected_total", "Requests refused with 503 (queue full, draining).",
            m->rejected);
    gauge(&b, "lmc_queue_depth", "Generations waiting for the model.", (double)m->queue_depth);
    gauge(&b, "lmc_requests_running", "Generations running on the model.", (double)m->running);
    gauge(&b, "lmc_prompt_cache_bytes", "Memory of the prompt cache's sessions.",
          (double)m->cache_bytes);
    gauge(&b, "lmc_prompt_cache_sessions", "Sessions (conversation prefixes) in the prompt cache.",
          (double)m->cache_sessions);
    counter(&b, "lmc_prompt_cache_hits_total", "Generations that continued a cached prefix.",
            m->cache_hits);
    counter(&b, "lmc_prompt_cache_evictions_total", "Sessions dropped to bound the memory.",
            m->cache_evictions);
    pthread_mutex_unlock(&m->mu);
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
