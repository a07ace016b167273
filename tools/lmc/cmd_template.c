/* lmc template: renders a model's chat template for a list of messages and
 * prints the prompt exactly (no newline added). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a minimal JSON validator (the CLI uses only lmc.h) ------------------ */

static const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

static const char *json_value(const char *p, int depth);

static const char *json_string_end(const char *p) {
    if (*p != '"') return NULL;
    for (p++; *p && *p != '"'; p++) {
        if ((unsigned char)*p < 0x20) return NULL;
        if (*p == '\\') {
            p++;
            if (*p == 'u') {
                for (int k = 1; k <= 4; k++)
                    if (!strchr("0123456789abcdefABCDEF", p[k]) || !p[k]) return NULL;
                p += 4;
            } else if (!*p || !strchr("\"\\/bfnrt", *p)) {
                return NULL;
            }
        }
    }
    return *p == '"' ? p + 1 : NULL;
}

static const char *json_number_end(const char *p) {
    if (*p == '-') p++;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (*p >= '0' && *p <= '9') p++;
    else
        return NULL;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9')) return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    return p;
}

static const char *json_value(const char *p, int depth) {
    if (depth > 200) return NULL;
    p = skip_ws(p);
    if (*p == '"') return json_string_end(p);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        p = skip_ws(p + 1);
        if (*p == close) return p + 1;
        for (;;) {
            if (close == '}') {
                p = json_string_end(skip_ws(p));
                if (!p) return NULL;
                p = skip_ws(p);
                if (*p++ != ':') return NULL;
            }
            p = json_value(p, depth + 1);
            if (!p) return NULL;
            p = skip_ws(p);
            if (*p == close) return p + 1;
            if (*p++ != ',') return NULL;
        }
    }
    static const char *const words[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++)
        if (!strncmp(p, words[k], strlen(words[k]))) return p + strlen(words[k]);
    return json_number_end(p);
}

static bool json_valid(const char *s) {
    const char *p = json_value(s, 0);
    return p && !*skip_ws(p);
}

/* ---- building the extra-variables object -------------------------------- */

typedef struct sbuf {
    char *data;
    size_t len, cap;
    bool failed;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) {
            b->failed = true;
            return;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void sb_puts(sbuf *b, const char *s) {
    sb_add(b, s, strlen(s));
}

static void sb_json_string(sbuf *b, const char *s, size_t n) {
    sb_puts(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            sb_add(b, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            sb_puts(b, esc);
        } else {
            sb_add(b, (const char *)&c, 1);
        }
    }
    sb_puts(b, "\"");
}

int cmd_template(int argc, char **argv) {
    const char *spec = NULL, *messages_path = NULL, *tools_path = NULL;
    bool add_gen = false;
    cli_strs vars = {0};
    const cli_option opts[] = {
        {"model", 'm', CLI_STR, &spec, "M",
         "a folder, registry name or cached hub id (default: the shipped model)", 0, 0, NULL},
        {"messages", 0, CLI_STR, &messages_path, "FILE",
         "a JSON list of messages as transformers takes them", 0, 0, NULL},
        {"add-generation-prompt", 0, CLI_FLAG, &add_gen, NULL, "end with the assistant's prompt", 0,
         0, NULL},
        {"var", 0, CLI_STRS, &vars, "NAME=VALUE",
         "a template variable (VALUE as JSON when it is valid JSON, else a string)", 0, 0, NULL},
        {"tools", 0, CLI_STR, &tools_path, "FILE", "a JSON list of tool schemas", 0, 0, NULL},
    };
    const cli_command cmd = {
        .name = "template",
        .synopsis = "[--model M] --messages FILE.json [--add-generation-prompt] [options]",
        .about = "Renders a model's chat template for a list of messages and prints the prompt\n"
                 "exactly (no newline added). LMC_FIXED_DATE=YYYY-MM-DD fixes the date\n"
                 "strftime_now() sees.",
        .options = opts,
        .n_options = sizeof opts / sizeof opts[0],
        .examples = "  lmc template --messages chat.json --add-generation-prompt \\\n"
                    "      --var enable_thinking=false --var date_string='26 Jul 2024'\n"};
    int r = cli_parse(&cmd, argc, argv);
    if (r >= 0) {
        cli_strs_free(&vars);
        return r;
    }
    sbuf extra = {0};
    int nvars = 0, rc = 1;
    char *messages = NULL, *tools = NULL, *out = NULL, *model = NULL;
    sb_puts(&extra, "{");
    if (!messages_path) {
        rc = cli_usage_error("template", "--messages is required");
        goto done;
    }
    for (int i = 0; i < vars.n; i++) {
        const char *v = vars.v[i], *eq = strchr(v, '=');
        if (!eq || eq == v) {
            rc = cli_usage_error("template", "--var wants NAME=VALUE, not '%s'", v);
            goto done;
        }
        if (nvars++) sb_puts(&extra, ",");
        sb_json_string(&extra, v, (size_t)(eq - v));
        sb_puts(&extra, ":");
        if (json_valid(eq + 1))
            sb_puts(&extra, eq + 1);
        else
            sb_json_string(&extra, eq + 1, strlen(eq + 1));
    }
    if (!(model = cli_model_dir("template", spec))) goto done;
    if (!(messages = cli_read_file(messages_path, NULL))) {
        rc = cli_fail("template", "cannot read %s", messages_path);
        goto done;
    }
    if (tools_path) {
        if (!(tools = cli_read_file(tools_path, NULL))) {
            rc = cli_fail("template", "cannot read %s", tools_path);
            goto done;
        }
        if (!json_valid(tools)) {
            rc = cli_fail("template", "%s is not valid JSON", tools_path);
            goto done;
        }
        if (nvars++) sb_puts(&extra, ",");
        sb_puts(&extra, "\"tools\":");
        sb_puts(&extra, tools);
    }
    sb_puts(&extra, "}");
    if (extra.failed) {
        rc = cli_fail("template", "out of memory");
        goto done;
    }
    size_t len = 0;
    lmc_status st = lmc_chat_template_render(model, messages, add_gen, extra.data, &out, &len);
    if (st != LMC_OK) {
        rc = cli_fail_status("template", st);
        goto done;
    }
    if (fwrite(out, 1, len, stdout) != len || fflush(stdout) != 0) {
        rc = cli_fail("template", "write error");
        goto done;
    }
    rc = 0;
done:
    cli_strs_free(&vars);
    lmc_free(model);
    lmc_free(out);
    free(messages);
    free(tools);
    free(extra.data);
    return rc;
}
