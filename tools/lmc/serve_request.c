/* A request body -> generation parameters, as OpenAI's API reference
 * defines the fields of /v1/chat/completions and /v1/completions, with
 * mlx_lm.server's extensions (top_k, min_p, repetition_penalty,
 * repetition_context_size). Every failure is an OpenAI-style 400 naming the
 * field. Nothing here touches HTTP or the model (the fuzz target runs it
 * alone). */
#include "serve.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int serve_fail(serve_error *e, int status, const char *type, const char *code, const char *param,
               const char *fmt, ...) {
    e->status = status;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    /* the message quotes client text: cut it at a character boundary */
    size_t n = strlen(e->message), bad;
    if (!serve_utf8_valid(e->message, n, &bad)) e->message[bad] = '\0';
    return status;
}

char *serve_error_json(const serve_error *e) {
    json_t *o = json_pack("{s:{s:s, s:s, s:o, s:o}}", "error", "message", e->message, "type",
                          e->type ? e->type : "invalid_request_error", "param",
                          e->param[0] ? json_string(e->param) : json_null(), "code",
                          e->code ? json_string(e->code) : json_null());
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

bool serve_utf8_valid(const char *str, size_t n, size_t *bad) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        unsigned min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            len = 2, min = 0x80, c &= 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3, min = 0x800, c &= 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4, min = 0x10000, c &= 0x07;
        } else {
            goto fail;
        }
        if (i + len > n) goto fail;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) goto fail;
            c = (c << 6) | (s[i + k] & 0x3F);
        }
        if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) goto fail;
        i += len;
    }
    return true;
fail:
    if (bad) *bad = i;
    return false;
}

/* ---- typed field access --------------------------------------------------------- */

static int bad_type(serve_error *e, const char *field, const char *want) {
    return serve_fail(e, 400, "invalid_request_error", "invalid_type", field,
                      "Invalid type for '%s': expected %s.", field, want);
}

static int bad_value(serve_error *e, const char *field, const char *fmt, double v) {
    char what[160];
    snprintf(what, sizeof what, fmt, v);
    return serve_fail(e, 400, "invalid_request_error", "invalid_value", field,
                      "Invalid value for '%s': %s.", field, what);
}

/* The field, or NULL when absent or null (OpenAI: null is the default). */
static json_t *field(json_t *root, const char *name) {
    json_t *v = json_object_get(root, name);
    return v && !json_is_null(v) ? v : NULL;
}

/* A number in [lo, hi] (lo_open: lo excluded). Returns 0 when absent. */
static int get_number(json_t *root, const char *name, double lo, double hi, bool lo_open,
                      double *out, bool *given, serve_error *e) {
    json_t *v = field(root, name);
    if (given) *given = v != NULL;
    if (!v) return 0;
    if (!json_is_number(v)) return bad_type(e, name, "a number");
    double d = json_number_value(v);
    if (!isfinite(d) || d > hi || (lo_open ? d <= lo : d < lo)) {
        char fmt[96];
        snprintf(fmt, sizeof fmt, "%%g is outside %s%g, %g]", lo_open ? "(" : "[", lo, hi);
        return bad_value(e, name, fmt, d);
    }
    *out = d;
    return 0;
}

/* An integer in [lo, hi]; reals with an integral value (16.0) are accepted. */
static int get_integer(json_t *root, const char *name, long long lo, long long hi, long long *out,
                       bool *given, serve_error *e) {
    json_t *v = field(root, name);
    if (given) *given = v != NULL;
    if (!v) return 0;
    long long n;
    if (json_is_integer(v)) {
        n = json_integer_value(v);
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        if (!(d == floor(d)) || fabs(d) > 9.0e18) return bad_type(e, name, "an integer");
        n = (long long)d;
    } else {
        return bad_type(e, name, "an integer");
    }
    if (n < lo || n > hi) {
        char fmt[96];
        snprintf(fmt, sizeof fmt, "%%.0f is outside [%lld, %lld]", lo, hi);
        return bad_value(e, name, fmt, (double)n);
    }
    *out = n;
    return 0;
}

