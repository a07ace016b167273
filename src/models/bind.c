#include "models/bind.h"

#include <stdio.h>
#include <string.h>

void lmc_binder_at(lmc_binder *b, const char *prefix) {
    snprintf(b->prefix, sizeof b->prefix, "%s", prefix);
}

lmc_status lmc_bind_explain(const lmc_binder *b, lmc_status st, const char *module,
                            const char *expected) {
    if (st != LMC_ERR_NOT_FOUND) return st;
    /* lmc_weights_get's message already lists what the file holds there. */
    return lmc_error_prefix(st, "%s expects '%s%s' with %s", b->arch, b->prefix, module, expected);
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
