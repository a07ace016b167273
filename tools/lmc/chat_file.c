/* lmc chat's conversation file (chat_file.h). */
#include "chat_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void chat_msgs_free(chat_msg *m, int n) {
    for (int i = 0; i < n; i++) {
        free(m[i].role);
        free(m[i].content);
    }
    free(m);
}

json_t *chat_file_json(const char *system, const chat_msg *msgs, int n_msgs) {
    json_t *root = json_object(), *list = json_array();
    if (!root || !list) goto fail;
    if (json_object_set_new(root, "format", json_string("lmc-chat")) ||
        json_object_set_new(root, "version", json_integer(1)) ||
        json_object_set_new(root, "system", system ? json_string(system) : json_null()))
        goto fail;
    for (int i = 0; i < n_msgs; i++) {
        json_t *m = json_object();
        if (!m || json_array_append_new(list, m) ||
            json_object_set_new(m, "role", json_string(msgs[i].role)) ||
            json_object_set_new(m, "content", json_string(msgs[i].content)))
            goto fail;
    }
    if (json_object_set_new(root, "messages", list)) {
        list = NULL;
        goto fail;
    }
    return root;
fail:
    json_decref(list);
    json_decref(root);
    return NULL;
}

bool chat_file_read(const char *path, char **system, chat_msg **msgs, int *n_msgs, char *why_out,
                    size_t why_size) {
    *system = NULL;
    *msgs = NULL;
    *n_msgs = 0;
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    if (!root) {
        if (err.line > 0)
            snprintf(why_out, why_size, "%s:%d:%d: %s", path, err.line, err.column, err.text);
        else
            snprintf(why_out, why_size, "%s", err.text);
        return false;
    }
    const char *why = NULL;
    json_t *format = json_object_get(root, "format"), *version = json_object_get(root, "version"),
           *sys = json_object_get(root, "system"), *list = json_object_get(root, "messages");
    size_t n = json_array_size(list);
    if (!json_is_object(root))
        why = "not a JSON object";
    else if (!json_is_string(format) || strcmp(json_string_value(format), "lmc-chat"))
        why = "not an lmc chat (\"format\" is not \"lmc-chat\")";
    else if (!json_is_integer(version) || json_integer_value(version) != 1)
        why = "unsupported \"version\" (this lmc reads version 1)";
    else if (sys && !json_is_null(sys) && !json_is_string(sys))
        why = "\"system\" is neither a string nor null";
    else if (!json_is_array(list))
        why = "\"messages\" is not an array";
    else if (n > (size_t)1 << 30)
        why = "too many messages";
    chat_msg *m = NULL;
    if (!why && n && !(m = calloc(n, sizeof *m))) why = "out of memory";
    size_t k = 0;
    for (; !why && k < n; k++) {
        json_t *e = json_array_get(list, k), *role = json_object_get(e, "role"),
               *content = json_object_get(e, "content");
        if (!json_is_string(role) || !json_is_string(content))
            why = "a message lacks a string \"role\" or \"content\"";
        else if (strcmp(json_string_value(role), "user") &&
                 strcmp(json_string_value(role), "assistant"))
            why = "a message's role is neither \"user\" nor \"assistant\"";
        else if (!(m[k].role = strdup(json_string_value(role))) ||
                 !(m[k].content = strdup(json_string_value(content))))
            why = "out of memory";
    }
    if (!why && sys && json_is_string(sys) && !(*system = strdup(json_string_value(sys))))
        why = "out of memory";
    json_decref(root);
    if (why) {
        snprintf(why_out, why_size, "%s: %s", path, why);
        chat_msgs_free(m, (int)k);
        free(*system);
        *system = NULL;
        return false;
    }
    *msgs = m;
    *n_msgs = (int)n;
    return true;
}