static int get_bool(json_t *root, const char *name, bool *out, serve_error *e) {
    json_t *v = field(root, name);
    if (!v) return 0;
    if (!json_is_boolean(v)) return bad_type(e, name, "a boolean");
    *out = json_is_true(v);
    return 0;
}

/* Fields of OpenAI's API that lmc does not act on: checked for their type,
 * then ignored, or refused when they ask for what is not there. */
typedef enum json_kind { K_STRING, K_BOOL, K_INT, K_OBJECT, K_ARRAY, K_STR_OR_OBJ } json_kind;
typedef struct typed_field {
    const char *name;
    json_kind kind;
    unsigned endpoints; /* 1 << SERVE_CHAT | 1 << SERVE_COMPLETION */
} typed_field;

#define CHAT (1u << SERVE_CHAT)
#define COMPL (1u << SERVE_COMPLETION)
static const typed_field IGNORED[] = {
    {"user", K_STRING, CHAT | COMPL},
    {"store", K_BOOL, CHAT},
    {"metadata", K_OBJECT, CHAT},
    {"service_tier", K_STRING, CHAT | COMPL},
    {"tools", K_ARRAY, CHAT},
    {"tool_choice", K_STR_OR_OBJ, CHAT},
    {"parallel_tool_calls", K_BOOL, CHAT},
    {"functions", K_ARRAY, CHAT},
    {"function_call", K_STR_OR_OBJ, CHAT},
    {"modalities", K_ARRAY, CHAT},
    {"reasoning_effort", K_STRING, CHAT},
    {"prediction", K_OBJECT, CHAT},
    {"web_search_options", K_OBJECT, CHAT},
    {"prompt_cache_key", K_STRING, CHAT},
    {"safety_identifier", K_STRING, CHAT},
    {"verbosity", K_STRING, CHAT},
    {"top_logprobs", K_INT, CHAT},
    {"best_of", K_INT, COMPL},
    {"echo", K_BOOL, COMPL},
    {"suffix", K_STRING, COMPL},
    {"response_format", K_OBJECT, CHAT},
    {"audio", K_OBJECT, CHAT},
};

static int check_ignored(json_t *root, serve_endpoint ep, serve_error *e) {
    static const char *const want[] = {"a string",  "a boolean", "an integer",
                                       "an object", "an array",  "a string or an object"};
    for (size_t i = 0; i < sizeof IGNORED / sizeof IGNORED[0]; i++) {
        const typed_field *f = &IGNORED[i];
        if (!(f->endpoints & (1u << ep))) continue;
        json_t *v = field(root, f->name);
        if (!v) continue;
        bool ok = false;
        switch (f->kind) {
        case K_STRING:
            ok = json_is_string(v);
            break;
        case K_BOOL:
            ok = json_is_boolean(v);
            break;
        case K_INT:
            ok = json_is_integer(v);
            break;
        case K_OBJECT:
            ok = json_is_object(v);
            break;
        case K_ARRAY:
            ok = json_is_array(v);
            break;
        case K_STR_OR_OBJ:
            ok = json_is_string(v) || json_is_object(v);
            break;
        }
        if (!ok) return bad_type(e, f->name, want[f->kind]);
    }
    /* asked-for features that are not there */
    json_t *v;
    if ((v = field(root, "best_of")) && json_integer_value(v) != 1)
        return serve_fail(e, 400, "invalid_request_error", "unsupported_value", "best_of",
                          "best_of must be 1: one completion per request is supported.");
    if ((v = field(root, "echo")) && json_is_true(v))
        return serve_fail(e, 400, "invalid_request_error", "unsupported_value", "echo",
                          "echo is not supported.");
    if ((v = field(root, "suffix")) && json_string_length(v) > 0)
        return serve_fail(e, 400, "invalid_request_error", "unsupported_value", "suffix",
                          "suffix is not supported.");
    if ((v = field(root, "response_format"))) {
        const char *t = json_string_value(json_object_get(v, "type"));
        if (!t || strcmp(t, "text"))
            return serve_fail(e, 400, "invalid_request_error", "unsupported_value",
                              "response_format",
                              "response_format: only {\"type\": \"text\"} is supported.");
    }
    /* logprobs: a boolean for chat, an integer (0..5) for completions */
    if ((v = field(root, "logprobs"))) {
        if (ep == SERVE_CHAT && !json_is_boolean(v)) return bad_type(e, "logprobs", "a boolean");
        if (ep == SERVE_COMPLETION && !json_is_integer(v))
            return bad_type(e, "logprobs", "an integer");
        if (json_is_true(v) || (json_is_integer(v) && json_integer_value(v) != 0))
            return serve_fail(e, 400, "invalid_request_error", "unsupported_value", "logprobs",
                              "logprobs are not supported.");
    }
    return 0;
}

