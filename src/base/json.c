#include "json.h"

#include <math.h>

lmc_status lmc_json_load_file(const char *path, json_t **out) {
    char *text = NULL;
    size_t len = 0;
    lmc_status st = lmc_read_file(path, &text, &len);
    if (st != LMC_OK) return st;
    st = lmc_json_parse(text, len, path, out);
    free(text);
    return st;
}

lmc_status lmc_json_parse(const char *text, size_t len, const char *what, json_t **out) {
    json_error_t err;
    *out = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    if (!*out)
        return lmc_error(LMC_ERR_FORMAT, "%s: invalid JSON at line %d, column %d: %s", what,
                         err.line, err.column, err.text);
    return LMC_OK;
}

static const json_t *lookup(const json_t *obj, const char *key) {
    if (!obj || !json_is_object(obj)) return NULL;
    const json_t *v = json_object_get(obj, key);
    return (v && !json_is_null(v)) ? v : NULL;
}

int64_t lmc_json_int(const json_t *obj, const char *key, int64_t def, bool *bad) {
    const json_t *v = lookup(obj, key);
    if (!v) return def;
    if (json_is_integer(v)) return (int64_t)json_integer_value(v);
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == floor(d) && fabs(d) < 9e15) return (int64_t)d;
    }
    if (bad) *bad = true;
    return def;
}

double lmc_json_number(const json_t *obj, const char *key, double def, bool *bad) {
    const json_t *v = lookup(obj, key);
    if (!v) return def;
    if (json_is_number(v)) return json_number_value(v);
    if (bad) *bad = true;
    return def;
}

bool lmc_json_bool(const json_t *obj, const char *key, bool def, bool *bad) {
    const json_t *v = lookup(obj, key);
    if (!v) return def;
    if (json_is_boolean(v)) return json_is_true(v);
    if (bad) *bad = true;
    return def;
}

const char *lmc_json_string(const json_t *obj, const char *key, const char *def, bool *bad) {
    const json_t *v = lookup(obj, key);
    if (!v) return def;
    if (json_is_string(v)) return json_string_value(v);
    if (bad) *bad = true;
    return def;
}
