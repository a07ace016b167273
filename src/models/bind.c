#include "models/bind.h"

#include <stdio.h>
#include <string.h>

void lmc_binder_at(lmc_binder *b, const char *prefix) {
    snprintf(b->prefix, sizeof b->prefix, "%s", prefix);
}

/* Up to 12 names under prefix (prefix stripped) into list; *more counts
 * the rest. Returns how many were listed. */
static size_t list_names(const lmc_weights *w, const char *prefix, char *list, size_t size,
                         size_t *more) {
    size_t plen = strlen(prefix), off = 0, shown = 0;
    *more = 0;
    list[0] = '\0';
    for (size_t i = 0; i < w->n_tensors; i++) {
        const char *name = w->index[i]->name;
        if (strncmp(name, prefix, plen) != 0) continue;
        int n = shown < 12
                    ? snprintf(list + off, size - off, "%s%s", shown ? ", " : "", name + plen)
                    : -1;
        if (n < 0 || (size_t)n >= size - off) {
            list[off] = '\0';
            (*more)++;
            continue;
        }
        off += (size_t)n;
        shown++;
    }
    return shown;
}

lmc_status lmc_bind_explain(const lmc_binder *b, lmc_status st, const char *module,
                            const char *expected) {
    if (st != LMC_ERR_NOT_FOUND) return st;
    char msg[1024], list[480], where[160] = "";
    snprintf(msg, sizeof msg, "%s", lmc_last_error());
    size_t more;
    size_t shown = list_names(b->w, b->prefix, list, sizeof list, &more);
    if (shown && b->prefix[0])
        snprintf(where, sizeof where, " under '%s'", b->prefix);
    else if (!shown)
        shown = list_names(b->w, "", list, sizeof list, &more);
    char tail[32] = "";
    if (more) snprintf(tail, sizeof tail, " (+%zu more)", more);
    return lmc_error(st, "%s; %s expects '%s%s' with %s; the file holds%s: %s%s", msg, b->arch,
                     b->prefix, module, expected, where, shown ? list : "no tensors", tail);
}

lmc_status lmc_bind_linear(lmc_binder *b, lmc_linear *l, const char *module, int64_t in,
                           int64_t out, bool bias) {
    char name[256];
    snprintf(name, sizeof name, "%s%s", b->prefix, module);
    lmc_status st = lmc_linear_bind(l, b->w, name, in, out, bias);
    return lmc_bind_explain(b, st, module,
                            bias ? "weight and bias (or weight, scales, biases, bias)"
                                 : "weight (or weight, scales, biases)");
}

lmc_status lmc_bind_norm(lmc_binder *b, lmc_norm *n, const char *module, int64_t dim, float eps,
                         float offset, bool layer_norm) {
    char name[256];
    snprintf(name, sizeof name, "%s%s", b->prefix, module);
    lmc_status st = lmc_norm_bind(n, b->w, name, dim, eps, offset, layer_norm);
    return lmc_bind_explain(b, st, module, layer_norm ? "weight and bias" : "weight");
}

double lmc_config_optional(const json_t *cfg, const char *key, double def) {
    const json_t *v = json_object_get(cfg, key);
    if (!v) return def;
    return json_is_number(v) ? json_number_value(v) : 0.0;
}
