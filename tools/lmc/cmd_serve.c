/* lmc serve: an OpenAI-compatible HTTP server (as mlx_lm.server,
 * llama-server and ollama serve) over one model container. The server's
 * parts are the serve_*.c files (see serve.h); this file reads the options,
 * loads the model, starts the worker and libmicrohttpd, and on SIGINT or
 * SIGTERM shuts down: no new connections, waiting requests refused (503),
 * the running generation given --shutdown-timeout seconds, then exit 0. */
#include "cli.h"
#include "serve.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_t g_main_thread;

/* Runs only on a thread that does not block SIGINT/SIGTERM: one a library
 * started before ours blocked them (OpenBLAS's). Without it the signal's
 * default action would end the process there and then; passed on, it is
 * pending for the main thread's sigwait. */
static void forward_signal(int sig) {
    pthread_kill(g_main_thread, sig);
}

int cmd_serve(int argc, char **argv) {
    const char *spec = NULL, *host = "127.0.0.1", *api_key = NULL;
    long port = 8080, max_body = 1 << 20, queue = 16, timeout = 30, shutdown_timeout = 10;
    long max_tokens = 512, ctx_size = 0, cache_mb = 1024;
    const cli_option opts[] = {
        {"model", 'm', CLI_STR, &spec, "M",
         "a folder, registry name or cached hub id (default: the shipped model)", 0, 0, NULL},
        {"host", 0, CLI_STR, &host, "ADDR", "address to listen on (default 127.0.0.1)", 0, 0, NULL},
        {"port", 'p', CLI_INT, &port, "PORT", "TCP port (default 8080; 0 = any free port)", 0,
         65535, NULL},
        {"api-key", 0, CLI_STR, &api_key, "KEY",
         "require 'Authorization: Bearer KEY' on every request (or LMC_API_KEY)", 0, 0, NULL},
        {"max-body", 0, CLI_INT, &max_body, "BYTES", "largest request body (default 1048576)", 64,
         1 << 30, NULL},
        {"queue", 0, CLI_INT, &queue, "N",
         "requests that may wait for the model; more get 503 (default 16)", 0, 100000, NULL},
        {"timeout", 0, CLI_INT, &timeout, "SECONDS",
         "idle connections and request bodies are cut after this (default 30)", 1, 86400, NULL},
        {"shutdown-timeout", 0, CLI_INT, &shutdown_timeout, "SECONDS",
         "time a running generation gets to finish at shutdown (default 10)", 0, 3600, NULL},
        {"max-tokens", 'n', CLI_INT, &max_tokens, "N",
         "tokens to generate when a request does not say (default 512)", 1, 1 << 24, NULL},
        {"ctx-size", 'c', CLI_INT, &ctx_size, "N",
         "tokens of each conversation's KV cache (default: the model's context)", 0, 1 << 24, NULL},
        {"cache-mb", 0, CLI_INT, &cache_mb, "MB",
         "memory of the prompt cache (sessions of recent conversations; default 1024)", 1, 1 << 20,
         NULL},
    };
    const cli_command cmd = {
        .name = "serve",
        .synopsis = "[--model M] [--host ADDR] [--port PORT] [--api-key KEY] [options]",
        .about = "Serves the OpenAI API over HTTP: POST /v1/chat/completions, /v1/completions\n"
                 "(stream: true for server-sent events), GET /v1/models; and GET /health,\n"
                 "GET /metrics (Prometheus), POST /tokenize, /detokenize. Requests wait in a\n"
                 "bounded queue for the model; each conversation keeps its KV cache in a prompt\n"
                 "cache, so a growing chat computes only its new turn. SIGINT or SIGTERM stops\n"
                 "the server cleanly (exit 0).",
        .options = opts,
        .n_options = sizeof opts / sizeof opts[0],
        .flags = CLI_MODEL_OPTIONS,
        .examples = "  lmc serve --port 8080\n"
                    "  curl -s localhost:8080/v1/chat/completions -H 'Content-Type: "
                    "application/json' \\\n"
                    "    -d '{\"messages\": [{\"role\": \"user\", \"content\": \"Who was "
                    "Moses?\"}]}'\n"};
    int r = cli_parse(&cmd, argc, argv);
    if (r >= 0) return r;
    if (!api_key) api_key = getenv("LMC_API_KEY");
    if (api_key && !*api_key) return cli_usage_error("serve", "--api-key is empty");
    /* the worker and connection threads inherit this mask: the signals come to sigwait */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    g_main_thread = pthread_self();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward_signal;
    sigfillset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    lmc_container *c = NULL;
    if (!cli_load("serve", spec, LMC_MODEL_LLM, (int32_t)ctx_size, &c)) return CLI_EXIT_ERROR;
    serve_config cfg = {.host = host,
                        .port = (int)port,
                        .api_key = api_key,
                        .max_body = (size_t)max_body,
                        .queue = (int)queue,
                        .timeout = (int)timeout,
                        .shutdown_timeout = (int)shutdown_timeout,
                        .default_max_tokens = (int32_t)max_tokens,
                        .ctx_size = (int32_t)ctx_size,
                        .cache_bytes = (size_t)cache_mb << 20};
    serve_server *s = calloc(1, sizeof *s);
    int rc = CLI_EXIT_ERROR;
    if (!s) {
        cli_fail("serve", "out of memory");
        goto done;
    }
    lmc_status st = serve_server_init(s, &cfg, c, spec ? spec : CLI_SHIPPED_NAME);
    if (st != LMC_OK) {
        cli_fail_status("serve", st);
        goto done;
    }
    if (!serve_worker_start(s)) {
        cli_fail("serve", "cannot start the worker thread");
        goto done;
    }
    if (!serve_http_start(s)) {
        cli_fail("serve", "cannot listen on %s port %ld (in use? see --verbose)", host, port);
        serve_worker_stop(s, 0);
        goto done;
    }
    fprintf(stderr, "lmc serve: %s listening on http://%s%s%s:%d (model %s)\n", LMC_CLI_VERSION,
            strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", serve_http_port(s),
            s->model_id);
    fflush(stderr);
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "lmc serve: %s: shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    atomic_store(&s->draining, 1);
    serve_http_quiesce(s);
    serve_worker_stop(s, (int)shutdown_timeout);
    serve_http_stop(s);
    fprintf(stderr, "lmc serve: stopped\n");
    rc = CLI_EXIT_OK;
done:
    if (s) serve_server_destroy(s);
    free(s);
    lmc_container_free(c);
    return rc;
}
