/* The HTTP side of lmc serve, on libmicrohttpd: one thread per connection
 * (a handler may block while its generation waits for the model or
 * streams), routing, bearer-token auth, bounded bodies with a deadline, and
 * the responses: JSON, OpenAI-style errors, server-sent event streams. */
#include "serve.h"

#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* One request's state across the handler's calls (MHD's con_cls). */
typedef struct conn_req {
    serve_server *srv;
    serve_route route;
    double t0;
    char *body;
    size_t len, cap;
    size_t discarded; /* bytes past max_body, read and dropped */
    int status;       /* what was answered, for the metrics */
} conn_req;

/* Whether the client has closed its side (or the connection broke). */
static bool peer_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return true;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
    char b;
    return recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* ---- responses ------------------------------------------------------------------------- */

static enum MHD_Result send_body(struct MHD_Connection *c, conn_req *r, int status, char *body,
                                 const char *type) {
    if (!body) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":"
                                  "\"server_error\",\"param\":null,\"code\":null}}";
        body = strdup(oom);
        status = 500;
        if (!body) return MHD_NO;
    }
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (status == 401) MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (status == 503) MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (status == 405)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW,
                                r->route == ROUTE_CHAT || r->route == ROUTE_COMPLETIONS ||
                                        r->route == ROUTE_TOKENIZE || r->route == ROUTE_DETOKENIZE
                                    ? "POST"
                                    : "GET");
    r->status = status;
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ok;
}

static enum MHD_Result send_json(struct MHD_Connection *c, conn_req *r, int status, json_t *o) {
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return send_body(c, r, status, s, "application/json");
}

static enum MHD_Result send_error(struct MHD_Connection *c, conn_req *r, const serve_error *e) {
    return send_body(c, r, e->status, serve_error_json(e), "application/json");
}

/* ---- streaming ----------------------------------------------------------------------------- */

typedef struct stream_ctx {
    serve_job *job;
    struct MHD_Connection *conn;
} stream_ctx;

/* MHD asks for the next bytes of the stream: the job's buffered events, or
 * a wait for them (the connection has its own thread). */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream_ctx *sc = cls;
    serve_job *j = sc->job;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        size_t avail = j->out_len - j->out_off;
        if (avail > 0) {
            size_t n = avail < max ? avail : max;
            memcpy(buf, j->out + j->out_off, n);
            j->out_off += n;
            if (j->out_off == j->out_len) j->out_off = j->out_len = 0;
            pthread_mutex_unlock(&j->mu);
            return (ssize_t)n;
        }
        bool done = j->state == JOB_DONE;
        pthread_mutex_unlock(&j->mu);
        if (done) return MHD_CONTENT_READER_END_OF_STREAM;
        if (peer_gone(sc->conn)) {
            serve_job_cancel(j);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        serve_job_wait_output(j, 100);
    }
}

static void stream_free(void *cls) {
    stream_ctx *sc = cls;
    serve_job_cancel(sc->job); /* a no-op when it has finished */
    serve_job_release(sc->job);
    free(sc);
}

/* ---- the endpoints ------------------------------------------------------------------------- */

static bool model_known(const serve_server *s, const char *m) {
    if (!m || !strcmp(m, s->model_id) || !strcmp(m, s->model_dir)) return true;
    const char *base = strrchr(s->model_dir, '/');
    base = base ? base + 1 : s->model_dir;
    return !strcmp(m, base);
}