/* ---- the parts of a request ------------------------------------------------------ */

static int keep_text(serve_request *r, char *t, serve_error *e) {
    char **v = realloc(r->texts, (size_t)(r->n_texts + 1) * sizeof *v);
    if (!v) {
        free(t);
        return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    r->texts = v;
    r->texts[r->n_texts++] = t;
    return 0;
}

/* A message's content: a string, null (an assistant turn with tool calls),
 * or a list of parts whose text parts are joined. */
static int content_text(serve_request *r, json_t *c, size_t i, const char **out, serve_error *e) {
    char name[64];
    snprintf(name, sizeof name, "messages[%zu].content", i);
    if (!c || json_is_null(c)) {
        *out = "";
        return 0;
    }
    if (json_is_string(c)) {
        *out = json_string_value(c);
        return 0;
    }
    if (!json_is_array(c)) return bad_type(e, name, "a string or an array of content parts");
    size_t total = 0, k;
    json_t *part;
    json_array_foreach(c, k, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        snprintf(name, sizeof name, "messages[%zu].content[%zu]", i, k);
        if (!json_is_object(part) || !type) return bad_type(e, name, "an object with a type");
        if (strcmp(type, "text"))
            return serve_fail(e, 400, "invalid_request_error", "unsupported_content", name,
                              "Content parts of type '%.40s' are not supported (only 'text').",
                              type);
        json_t *t = json_object_get(part, "text");
        if (!json_is_string(t)) {
            snprintf(name, sizeof name, "messages[%zu].content[%zu].text", i, k);
            return bad_type(e, name, "a string");
        }
        total += json_string_length(t);
    }
    char *joined = malloc(total + 1);
    if (!joined) return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    size_t off = 0;
    json_array_foreach(c, k, part) {
        json_t *t = json_object_get(part, "text");
        memcpy(joined + off, json_string_value(t), json_string_length(t));
        off += json_string_length(t);
    }
    joined[off] = '\0';
    if (keep_text(r, joined, e)) return e->status;
    *out = joined;
    return 0;
}

static int parse_messages(serve_request *r, serve_error *e) {
    json_t *msgs = field(r->root, "messages");
    if (!msgs)
        return serve_fail(e, 400, "invalid_request_error", "missing_required_parameter", "messages",
                          "Missing required parameter: 'messages'.");
    if (!json_is_array(msgs)) return bad_type(e, "messages", "an array");
    size_t n = json_array_size(msgs);
    if (n == 0)
        return serve_fail(e, 400, "invalid_request_error", "empty_array", "messages",
                          "Invalid 'messages': empty array. Expected an array with at least 1 "
                          "element.");
    if (n > INT32_MAX / 2) return bad_value(e, "messages", "%g messages are too many", (double)n);
    r->messages = calloc(n, sizeof *r->messages);
    if (!r->messages) return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        char name[64];
        snprintf(name, sizeof name, "messages[%zu]", i);
        if (!json_is_object(m)) return bad_type(e, name, "an object");
        json_t *role = json_object_get(m, "role");
        snprintf(name, sizeof name, "messages[%zu].role", i);
        if (!role)
            return serve_fail(e, 400, "invalid_request_error", "missing_required_parameter", name,
                              "Missing required parameter: '%s'.", name);
        if (!json_is_string(role)) return bad_type(e, name, "a string");
        const char *rs = json_string_value(role);
        static const char *const roles[] = {"system", "user", "assistant", "tool", "developer"};
        bool known = false;
        for (size_t k = 0; k < sizeof roles / sizeof roles[0]; k++) known |= !strcmp(rs, roles[k]);
        if (!known)
            return serve_fail(e, 400, "invalid_request_error", "invalid_value", name,
                              "Invalid value: '%.40s'. Supported values are: 'system', "
                              "'assistant', 'user', 'tool' and 'developer'.",
                              rs);
        json_t *name_field = json_object_get(m, "name");
        if (name_field && !json_is_null(name_field) && !json_is_string(name_field)) {
            snprintf(name, sizeof name, "messages[%zu].name", i);
            return bad_type(e, name, "a string");
        }
        /* OpenAI's developer role is the system role of older models */
        r->messages[i].role = !strcmp(rs, "developer") ? "system" : rs;
        json_t *content = json_object_get(m, "content");
        if (!content && strcmp(rs, "assistant")) {
            snprintf(name, sizeof name, "messages[%zu].content", i);
            return serve_fail(e, 400, "invalid_request_error", "missing_required_parameter", name,
                              "Missing required parameter: '%s'.", name);
        }
        if (content_text(r, content, i, &r->messages[i].content, e)) return e->status;
    }
    r->n_messages = (int32_t)n;
    return 0;
}

