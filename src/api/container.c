/* Factories (spec -> folder -> loaded model, tokenizer and KV cache), the
 * container that serializes access to them, and the processor (user input
 * -> model input) with generate on top. As MLXLMCommon's ModelFactory,
 * ModelContainer and UserInputProcessor. */
#include "api/api.h"
#include "api/hub.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>

struct lmc_container {
    pthread_mutex_t mu;
    lmc_context ctx;
};

/* ---- locating a model ------------------------------------------------------ */

lmc_status lmc_model_locate(const char *spec, char **dir) {
    if (!dir) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_model_locate: dir is NULL");
    *dir = NULL;
    if (!spec || !*spec) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_model_locate: no model given");
    if (lmc_dir_exists(spec)) {
        *dir = lmc_strdup(spec);
        return *dir ? LMC_OK : lmc_error(LMC_ERR_NOMEM, "out of memory");
    }
    const lmc_model_preset *p = lmc_registry_find(spec);
    const char *hub_id = p ? p->hub_id : spec;
    if (p && lmc_dir_exists(hub_id)) { /* a preset registered with a folder */
        *dir = lmc_strdup(hub_id);
        return *dir ? LMC_OK : lmc_error(LMC_ERR_NOMEM, "out of memory");
    }
    char *looked = NULL;
    lmc_status st = lmc_hub_find(hub_id, dir, &looked);
    if (st == LMC_OK) {
        free(looked);
        return LMC_OK;
    }
    char reg[512];
    if (p)
        snprintf(reg, sizeof reg, "the registry names it %s; ", p->hub_id);
    else
        snprintf(reg, sizeof reg, "not a registry name; ");
    if (st == LMC_ERR_NOT_FOUND)
        st = lmc_error(LMC_ERR_NOT_FOUND,
                       "model '%s' not found: no folder %s; %snot in the Hugging Face cache "
                       "(looked in %s)",
                       spec, spec, reg, looked ? looked : "the hub cache");
    else if (st == LMC_ERR_INVALID_ARG)
        st = lmc_error(LMC_ERR_NOT_FOUND,
                       "model '%s' not found: no folder %s; %sand not a hub id (ORG/NAME)", spec,
                       spec, reg);
    free(looked);
    return st;
}

/* ---- factories ------------------------------------------------------------------ */

static bool progress(const lmc_load_options *o, const char *stage, double f) {
    return o && o->progress && o->progress(stage, f, o->user_data);
}