static enum MHD_Result generate(struct MHD_Connection *c, conn_req *r, serve_endpoint ep) {
    serve_server *s = r->srv;
    serve_request req;
    serve_error err;
    if (!serve_request_parse(ep, r->body ? r->body : "", r->len, s->vocab_size,
                             s->cfg.default_max_tokens, &req, &err))
        return send_error(c, r, &err);
    if (!model_known(s, req.model)) {
        serve_fail(&err, 404, "invalid_request_error", "model_not_found", "model",
                   "The model '%.200s' does not exist; this server has '%.200s'.", req.model,
                   s->model_id);
        serve_request_free(&req);
        return send_error(c, r, &err);
    }
    bool stream = req.stream;
    serve_job *j = serve_job_submit(s, &req, &err);
    serve_request_free(&req); /* empty unless the submit failed */
    if (!j) return send_error(c, r, &err);
    /* wait for the generation to start (streams) or end, watching the client */
    serve_job_state past = stream ? JOB_RUNNING : JOB_STREAMING;
    serve_job_state st;
    while ((st = serve_job_wait(j, past, 100)) <= past && st != JOB_DONE) {
        if (peer_gone(c)) {
            serve_job_cancel(j);
            serve_job_release(j);
            r->status = 499; /* nginx's "client closed request" */
            return MHD_NO;
        }
    }
    enum MHD_Result ok;
    if (j->err.status && (!stream || st == JOB_DONE) && !(stream && j->out_len)) {
        ok = send_error(c, r, &j->err);
        serve_job_release(j);
        return ok;
    }
    if (!stream) {
        ok = send_body(c, r, 200, serve_job_response_json(j), "application/json");
        serve_job_release(j);
        return ok;
    }
    stream_ctx *sc = malloc(sizeof *sc);
    struct MHD_Response *resp =
        sc ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, sc, stream_free)
           : NULL;
    if (!resp) {
        free(sc);
        serve_job_cancel(j);
        serve_job_release(j);
        return MHD_NO;
    }
    sc->job = j;
    sc->conn = c;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    r->status = 200;
    ok = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp); /* stream_free runs when MHD is done with it */
    return ok;
}

static json_t *model_object(const serve_server *s) {
    return json_pack("{s:s, s:s, s:I, s:s}", "id", s->model_id, "object", "model", "created",
                     (json_int_t)s->started, "owned_by", "lmc");
}

static enum MHD_Result models(struct MHD_Connection *c, conn_req *r, const char *url) {
    serve_server *s = r->srv;
    const char *id = url + strlen("/v1/models");
    if (*id == '/' && id[1]) {
        serve_error e;
        if (!model_known(s, id + 1)) {
            serve_fail(&e, 404, "invalid_request_error", "model_not_found", "model",
                       "The model '%.200s' does not exist.", id + 1);
            return send_error(c, r, &e);
        }
        return send_json(c, r, 200, model_object(s));
    }
    return send_json(c, r, 200,
                     json_pack("{s:s, s:[o]}", "object", "list", "data", model_object(s)));
}

/* POST /tokenize {"content": TEXT, "add_special": BOOL} -> {"tokens": [...]}, as llama-server */
static enum MHD_Result tokenize(struct MHD_Connection *c, conn_req *r, bool detok) {
    serve_server *s = r->srv;
    serve_error e = {0};
    size_t bad;
    json_error_t je;
    json_t *root = NULL, *out = NULL;
    if (!serve_utf8_valid(r->body ? r->body : "", r->len, &bad)) {
        serve_fail(&e, 400, "invalid_request_error", "invalid_utf8", NULL,
                   "The request body is not valid UTF-8 (byte %zu).", bad);
        goto done;
    }
    root = json_loadb(r->body ? r->body : "", r->len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(root)) {
        serve_fail(&e, 400, "invalid_request_error", "invalid_json", NULL,
                   "The request body must be a JSON object%s%s.", root ? "" : ": ",
                   root ? "" : je.text);
        goto done;
    }
    if (!s->tokenizer) {
        serve_fail(&e, 400, "invalid_request_error", NULL, NULL, "The model has no tokenizer.");
        goto done;
    }
    if (!detok) {
        json_t *t = json_object_get(root, "content"), *sp = json_object_get(root, "add_special");
        if (!json_is_string(t)) {
            serve_fail(&e, 400, "invalid_request_error", "invalid_type", "content",
                       "Invalid type for 'content': expected a string.");
            goto done;
        }
        if (sp && !json_is_boolean(sp)) {
            serve_fail(&e, 400, "invalid_request_error", "invalid_type", "add_special",
                       "Invalid type for 'add_special': expected a boolean.");
            goto done;
        }
        int32_t *ids = NULL;
        size_t n = 0;
        lmc_status st =
            lmc_tokenizer_encode(s->tokenizer, json_string_value(t), json_string_length(t),
                                 json_is_true(sp) ? LMC_ENCODE_ADD_SPECIAL : 0, &ids, &n);
        if (st != LMC_OK) {
            serve_fail(&e, 400, "invalid_request_error", NULL, "content", "%s", lmc_last_error());
            goto done;
        }
        json_t *a = json_array();
        for (size_t i = 0; a && i < n; i++) json_array_append_new(a, json_integer(ids[i]));
        lmc_free(ids);
        out = json_pack("{s:o}", "tokens", a);
    } else {
        json_t *a = json_object_get(root, "tokens");
        if (!json_is_array(a)) {
            serve_fail(&e, 400, "invalid_request_error", "invalid_type", "tokens",
                       "Invalid type for 'tokens': expected an array of token ids.");
            goto done;
        }
        size_t n = json_array_size(a), i;
        int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
        json_t *v;
        json_array_foreach(a, i, v) {
            json_int_t id = json_integer_value(v);
            if (!json_is_integer(v) || id < 0 || id >= s->vocab_size) {
                free(ids);
                serve_fail(
                    &e, 400, "invalid_request_error", "invalid_value", "tokens",
                    "Invalid 'tokens': item %zu is not a token id of the vocabulary (0..%d).", i,
                    s->vocab_size - 1);
                goto done;
            }
            if (ids) ids[i] = (int32_t)id;
        }
        char *text = NULL;
        size_t len = 0;
        lmc_status st =
            ids ? lmc_tokenizer_decode(s->tokenizer, ids, n, 0, &text, &len) : LMC_ERR_NOMEM;
        free(ids);
        if (st != LMC_OK) {
            serve_fail(&e, 500, "server_error", NULL, NULL, "%s", lmc_last_error());
            goto done;
        }
        out = json_pack("{s:s%}", "content", text, len);
        lmc_free(text);
    }
done:
    json_decref(root);
    if (e.status) return send_error(c, r, &e);
    return send_json(c, r, 200, out);
}