static int token_array(serve_request *r, json_t *a, int32_t vocab_size, serve_error *e) {
    size_t n = json_array_size(a), i;
    if (n == 0)
        return serve_fail(e, 400, "invalid_request_error", "invalid_value", "prompt",
                          "Invalid 'prompt': an empty list of tokens.");
    if (n > INT32_MAX / 2) return bad_value(e, "prompt", "%g tokens are too many", (double)n);
    r->prompt_tokens = malloc(n * sizeof *r->prompt_tokens);
    if (!r->prompt_tokens) return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    json_t *t;
    json_array_foreach(a, i, t) {
        if (!json_is_integer(t))
            return bad_type(e, "prompt", "a string, an array of strings or of token ids");
        json_int_t id = json_integer_value(t);
        if (id < 0 || id >= vocab_size)
            return serve_fail(e, 400, "invalid_request_error", "invalid_value", "prompt",
                              "Invalid 'prompt': token id %lld at position %zu is outside the "
                              "vocabulary (0..%d).",
                              (long long)id, i, vocab_size - 1);
        r->prompt_tokens[i] = (int32_t)id;
    }
    r->n_prompt_tokens = (int32_t)n;
    return 0;
}

/* prompt: a string, a list of one string, a list of token ids, or a list of
 * one list of token ids (several prompts would be several choices). */
static int parse_prompt(serve_request *r, int32_t vocab_size, serve_error *e) {
    json_t *p = field(r->root, "prompt");
    if (!p)
        return serve_fail(e, 400, "invalid_request_error", "missing_required_parameter", "prompt",
                          "Missing required parameter: 'prompt'.");
    if (json_is_string(p)) {
        r->prompt = json_string_value(p);
        return 0;
    }
    if (!json_is_array(p))
        return bad_type(e, "prompt", "a string, an array of strings or of token ids");
    json_t *first = json_array_get(p, 0);
    if (json_is_string(first) || json_is_array(first)) {
        if (json_array_size(p) > 1)
            return serve_fail(e, 400, "invalid_request_error", "unsupported_value", "prompt",
                              "Invalid 'prompt': only one prompt per request is supported (%zu "
                              "given).",
                              json_array_size(p));
        if (json_is_string(first)) {
            r->prompt = json_string_value(first);
            return 0;
        }
        return token_array(r, first, vocab_size, e);
    }
    return token_array(r, p, vocab_size, e);
}

