/* lmc_chat_template_render: finds a model folder's chat template and renders
 * it with the variables transformers' apply_chat_template passes
 * (tokenization_utils_base.py + utils/chat_template_utils.py
 * render_jinja_template): messages, tools, documents, add_generation_prompt,
 * the special tokens of tokenizer_config.json, then the caller's extra
 * variables (which override the special tokens, as **kwargs do there). */
#include "base/base.h"
#include "base/json.h"
#include "template/template.h"

#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>

/* The template text, from (first found) chat_template.jinja, the
 * tokenizer_config.json "chat_template" field, or chat_template.json (the
 * processor file of multimodal models). *source is malloc'd or NULL. */
typedef struct template_sources {
    json_t *config;    /* tokenizer_config.json, or NULL */
    char *jinja;       /* chat_template.jinja text, or NULL */
    json_t *chat_json; /* chat_template.json, or NULL */
} template_sources;

static lmc_status load_sources(const char *dir, template_sources *s) {
    memset(s, 0, sizeof *s);
    lmc_status st = LMC_OK;
    char *path = lmc_path_join(dir, "tokenizer_config.json");
    if (!path) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    if (lmc_file_exists(path)) st = lmc_json_load_file(path, &s->config);
    free(path);
    if (st != LMC_OK) return st;
    if (s->config && !json_is_object(s->config))
        return lmc_error(LMC_ERR_FORMAT, "%s/tokenizer_config.json is not a JSON object", dir);
    if (!(path = lmc_path_join(dir, "chat_template.jinja")))
        return lmc_error(LMC_ERR_NOMEM, "out of memory");
    if (lmc_file_exists(path)) st = lmc_read_file(path, &s->jinja, NULL);
    free(path);
    if (st != LMC_OK) return st;
    if (!(path = lmc_path_join(dir, "chat_template.json")))
        return lmc_error(LMC_ERR_NOMEM, "out of memory");
    if (lmc_file_exists(path)) st = lmc_json_load_file(path, &s->chat_json);
    free(path);
    return st;
}

static void free_sources(template_sources *s) {
    json_decref(s->config);
    json_decref(s->chat_json);
    free(s->jinja);
}

/* transformers' get_chat_template: a named list picks `name` when given,
 * else "tool_use" when tools are passed and such an entry exists, else
 * "default". (transformers treats an unknown name as template text; that is
 * refused here.) */
static lmc_status pick_template(const json_t *ct, const char *name, bool have_tools,
                                const char **out) {
    if (json_is_string(ct)) {
        *out = json_string_value(ct);
        return LMC_OK;
    }
    if (!json_is_array(ct))
        return lmc_error(LMC_ERR_FORMAT, "chat_template must be a string or a list");
    const char *want[3] = {name,
                           name         ? NULL
                           : have_tools ? "tool_use"
                                        : NULL,
                           name ? NULL : "default"};
    for (int k = 0; k < 3; k++) {
        if (!want[k]) continue;
        size_t i;
        json_t *e;
        json_array_foreach(ct, i, e) {
            const char *n = lmc_json_string(e, "name", NULL, NULL);
            const char *t = lmc_json_string(e, "template", NULL, NULL);
            if (n && t && !strcmp(n, want[k])) {
                *out = t;
                return LMC_OK;
            }
        }
    }
    if (name) return lmc_error(LMC_ERR_NOT_FOUND, "no chat template named '%s'", name);
    return lmc_error(LMC_ERR_NOT_FOUND,
                     "the model has several chat templates and none is named 'default'");
}

/* A special token is a string or an AddedToken dict {"content": ...}. */
static bool add_token(json_t *vars, const json_t *config, const char *key) {
    const json_t *v = config ? json_object_get(config, key) : NULL;
    if (json_is_object(v)) v = json_object_get(v, "content");
    return !json_is_string(v) ||
           json_object_set_new(vars, key, json_string(json_string_value(v))) == 0;
}

/* LMC_FIXED_DATE=YYYY-MM-DD[THH:MM:SS] makes strftime_now deterministic
 * (tests, reproducible prompts); the time is taken as UTC. */
static bool fixed_date(time_t *out) {
    const char *s = getenv("LMC_FIXED_DATE");
    if (!s || !*s) return false;
    int y, mo, d, h = 0, mi = 0, se = 0;
    if (sscanf(s, "%d-%d-%dT%d:%d:%d", &y, &mo, &d, &h, &mi, &se) < 3) return false;
    struct tm tm = {0};
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = se;
    *out = timegm(&tm);
    return true;
}