static enum MHD_Result dispatch(struct MHD_Connection *c, conn_req *r, const char *url) {
    serve_server *s = r->srv;
    switch (r->route) {
    case ROUTE_CHAT:
        return generate(c, r, SERVE_CHAT);
    case ROUTE_COMPLETIONS:
        return generate(c, r, SERVE_COMPLETION);
    case ROUTE_MODELS:
        return models(c, r, url);
    case ROUTE_TOKENIZE:
        return tokenize(c, r, false);
    case ROUTE_DETOKENIZE:
        return tokenize(c, r, true);
    case ROUTE_HEALTH:
        if (atomic_load(&s->draining))
            return send_json(c, r, 503, json_pack("{s:s}", "status", "shutting down"));
        return send_json(c, r, 200, json_pack("{s:s}", "status", "ok"));
    case ROUTE_METRICS:
        return send_body(c, r, 200, serve_metrics_text(&s->metrics),
                         "text/plain; version=0.0.4; charset=utf-8");
    default:
        break;
    }
    return MHD_NO;
}

/* ---- the access handler ------------------------------------------------------------------------
 */

static serve_route route_of(const char *url, bool *post) {
    static const struct {
        const char *path;
        serve_route route;
        bool post;
    } routes[] = {
        {"/v1/chat/completions", ROUTE_CHAT, true},
        {"/v1/completions", ROUTE_COMPLETIONS, true},
        {"/v1/models", ROUTE_MODELS, false},
        {"/health", ROUTE_HEALTH, false},
        {"/tokenize", ROUTE_TOKENIZE, true},
        {"/detokenize", ROUTE_DETOKENIZE, true},
        {"/metrics", ROUTE_METRICS, false},
        /* the same without /v1, as OpenAI clients with a bare base URL send them */
        {"/chat/completions", ROUTE_CHAT, true},
        {"/completions", ROUTE_COMPLETIONS, true},
        {"/models", ROUTE_MODELS, false},
    };
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        size_t n = strlen(routes[i].path);
        if (!strncmp(url, routes[i].path, n) &&
            (!url[n] || (routes[i].route == ROUTE_MODELS && url[n] == '/'))) {
            *post = routes[i].post;
            return routes[i].route;
        }
    }
    return ROUTE_OTHER;
}