static int parse_stop(serve_request *r, serve_error *e) {
    json_t *s = field(r->root, "stop");
    if (!s) return 0;
    json_t *one[1] = {s};
    size_t n = 1;
    if (json_is_array(s)) {
        n = json_array_size(s);
        if (n > SERVE_MAX_STOP)
            return bad_value(e, "stop", "%g stop sequences; at most 16 are supported", (double)n);
    } else if (!json_is_string(s)) {
        return bad_type(e, "stop", "a string or an array of strings");
    }
    if (n == 0) return 0;
    r->stop = calloc(n, sizeof *r->stop);
    if (!r->stop) return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_is_array(s) ? json_array_get(s, i) : one[0];
        if (!json_is_string(v)) return bad_type(e, "stop", "a string or an array of strings");
        if (json_string_length(v) == 0)
            return serve_fail(e, 400, "invalid_request_error", "invalid_value", "stop",
                              "Invalid 'stop': an empty stop sequence.");
        r->stop[i] = json_string_value(v);
    }
    r->params.stop = r->stop;
    r->params.n_stop = (int32_t)n;
    return 0;
}

/* logit_bias: {"token id": bias in [-100, 100]} */
static int parse_logit_bias(serve_request *r, int32_t vocab_size, serve_error *e) {
    json_t *b = field(r->root, "logit_bias");
    if (!b) return 0;
    if (!json_is_object(b)) return bad_type(e, "logit_bias", "an object");
    size_t n = json_object_size(b);
    if (n == 0) return 0;
    if (n > SERVE_MAX_LOGIT_BIAS)
        return bad_value(e, "logit_bias", "%g entries; at most 1024 are supported", (double)n);
    r->logit_bias = calloc(n, sizeof *r->logit_bias);
    if (!r->logit_bias) return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    const char *key;
    json_t *v;
    size_t i = 0;
    json_object_foreach(b, key, v) {
        char *end;
        long long id = strtoll(key, &end, 10);
        if (!*key || *end || key[0] == '+' || key[0] == ' ' || id < 0 || id >= vocab_size)
            return serve_fail(e, 400, "invalid_request_error", "invalid_value", "logit_bias",
                              "Invalid key in 'logit_bias': '%.40s' is not a token id of the "
                              "vocabulary (0..%d).",
                              key, vocab_size - 1);
        if (!json_is_number(v)) return bad_type(e, "logit_bias", "numbers as values");
        double d = json_number_value(v);
        if (!isfinite(d) || d < -100 || d > 100)
            return bad_value(e, "logit_bias", "a bias of %g is outside [-100, 100]", d);
        r->logit_bias[i].token = (int32_t)id;
        r->logit_bias[i].bias = (float)d;
        i++;
    }
    r->params.logit_bias = r->logit_bias;
    r->params.n_logit_bias = (int32_t)i;
    return 0;
}