lmc_status lmc_chat_template_render(const char *dir, const char *messages_json,
                                    int add_generation_prompt, const char *extra_vars_json,
                                    char **out, size_t *len) {
    if (out) *out = NULL;
    if (len) *len = 0;
    if (!dir || !messages_json || !out)
        return lmc_error(LMC_ERR_INVALID_ARG,
                         "lmc_chat_template_render: dir, messages_json and out are required");
    json_t *messages = NULL, *extra = NULL, *vars = NULL;
    template_sources src;
    memset(&src, 0, sizeof src);
    lmc_template *tpl = NULL;
    lmc_status st = lmc_json_parse(messages_json, strlen(messages_json), "messages", &messages);
    if (st != LMC_OK) goto done;
    if (!json_is_array(messages)) {
        st = lmc_error(LMC_ERR_INVALID_ARG, "messages must be a JSON array");
        goto done;
    }
    if (extra_vars_json) {
        st = lmc_json_parse(extra_vars_json, strlen(extra_vars_json), "extra variables", &extra);
        if (st != LMC_OK) goto done;
        if (!json_is_object(extra)) {
            st = lmc_error(LMC_ERR_INVALID_ARG, "extra variables must be a JSON object");
            goto done;
        }
    }
    if ((st = load_sources(dir, &src)) != LMC_OK) goto done_src;

    const json_t *tools = extra ? json_object_get(extra, "tools") : NULL;
    bool have_tools = tools && !json_is_null(tools);
    const char *name = extra ? lmc_json_string(extra, "template_name", NULL, NULL) : NULL;
    const char *text = src.jinja;
    if (!text && src.config && json_object_get(src.config, "chat_template") &&
        !json_is_null(json_object_get(src.config, "chat_template")))
        st = pick_template(json_object_get(src.config, "chat_template"), name, have_tools, &text);
    if (st == LMC_OK && !text && src.chat_json) {
        const json_t *ct =
            json_is_object(src.chat_json) ? json_object_get(src.chat_json, "chat_template") : NULL;
        if (ct) st = pick_template(ct, name, have_tools, &text);
    }
    if (st != LMC_OK) goto done_src;
    if (!text) {
        st = lmc_error(LMC_ERR_NOT_FOUND,
                       "%s has no chat template (tokenizer_config.json, chat_template.jinja or "
                       "chat_template.json)",
                       dir);
        goto done_src;
    }
    if ((st = tpl_compile(text, strlen(text), &tpl)) != LMC_OK) {
        lmc_error_prefix(st, "chat template");
        goto done_src;
    }

    vars = json_object();
    if (!vars) {
        st = lmc_error(LMC_ERR_NOMEM, "out of memory");
        goto done_src;
    }
    static const char *const tokens[] = {"bos_token", "eos_token", "unk_token", "pad_token",
                                         "sep_token", "cls_token", "mask_token"};
    /* every jansson call that can fail for memory is counted: a variable
     * silently missing would render another prompt */
    bool ok = true;
    for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++)
        ok &= add_token(vars, src.config, tokens[i]);
    const json_t *extra_tokens =
        src.config ? json_object_get(src.config, "additional_special_tokens") : NULL;
    if (json_is_array(extra_tokens) && json_array_size(extra_tokens)) {
        json_t *list = json_array();
        size_t i;
        json_t *e;
        ok &= list != NULL;
        json_array_foreach(extra_tokens, i, e) {
            const json_t *c = json_is_object(e) ? json_object_get(e, "content") : e;
            if (list && json_is_string(c))
                ok &= json_array_append_new(list, json_string(json_string_value(c))) == 0;
        }
        ok &= json_object_set_new(vars, "additional_special_tokens", list) == 0;
    }
    if (extra) {
        const char *key;
        json_t *val;
        json_object_foreach(extra, key, val) {
            if (!strcmp(key, "template_name")) continue;
            ok &= json_object_set(vars, key, val) == 0;
        }
    }
    ok &= json_object_set(vars, "messages", messages) == 0;
    if (!json_object_get(vars, "tools")) ok &= json_object_set_new(vars, "tools", json_null()) == 0;
    if (!json_object_get(vars, "documents"))
        ok &= json_object_set_new(vars, "documents", json_null()) == 0;
    ok &= json_object_set_new(vars, "add_generation_prompt", json_boolean(add_generation_prompt)) ==
          0;
    if (!ok) {
        st = lmc_error(LMC_ERR_NOMEM, "out of memory");
        goto done_src;
    }

    tpl_options opts;
    tpl_options_default(&opts);
    opts.fixed_time = fixed_date(&opts.now);
    if ((st = tpl_render(tpl, vars, &opts, out, len)) != LMC_OK)
        lmc_error_prefix(st, "chat template");

done_src:
    free_sources(&src);
done:
    tpl_free(tpl);
    json_decref(vars);
    json_decref(extra);
    json_decref(messages);
    return st;
}