#define CANCEL(stage)                                                                              \
    do {                                                                                           \
        if (progress(opt, stage, 1.0)) {                                                           \
            st = lmc_error(LMC_ERR_STOPPED, "loading %s stopped by the progress callback", dir);   \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

/* Whether a config.json describes a vision-language model. */
static lmc_status read_kind(const char *dir, lmc_model_kind *kind, char *model_type, size_t n) {
    char *path = lmc_path_join(dir, "config.json");
    if (!path) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    json_t *j = NULL;
    lmc_status st =
        lmc_file_exists(path)
            ? lmc_json_load_file(path, &j)
            : lmc_error(LMC_ERR_NOT_FOUND, "%s: not a model folder (no config.json)", dir);
    free(path);
    if (st != LMC_OK) return st;
    const char *mt = json_is_object(j) ? json_string_value(json_object_get(j, "model_type")) : NULL;
    snprintf(model_type, n, "%s", mt ? mt : "");
    *kind =
        json_is_object(j) && json_object_get(j, "vision_config") ? LMC_MODEL_VLM : LMC_MODEL_LLM;
    json_decref(j);
    return LMC_OK;
}

static void context_clear(lmc_context *c) {
    lmc_session_free(c->session);
    lmc_tokenizer_free(c->tok);
    lmc_model_free(c->model);
    free(c->dir);
    memset(c, 0, sizeof *c);
}

static lmc_status load(const char *spec, const lmc_load_options *opt, lmc_model_kind want,
                       lmc_container **out) {
    if (!out) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_llm_load: out is NULL");
    *out = NULL;
    if (opt && opt->max_kv_tokens < 0)
        return lmc_error(LMC_ERR_INVALID_ARG, "load: max_kv_tokens = %d is negative",
                         opt->max_kv_tokens);
    lmc_container *k = calloc(1, sizeof *k);
    if (!k) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    lmc_context *c = &k->ctx;
    char *dir = NULL;
    lmc_status st = LMC_OK;
    if (progress(opt, "resolve", 0)) {
        st = lmc_error(LMC_ERR_STOPPED, "loading stopped by the progress callback");
        goto fail;
    }
    if ((st = lmc_model_locate(spec, &dir)) != LMC_OK) goto fail;
    c->dir = dir;
    c->preset = lmc_registry_find(spec);
    CANCEL("resolve");
    char model_type[64];
    lmc_model_kind kind = LMC_MODEL_LLM;
    if ((st = read_kind(dir, &kind, model_type, sizeof model_type)) != LMC_OK) goto fail;
    if (kind == LMC_MODEL_VLM && want == LMC_MODEL_LLM) {
        st = lmc_error(LMC_ERR_UNSUPPORTED,
                       "%s is a vision-language model (model_type '%s'): load it with lmc_vlm_load",
                       dir, model_type);
        goto fail;
    }
    if (want == LMC_MODEL_VLM && kind != LMC_MODEL_VLM) {
        st = lmc_error(LMC_ERR_UNSUPPORTED,
                       "%s is not a vision-language model (model_type '%s'): load it with "
                       "lmc_llm_load",
                       dir, model_type);
        goto fail;
    }
    c->kind = kind;
    CANCEL("config");
    progress(opt, "weights", 0);
    if ((st = lmc_model_load(dir, &c->model)) != LMC_OK) goto fail;
    if (kind == LMC_MODEL_VLM && !c->model->vision.tokens_per_image) {
        st = lmc_error(LMC_ERR_UNSUPPORTED,
                       "%s: model_type '%s' is not a supported vision-language model (paligemma)",
                       dir, model_type);
        goto fail;
    }
    if (kind == LMC_MODEL_VLM &&
        (st = lmc_image_processor_load(dir, &c->image_processor)) != LMC_OK)
        goto fail;
    CANCEL("weights");
    char *tj = lmc_path_join(dir, "tokenizer.json");
    if (!tj) {
        st = lmc_error(LMC_ERR_NOMEM, "out of memory");
        goto fail;
    }
    bool has_tok = lmc_file_exists(tj);
    free(tj);
    if (has_tok && (st = lmc_tokenizer_load(dir, &c->tok)) != LMC_OK) goto fail;
    CANCEL("tokenizer");
    if ((st = lmc_session_create(c->model, opt ? opt->max_kv_tokens : 0, &c->session)) != LMC_OK)
        goto fail;
    CANCEL("template");
    if (pthread_mutex_init(&k->mu, NULL) != 0) {
        st = lmc_error(LMC_ERR_NOMEM, "cannot create the container's lock");
        goto fail;
    }
    if (progress(opt, "done", 1.0)) {
        pthread_mutex_destroy(&k->mu);
        st = lmc_error(LMC_ERR_STOPPED, "loading %s stopped by the progress callback", dir);
        goto fail;
    }
    *out = k;
    return LMC_OK;
fail:
    context_clear(c);
    free(k);
    return st;
}

lmc_status lmc_llm_load(const char *spec, const lmc_load_options *options, lmc_container **out) {
    return load(spec, options, LMC_MODEL_LLM, out);
}

lmc_status lmc_vlm_load(const char *spec, const lmc_load_options *options, lmc_container **out) {
    return load(spec, options, LMC_MODEL_VLM, out);
}

void lmc_container_free(lmc_container *k) {
    if (!k) return;
    pthread_mutex_lock(&k->mu); /* a running perform finishes first */
    pthread_mutex_unlock(&k->mu);
    pthread_mutex_destroy(&k->mu);
    context_clear(&k->ctx);
    free(k);
}

lmc_status lmc_container_perform(lmc_container *k, lmc_perform_fn fn, void *user_data) {
    if (!k || !fn) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_container_perform: bad arguments");
    pthread_mutex_lock(&k->mu);
    lmc_status st = fn(&k->ctx, user_data);
    pthread_mutex_unlock(&k->mu);
    return st;
}

lmc_model *lmc_context_model(lmc_context *c) {
    return c ? c->model : NULL;
}
const lmc_tokenizer *lmc_context_tokenizer(lmc_context *c) {
    return c ? c->tok : NULL;
}
lmc_session *lmc_context_session(lmc_context *c) {
    return c ? c->session : NULL;
}
const lmc_model_preset *lmc_context_preset(lmc_context *c) {
    return c ? c->preset : NULL;
}
const char *lmc_context_dir(lmc_context *c) {
    return c ? c->dir : NULL;
}

/* ---- user input -> model input ------------------------------------------------- */

void lmc_model_input_clear(lmc_model_input *in) {
    if (!in) return;
    free(in->tokens);
    free(in->rendered);
    free(in->pixel_values);
    memset(in, 0, sizeof *in);
}

static json_t *message(const char *role, const char *content) {
    return json_pack("{s:s, s:s}", "role", role, "content", content);
}

/* The messages as the template takes them, and the extra variables (tools
 * merged in). */
static lmc_status build_json(const lmc_context *c, const lmc_user_input *in, char **messages,
                             char **extra) {
    *messages = *extra = NULL;
    json_t *msgs = json_array();
    if (!msgs) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    lmc_status st = LMC_OK;
    bool ok = true; /* every append that can fail for memory */
    if (in->prompt) {
        if (in->system) ok &= json_array_append_new(msgs, message("system", in->system)) == 0;
        ok &= json_array_append_new(msgs, message("user", in->prompt)) == 0;
    }
    for (int32_t i = 0; i < in->n_messages && st == LMC_OK; i++) {
        const lmc_message *m = &in->messages[i];
        if (!m->role || !m->content)
            st = lmc_error(LMC_ERR_INVALID_ARG, "message %d has no role or content", i);
        else if (m->n_images < 0 || (m->n_images > 0 && !m->images))
            st = lmc_error(LMC_ERR_INVALID_ARG, "message %d: bad images", i);
        else if (m->n_images > 0 && c->kind != LMC_MODEL_VLM)
            st = lmc_error(LMC_ERR_INVALID_ARG,
                           "message %d has images, but %s is not a vision-language model", i,
                           c->dir);
        else
            ok &= json_array_append_new(msgs, message(m->role, m->content)) == 0;
    }
    if (st == LMC_OK && !ok) st = lmc_error(LMC_ERR_NOMEM, "out of memory");
    json_t *vars = NULL;
    if (st == LMC_OK && in->extra_vars_json) {
        json_error_t e;
        vars = json_loads(in->extra_vars_json, JSON_DECODE_ANY, &e);
        if (!json_is_object(vars))
            st = lmc_error(LMC_ERR_INVALID_ARG, "extra_vars_json is not a JSON object: %s",
                           vars ? "not an object" : e.text);
    }
    if (st == LMC_OK && in->tools_json) {
        json_error_t e;
        json_t *tools = json_loads(in->tools_json, JSON_DECODE_ANY, &e);
        if (!json_is_array(tools)) {
            json_decref(tools);
            st = lmc_error(LMC_ERR_INVALID_ARG, "tools_json is not a JSON array: %s",
                           tools ? "not an array" : e.text);
        } else {
            if (!vars) vars = json_object();
            if (json_object_set_new(vars, "tools", tools) != 0)
                st = lmc_error(LMC_ERR_NOMEM, "out of memory");
        }
    }
    if (st == LMC_OK) {
        *messages = json_dumps(msgs, JSON_COMPACT | JSON_ENSURE_ASCII);
        *extra = vars ? json_dumps(vars, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
        if (!*messages || (vars && !*extra)) st = lmc_error(LMC_ERR_NOMEM, "out of memory");
    }
    json_decref(msgs);
    json_decref(vars);
    return st;
}

static lmc_status encode(const lmc_context *c, const char *text, unsigned flags,
                         lmc_model_input *out) {
    int32_t *ids = NULL;
    size_t n = 0;
    lmc_status st = lmc_tokenizer_encode(c->tok, text, strlen(text), flags, &ids, &n);
    if (st != LMC_OK) return st;
    if (n == 0) {
        free(ids);
        return lmc_error(LMC_ERR_INVALID_ARG, "the input encodes to no tokens");
    }
    if (n > INT32_MAX) {
        free(ids);
        return lmc_error(LMC_ERR_LIMIT, "the input encodes to too many tokens");
    }
    out->tokens = ids;
    out->n_tokens = (int32_t)n;
    return LMC_OK;
}

lmc_status lmc_context_prepare(lmc_context *c, const lmc_user_input *in, lmc_model_input *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!c || !in || !out)
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_context_prepare: bad arguments");
    int kinds = (in->prompt != NULL) + (in->n_messages > 0) + (in->n_tokens > 0);
    if (kinds != 1)
        return lmc_error(LMC_ERR_INVALID_ARG,
                         "the input needs exactly one of a prompt, messages or tokens (%d given)",
                         kinds);
    if (in->n_messages < 0 || (in->n_messages > 0 && !in->messages) || in->n_tokens < 0 ||
        (in->n_tokens > 0 && !in->tokens))
        return lmc_error(LMC_ERR_INVALID_ARG, "bad messages or tokens array");
    if (in->n_images < 0 || (in->n_images > 0 && !in->images))
        return lmc_error(LMC_ERR_INVALID_ARG, "bad images array");
    if (in->n_images > 0 && !in->prompt)
        return lmc_error(LMC_ERR_INVALID_ARG,
                         "images go with a prompt (or in the messages' images)");
    if (in->n_images > 0 && c->kind != LMC_MODEL_VLM)
        return lmc_error(LMC_ERR_INVALID_ARG,
                         "the input has images, but %s is not a vision-language model", c->dir);
    if (c->kind == LMC_MODEL_VLM && in->n_tokens == 0) return lmc_vlm_prepare(c, in, out);
    if (in->n_tokens > 0) {
        out->tokens = malloc((size_t)in->n_tokens * sizeof(int32_t));
        if (!out->tokens) return lmc_error(LMC_ERR_NOMEM, "out of memory");
        memcpy(out->tokens, in->tokens, (size_t)in->n_tokens * sizeof(int32_t));
        out->n_tokens = in->n_tokens;
        return LMC_OK;
    }
    if (!c->tok)
        return lmc_error(LMC_ERR_INVALID_ARG,
                         "%s has no tokenizer.json: only token ids can be given", c->dir);
    char *messages = NULL, *extra = NULL, *rendered = NULL;
    size_t rlen = 0;
    lmc_status st = build_json(c, in, &messages, &extra);
    if (st == LMC_OK && !in->no_template) {
        st = lmc_chat_template_render(c->dir, messages, !in->continue_final_message, extra,
                                      &rendered, &rlen);
        if (st == LMC_ERR_NOT_FOUND && in->prompt) {
            lmc_clear_error();
            st = LMC_OK; /* no template: the plain prompt */
        } else if (st == LMC_OK && in->continue_final_message) {
            /* transformers: cut the text after the final message's content */
            const char *last = in->prompt ? in->prompt : in->messages[in->n_messages - 1].content;
            size_t b = 0, e = strlen(last);
            while (b < e && (last[b] == ' ' || last[b] == '\n' || last[b] == '\t')) b++;
            while (e > b && (last[e - 1] == ' ' || last[e - 1] == '\n' || last[e - 1] == '\t')) e--;
            char *hit = NULL; /* the last occurrence, as str.rindex */
            for (char *q = rendered; e > b && *q; q++)
                if (!strncmp(q, last + b, e - b)) hit = q;
            if (!hit)
                st = lmc_error(LMC_ERR_INVALID_ARG,
                               "continue_final_message: the final message is not in the rendered "
                               "template");
            else
                hit[e - b] = '\0';
        }
    } else if (st == LMC_OK && in->n_messages > 0 && in->no_template) {
        st = lmc_error(LMC_ERR_INVALID_ARG, "chat messages need the chat template");
    }
    if (st == LMC_OK) {
        if (rendered) {
            st = encode(c, rendered, 0, out); /* apply_chat_template: no special tokens added */
            out->rendered = rendered;
            rendered = NULL;
        } else {
            st = encode(c, in->prompt, LMC_ENCODE_ADD_SPECIAL, out);
        }
    }
    free(messages);
    free(extra);
    free(rendered);
    if (st != LMC_OK) lmc_model_input_clear(out);
    return st;
}

lmc_status lmc_context_generate(lmc_context *c, const lmc_user_input *in,
                                const lmc_generate_params *params, lmc_token_fn cb, void *user_data,
                                lmc_generate_result *result) {
    if (result) memset(result, 0, sizeof *result);
    if (!c) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_context_generate: context is NULL");
    lmc_model_input mi;
    lmc_status st = lmc_context_prepare(c, in, &mi);
    if (st != LMC_OK) return st;
    lmc_generate_params p;
    if (params)
        p = *params;
    else
        lmc_generate_params_default(&p);
    /* the preset's extra EOS tokens join the caller's */
    const char **eos = NULL;
    int32_t n_extra = 0;
    if (c->preset && c->preset->extra_eos)
        while (c->preset->extra_eos[n_extra]) n_extra++;
    if (n_extra > 0 && p.n_eos_strings >= 0 && (p.n_eos_strings == 0 || p.eos_strings)) {
        eos = malloc(((size_t)n_extra + (size_t)p.n_eos_strings) * sizeof *eos);
        if (!eos) {
            lmc_model_input_clear(&mi);
            return lmc_error(LMC_ERR_NOMEM, "out of memory");
        }
        for (int32_t i = 0; i < p.n_eos_strings; i++) eos[i] = p.eos_strings[i];
        int32_t n = p.n_eos_strings;
        for (int32_t i = 0; i < n_extra; i++)
            if (!c->tok || lmc_tokenizer_token_to_id(c->tok, c->preset->extra_eos[i]) >= 0)
                eos[n++] = c->preset->extra_eos[i]; /* only those the vocabulary has */
        p.eos_strings = eos;
        p.n_eos_strings = n;
    }
    st = lmc_generate_input(c->session, c->tok, &mi, &p, cb, user_data, result);
    free(eos);
    lmc_model_input_clear(&mi);
    return st;
}