static int parse_sampling(serve_request *r, int32_t default_max_tokens, serve_error *e) {
    json_t *root = r->root;
    lmc_generate_params *p = &r->params;
    long long n = 0;
    bool given = false;
    double d;
    if (get_integer(root, "n", 1, 1 << 20, &n, &given, e)) return e->status;
    if (given && n != 1)
        return serve_fail(e, 400, "invalid_request_error", "unsupported_value", "n",
                          "Invalid 'n': %lld; only n = 1 (one choice per request) is supported.",
                          n);
    p->max_tokens = default_max_tokens;
    if (get_integer(root, "max_tokens", 1, SERVE_MAX_TOKENS_LIMIT, &n, &given, e)) return e->status;
    if (given) p->max_tokens = (int32_t)n, r->max_tokens_given = true;
    if (get_integer(root, "max_completion_tokens", 1, SERVE_MAX_TOKENS_LIMIT, &n, &given, e))
        return e->status;
    if (given) p->max_tokens = (int32_t)n, r->max_tokens_given = true;
    /* OpenAI's default temperature and top_p are 1 */
    p->temperature = 1;
    if (get_number(root, "temperature", 0, 2, false, &d, &given, e)) return e->status;
    if (given) p->temperature = (float)d;
    if (get_number(root, "top_p", 0, 1, false, &d, &given, e)) return e->status;
    if (given) {
        if (d == 0)
            p->temperature = 0; /* only the most likely token is left: greedy */
        else
            p->top_p = (float)d;
    }
    if (get_number(root, "presence_penalty", -2, 2, false, &d, &given, e)) return e->status;
    if (given) p->presence_penalty = (float)d;
    if (get_number(root, "frequency_penalty", -2, 2, false, &d, &given, e)) return e->status;
    if (given) p->frequency_penalty = (float)d;
    if (get_integer(root, "seed", INT64_MIN, INT64_MAX, &n, &given, e)) return e->status;
    if (given) p->seed = (uint64_t)n;
    /* mlx_lm.server's extensions; top_k -1 is off as in mlx-lm */
    if (get_integer(root, "top_k", -1, 1 << 30, &n, &given, e)) return e->status;
    if (given) p->top_k = n < 0 ? 0 : (int32_t)n;
    if (get_number(root, "min_p", 0, 1, false, &d, &given, e)) return e->status;
    if (given) p->min_p = (float)d;
    if (get_number(root, "repetition_penalty", 0, 1e6, true, &d, &given, e)) return e->status;
    if (given) p->repetition_penalty = (float)d;
    if (get_integer(root, "repetition_context_size", 1, 1 << 20, &n, &given, e)) return e->status;
    if (given) p->repetition_context = (int32_t)n;
    if (get_bool(root, "stream", &r->stream, e)) return e->status;
    json_t *so = field(root, "stream_options");
    if (so) {
        if (!json_is_object(so)) return bad_type(e, "stream_options", "an object");
        if (!r->stream)
            return serve_fail(e, 400, "invalid_request_error", "invalid_value", "stream_options",
                              "The 'stream_options' parameter is only allowed when 'stream' is "
                              "enabled.");
        if (get_bool(so, "include_usage", &r->include_usage, e)) {
            snprintf(e->param, sizeof e->param, "stream_options.include_usage");
            return e->status;
        }
    }
    return 0;
}

void serve_request_free(serve_request *r) {
    if (!r) return;
    for (int32_t i = 0; i < r->n_texts; i++) free(r->texts[i]);
    free(r->texts);
    free(r->messages);
    free(r->prompt_tokens);
    free(r->stop);
    free(r->logit_bias);
    json_decref(r->root);
    memset(r, 0, sizeof *r);
}

bool serve_request_parse(serve_endpoint ep, const char *body, size_t len, int32_t vocab_size,
                         int32_t default_max_tokens, serve_request *out, serve_error *err) {
    memset(out, 0, sizeof *out);
    memset(err, 0, sizeof *err);
    out->endpoint = ep;
    lmc_generate_params_default(&out->params);
    size_t bad = 0;
    if (!serve_utf8_valid(body, len, &bad)) {
        serve_fail(err, 400, "invalid_request_error", "invalid_utf8", NULL,
                   "The request body is not valid UTF-8 (byte %zu).", bad);
        return false;
    }
    json_error_t je;
    out->root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!out->root) {
        serve_fail(err, 400, "invalid_request_error", "invalid_json", NULL,
                   "We could not parse the JSON body of your request: %s (line %d, column %d).",
                   je.text, je.line, je.column);
        return false;
    }
    if (!json_is_object(out->root)) {
        serve_fail(err, 400, "invalid_request_error", "invalid_json", NULL,
                   "The request body must be a JSON object.");
        goto fail;
    }
    json_t *model = field(out->root, "model");
    if (model && !json_is_string(model)) {
        bad_type(err, "model", "a string");
        goto fail;
    }
    out->model = json_string_value(model);
    if (check_ignored(out->root, ep, err)) goto fail;
    if (ep == SERVE_CHAT ? parse_messages(out, err) : parse_prompt(out, vocab_size, err)) goto fail;
    if (parse_sampling(out, default_max_tokens, err) || parse_stop(out, err) ||
        parse_logit_bias(out, vocab_size, err))
        goto fail;
    return true;
fail:
    serve_request_free(out);
    return false;
}
