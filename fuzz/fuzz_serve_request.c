/* libFuzzer target: lmc serve's request-body parser (JSON -> generation
 * parameters) over arbitrary bytes. The first byte picks the endpoint (even:
 * /v1/chat/completions, odd: /v1/completions), the rest is the body. What
 * parses must be within the bounds the parser promises; what does not must
 * come back as a 4xx with a message that is valid UTF-8 and an error
 * object that is valid JSON. */
#include "serve.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define VOCAB 32000

static void check_text(const char *s) {
    if (!s || !serve_utf8_valid(s, strlen(s), NULL)) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    serve_endpoint ep = (data[0] & 1) ? SERVE_COMPLETION : SERVE_CHAT;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    serve_request r;
    serve_error e;
    if (!serve_request_parse(ep, body, len, VOCAB, 512, &r, &e)) {
        if (e.status < 400 || e.status > 500 || !e.message[0] || r.root) __builtin_trap();
        check_text(e.message);
        char *j = serve_error_json(&e);
        json_error_t je;
        json_t *back = j ? json_loads(j, 0, &je) : NULL;
        if (!back || !json_is_string(json_object_get(json_object_get(back, "error"), "message")))
            __builtin_trap();
        json_decref(back);
        free(j);
        return 0;
    }
    const lmc_generate_params *p = &r.params;
    if (p->max_tokens < 1 || p->max_tokens > SERVE_MAX_TOKENS_LIMIT) __builtin_trap();
    if (!(p->temperature >= 0 && p->temperature <= 2)) __builtin_trap();
    if (!(p->top_p > 0 && p->top_p <= 1) || !(p->min_p >= 0 && p->min_p <= 1)) __builtin_trap();
    if (!(p->repetition_penalty > 0) || p->top_k < 0 || p->repetition_context < 1) __builtin_trap();
    if (!(fabsf(p->presence_penalty) <= 2) || !(fabsf(p->frequency_penalty) <= 2)) __builtin_trap();
    if (p->n_stop < 0 || p->n_stop > SERVE_MAX_STOP || (p->n_stop && !p->stop)) __builtin_trap();
    for (int32_t i = 0; i < p->n_stop; i++)
        if (!p->stop[i][0])
            __builtin_trap();
        else
            check_text(p->stop[i]);
    if (p->n_logit_bias < 0 || p->n_logit_bias > SERVE_MAX_LOGIT_BIAS) __builtin_trap();
    for (int32_t i = 0; i < p->n_logit_bias; i++)
        if (p->logit_bias[i].token < 0 || p->logit_bias[i].token >= VOCAB ||
            !(fabsf(p->logit_bias[i].bias) <= 100))
            __builtin_trap();
    if (r.include_usage && !r.stream) __builtin_trap();
    if (ep == SERVE_CHAT) {
        if (r.n_messages < 1 || !r.messages || r.prompt || r.prompt_tokens) __builtin_trap();
        for (int32_t i = 0; i < r.n_messages; i++) {
            const char *role = r.messages[i].role;
            if (!role || (strcmp(role, "system") && strcmp(role, "user") &&
                          strcmp(role, "assistant") && strcmp(role, "tool")))
                __builtin_trap();
            check_text(r.messages[i].content);
        }
    } else {
        if ((r.prompt != NULL) == (r.n_prompt_tokens > 0) || r.n_messages) __builtin_trap();
        if (r.prompt) check_text(r.prompt);
        for (int32_t i = 0; i < r.n_prompt_tokens; i++)
            if (r.prompt_tokens[i] < 0 || r.prompt_tokens[i] >= VOCAB) __builtin_trap();
    }
    if (r.model) check_text(r.model);
    serve_request_free(&r);
    return 0;
}