/* Constant-time comparison of the bearer token. */
static bool authorized(const serve_server *s, struct MHD_Connection *c) {
    if (!s->cfg.api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7)) return false;
    h += 7;
    size_t n = strlen(h), k = strlen(s->cfg.api_key);
    unsigned char diff = n != k;
    for (size_t i = 0; i < n && i < k; i++) diff |= (unsigned char)(h[i] ^ s->cfg.api_key[i]);
    return diff == 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls) {
    (void)version;
    serve_server *s = cls;
    conn_req *r = *con_cls;
    if (!r) { /* the headers are in */
        r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        r->srv = s;
        r->t0 = serve_now();
        *con_cls = r;
        return MHD_YES;
    }
    if (*upload_size) {
        if (serve_now() - r->t0 > s->cfg.timeout) return MHD_NO; /* a body that never ends */
        size_t n = *upload_size;
        *upload_size = 0;
        if (r->discarded || r->len + n > s->cfg.max_body) {
            /* over the limit: read on (to answer 413 at the end) up to a bound, then hang up */
            r->discarded += n;
            return r->discarded > s->cfg.max_body + (8u << 20) ? MHD_NO : MHD_YES;
        }
        if (r->len + n + 1 > r->cap) {
            size_t cap = r->cap ? r->cap * 2 : 4096;
            while (cap < r->len + n + 1) cap *= 2;
            char *b = realloc(r->body, cap);
            if (!b) return MHD_NO;
            r->body = b;
            r->cap = cap;
        }
        memcpy(r->body + r->len, upload, n);
        r->len += n;
        r->body[r->len] = '\0';
        return MHD_YES;
    }
    /* the whole request is in */
    serve_error e;
    bool post = false;
    r->route = route_of(url, &post);
    if (!authorized(s, c)) {
        serve_fail(&e, 401, "invalid_request_error", "invalid_api_key", NULL,
                   "Incorrect API key provided. Send it as 'Authorization: Bearer KEY'.");
        return send_error(c, r, &e);
    }
    if (r->route == ROUTE_OTHER) {
        serve_fail(&e, 404, "invalid_request_error", "unknown_url", NULL,
                   "Unknown request URL: %.16s %.200s.", method, url);
        return send_error(c, r, &e);
    }
    if (strcmp(method, post ? "POST" : "GET") && !(!post && !strcmp(method, "HEAD"))) {
        serve_fail(&e, 405, "invalid_request_error", "method_not_allowed", NULL,
                   "Method %.16s is not allowed on %.200s; use %s.", method, url,
                   post ? "POST" : "GET");
        return send_error(c, r, &e);
    }
    if (r->discarded) {
        serve_fail(&e, 413, "invalid_request_error", "request_too_large", NULL,
                   "The request body is larger than %zu bytes.", s->cfg.max_body);
        return send_error(c, r, &e);
    }
    if (atomic_load(&s->draining) && r->route != ROUTE_HEALTH && r->route != ROUTE_METRICS) {
        serve_fail(&e, 503, "server_error", "shutting_down", NULL, "The server is shutting down.");
        return send_error(c, r, &e);
    }
    return dispatch(c, r, url);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)c;
    serve_server *s = cls;
    conn_req *r = *con_cls;
    if (!r) return;
    int status = r->status;
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && status == 200) status = 499;
    if (status) serve_metrics_request(&s->metrics, r->route, status, serve_now() - r->t0);
    free(r->body);
    free(r);
    *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    if (!*(const bool *)cls) return;
    fprintf(stderr, "lmc serve: libmicrohttpd: ");
    vfprintf(stderr, fmt, ap);
}

extern bool cli_verbose;

bool serve_http_start(serve_server *s) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", s->cfg.port);
    int g = getaddrinfo(s->cfg.host, port, &hints, &ai);
    if (g != 0) {
        fprintf(stderr, "lmc serve: cannot resolve --host %s: %s\n", s->cfg.host, gai_strerror(g));
        return false;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    s->daemon = MHD_start_daemon(
        flags, (uint16_t)s->cfg.port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->cfg.timeout, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)(s->cfg.queue + 64), MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, &cli_verbose, MHD_OPTION_END);
    freeaddrinfo(ai);
    return s->daemon != NULL;
}

int serve_http_port(serve_server *s) {
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    return i ? i->port : s->cfg.port;
}

void serve_http_quiesce(serve_server *s) {
    MHD_socket fd = MHD_quiesce_daemon(s->daemon);
    if (fd != MHD_INVALID_SOCKET) close(fd);
}

void serve_http_stop(serve_server *s) {
    MHD_stop_daemon(s->daemon);
    s->daemon = NULL;
}
